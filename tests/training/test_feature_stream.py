import csv

import pytest
import torch
from safetensors.torch import load_file

from ebmtrack.training.box_regression import BoxLossConfig
from ebmtrack.training.experiment import IoUNetExperiment, run_experiment
from ebmtrack.training.feature_cache import FeatureCacheConfig
from ebmtrack.training.feature_stream import FeatureStreamConfig, StreamedPairs
from ebmtrack.training.presets import preset_config


def stream_config(epochs: int = 3, num_workers: int = 0) -> IoUNetExperiment:
    """synthetic-smoke's tiny model with streamed features: ``epochs`` of two batches of 4."""
    config = preset_config("synthetic-smoke")
    config.feature_stream = FeatureStreamConfig(enabled=True, runtime="torch")
    trainer = config.trainer
    trainer.epochs, trainer.samples_per_epoch, trainer.batch_size = epochs, 8, 4
    trainer.val_samples, trainer.progress, trainer.num_workers = 4, False, num_workers
    return config


class CountingPairs(torch.utils.data.Dataset):
    """Wraps a data set and records every index asked for."""

    def __init__(self, samples):
        self.samples, self.asked = samples, []

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        self.asked.append(int(index))
        return self.samples[index]


def test_a_streamed_pair_is_its_processed_pair_with_the_backbones_features():
    config = stream_config()
    module = config.build_module()
    train, _ = config.build_datasets()
    streamed = StreamedPairs(train, module.backbone, module.layers, runtime="torch")
    item, pair = streamed[5], train[5]
    # The boxes and proposals are those of the pair the sampler draws for this index ...
    for key in ("ref_box", "test_box", "proposals", "proposal_iou"):
        torch.testing.assert_close(item[key], pair[key], rtol=0, atol=0)
    assert "ref_image" not in item and "test_image" not in item
    # ... and the features are the backbone's of its two crops, stored as float16.
    with torch.no_grad():
        feats = module.backbone(torch.stack([pair["ref_image"], pair["test_image"]]), module.layers)
    for level, layer in enumerate(module.layers):
        for row, which in enumerate(("ref", "test")):
            stored = item[f"{which}_feat{level}"]
            assert stored.dtype == torch.float16
            torch.testing.assert_close(stored.float(), feats[layer][row], rtol=2e-3, atol=2e-3)
    # The test box lies where the crop put the target: inside the crop, and not its centre.
    side = config.processing.output_size
    x, y, w, h = item["test_box"].tolist()
    assert 0 <= x + w / 2 <= side and 0 <= y + h / 2 <= side
    # Another index is another draw.
    assert not torch.equal(streamed[6]["test_box"], item["test_box"])


@pytest.mark.slow
def test_every_training_sample_is_a_new_pair_and_the_count_is_logged(tmp_path):
    config = stream_config(epochs=2)
    module = config.build_module()
    train, val = config.datasets(module, tmp_path, _single())
    counting = CountingPairs(train)
    from ebmtrack.training.trainer import Trainer

    trainer = Trainer(module, counting, config.trainer, tmp_path, val_data=val)
    results = trainer.fit()
    seen = config.trainer.epochs * config.trainer.samples_per_epoch
    assert sorted(counting.asked) == list(range(seen))  # each index once: distinct pairs
    assert [r.train["pairs_seen"] for r in results] == [8, 16]
    with open(tmp_path / "metrics.csv") as handle:
        rows = [row for row in csv.DictReader(handle) if row["split"] == "train"]
    assert [int(row["pairs_seen"]) for row in rows] == [8, 16]


def _single():
    from ebmtrack.training.distributed import init_distributed

    return init_distributed("cpu")


@pytest.mark.slow
def test_a_stopped_stream_resumes_with_the_same_pairs_and_weights(tmp_path):
    run_experiment(stream_config(), tmp_path / "full")
    cut = run_experiment(stream_config(), tmp_path / "cut", stop_after_epoch=1)
    assert [r.epoch for r in cut] == [1]
    torch.manual_seed(123)  # as if in a new process
    # The resumed part makes its features in a worker process: pairs depend on their index only.
    resumed = run_experiment(stream_config(num_workers=1), tmp_path / "cut", resume=True)
    assert [r.epoch for r in resumed] == [2, 3]
    full = load_file(str(tmp_path / "full" / IoUNetExperiment.model_file))
    again = load_file(str(tmp_path / "cut" / IoUNetExperiment.model_file))
    assert full.keys() == again.keys()
    for key in full:
        torch.testing.assert_close(again[key], full[key], rtol=0, atol=1e-6)


def test_stream_settings_are_checked():
    with pytest.raises(ValueError, match="feature_stream.runtime must be one of"):
        FeatureStreamConfig(runtime="tensorrt")
    with pytest.raises(ValueError, match="feature_stream.threads"):
        FeatureStreamConfig(threads=0)
    config = stream_config()
    with pytest.raises(ValueError, match="feature_stream or feature_cache, not both"):
        IoUNetExperiment(
            feature_stream=config.feature_stream, feature_cache=FeatureCacheConfig(enabled=True)
        )


def test_the_stream_trains_an_ebm_head_too(tmp_path):
    config = stream_config(epochs=1)
    config.loss = BoxLossConfig("nce+", {"num_samples": 16})
    results = run_experiment(config, tmp_path)
    assert results[-1].train["pairs_seen"] == 8
    assert (tmp_path / IoUNetExperiment.model_file).exists()


def test_pairs_sharing_a_reference_pass_it_through_the_backbone_once():
    config = stream_config()
    module = config.build_module()
    train, _ = config.build_datasets()
    streamed = StreamedPairs(
        train, module.backbone, module.layers, runtime="torch", tests_per_reference=3
    )
    calls = []
    extract = streamed._extractor()
    streamed._extract = lambda images: calls.append(len(images)) or extract(images)
    items = [streamed[i] for i in range(6)]
    assert calls == [4, 4]  # one batch per group: the reference and its three test crops
    group = train.group(1, 3)  # items 3, 4, 5
    with torch.no_grad():
        images = torch.stack([group[0]["ref_image"]] + [m["test_image"] for m in group])
        feats = module.backbone(images, module.layers)
    for member, item in zip(group, items[3:], strict=True):
        for key in ("ref_box", "test_box", "proposals", "proposal_iou"):
            torch.testing.assert_close(item[key], member[key], rtol=0, atol=0)
    for level, layer in enumerate(module.layers):
        for row, item in enumerate(items[3:], start=1):
            torch.testing.assert_close(item[f"ref_feat{level}"], items[3][f"ref_feat{level}"])
            torch.testing.assert_close(
                item[f"test_feat{level}"].float(), feats[layer][row], rtol=2e-3, atol=2e-3
            )
    assert not torch.equal(items[2]["ref_feat0"], items[3]["ref_feat0"])  # the next group


def test_tests_per_reference_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="feature_stream.tests_per_reference"):
        FeatureStreamConfig(enabled=True, tests_per_reference=0)
