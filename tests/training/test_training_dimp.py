import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch.utils.data import default_collate

from ebmtrack.data.processing import DiMPProcessing
from ebmtrack.data.synthetic import SyntheticConfig
from ebmtrack.models.backbones import create_backbone
from ebmtrack.models.dimp import DiMPClassifier, DiMPConfig
from ebmtrack.models.serialization import load_model
from ebmtrack.training.dimp import (
    CachedDiMPTrainingModule,
    CachedFrameSets,
    DiMPTrainingConfig,
    build_frame_set_cache,
    peak_stats,
    score_peak_offset,
)
from ebmtrack.training.experiment import (
    UNTRAINED_VAL_FILE,
    DiMPExperiment,
    experiment_from_dict,
    run_experiment,
)
from ebmtrack.training.feature_cache import FeatureCacheConfig
from ebmtrack.training.feature_stream import FeatureStreamConfig, StreamedFrameSets
from ebmtrack.training.presets import preset_config
from ebmtrack.training.sources import DataConfig
from ebmtrack.weights import dimp_classifier


def test_peak_stats_measure_the_best_cell_against_the_target():
    scores = torch.zeros(2, 7, 7)
    scores[0, 3, 4] = 1.0  # peak at cell (x 4, y 3): pixel (64, 48) for stride 16, k = 4
    scores[1, 2, 2] = 1.0  # pixel (32, 32)
    boxes = torch.tensor(
        [[54.0, 38.0, 20.0, 20.0], [16.0, 40.0, 40.0, 16.0]]
    )  # centres (64, 48), (36, 48)
    offset = score_peak_offset(scores, boxes, stride=16, filter_size=4)
    torch.testing.assert_close(offset, torch.tensor([[0.0, 0.0], [-4.0, -16.0]]))
    stats = peak_stats(scores, boxes, stride=16, filter_size=4)
    torch.testing.assert_close(
        stats["peak_error"], torch.tensor((0 + (4.0**2 + 16.0**2) ** 0.5) / 2)
    )
    assert stats["peak_in_box"].item() == 0.5  # the second peak is 16 px above a 16-px-high box


def test_label_sigma_is_dimps_output_sigma():
    assert DiMPTrainingConfig().label_sigma(16) == pytest.approx(0.25 / 5 * 18)


def tiny_config():
    """dimp-cpu on generated sequences: random MobileNetV2, 96-pixel crops (6 x 6 maps), 16
    cached samples, 3 epochs of 8, batch 4."""
    config = preset_config("dimp-cpu")
    config.pretrained = False
    config.data = DataConfig(
        source="synthetic",
        synthetic_sequences=12,
        synthetic=SyntheticConfig(num_frames=20, frame_size=(120, 160)),
        max_gap=10,
    )
    config.dimp = DiMPTrainingConfig(processing=DiMPProcessing(output_size=96), feature_dim=16)
    config.feature_cache.train_pairs, config.feature_cache.chunk_size = 16, 8
    trainer = config.trainer
    trainer.epochs, trainer.samples_per_epoch, trainer.batch_size = 3, 8, 4
    trainer.val_samples, trainer.progress, trainer.lr_step_epochs = 4, False, 2
    return config


def cached_batch(module, samples, indices):
    """A cached-feature batch of ``samples[indices]``, made without the cache files."""
    items = default_collate([samples[i] for i in indices])
    return {
        "train_feat": module.features(items["train_images"]).half(),
        "test_feat": module.features(items["test_images"]).half(),
        "train_boxes": items["train_boxes"],
        "test_boxes": items["test_boxes"],
    }


@pytest.mark.slow
def test_a_few_steps_on_a_fixed_batch_lower_the_loss():
    config = tiny_config()
    module = config.build_module()
    assert isinstance(module, CachedDiMPTrainingModule)
    samples, _ = config.build_datasets(num_pairs=4)
    batch = cached_batch(module, samples, range(4))
    module.train()
    optimizer = torch.optim.Adam([p for p in module.parameters() if p.requires_grad], lr=1e-3)
    losses = []
    for _ in range(24):  # the first steps are bumpy (12 ended at 0.76x on a Xeon)
        loss, stats = module(batch)
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    names = {"clf_init", "clf_final", "peak_error", "peak_in_box"}
    assert set(stats) == names | {"peak_error_init", "peak_in_box_init"}
    assert losses[-1] < 0.75 * losses[0]
    # The gradient reaches every part: features, initializer and the optimizer's functions.
    assert all(p.grad is not None for p in module.classifier.parameters())
    assert all(p.grad is None for p in module.backbone.parameters())


def test_cached_module_gives_the_loss_of_the_image_module(tmp_path):
    config = tiny_config()
    cached = config.build_module().eval()
    config.feature_cache.enabled = False
    images = config.build_module().eval()
    samples, _ = config.build_datasets(num_pairs=3)
    cache = build_frame_set_cache(samples, cached, tmp_path, key="k", chunk_size=2, progress=False)
    assert cache["train_feat"].dtype == torch.float16 and cache["train_feat"].shape[:2] == (3, 3)
    # A second build reads every chunk back; another key rebuilds them.
    again = build_frame_set_cache(samples, cached, tmp_path, key="k", chunk_size=2, progress=False)
    assert torch.equal(again["test_feat"], cache["test_feat"])
    with torch.no_grad():
        from_cache, _ = cached(default_collate([CachedFrameSets(cache)[i] for i in range(3)]))
        from_images, _ = images(default_collate([samples[i] for i in range(3)]))
    torch.testing.assert_close(from_cache, from_images, rtol=2e-2, atol=1e-3)


def stream_config():
    """:func:`tiny_config` with every sample a fresh set of frames whose features the
    DataLoader workers compute (in eager float32, exact on any CPU)."""
    config = tiny_config()
    config.feature_cache = FeatureCacheConfig()
    config.feature_stream = FeatureStreamConfig(enabled=True, runtime="torch")
    config.trainer.shuffle = False
    return config


def test_a_streamed_frame_set_is_its_processed_set_with_the_backbones_features():
    config = stream_config()
    module = config.build_module()
    assert isinstance(module, CachedDiMPTrainingModule)
    samples, _ = config.build_datasets(num_pairs=6)
    streamed = StreamedFrameSets(samples, module.backbone, module.layer, runtime="torch")
    item, frames = streamed[4], samples[4]
    assert set(item) == {"train_feat", "test_feat", "train_boxes", "test_boxes"}
    for which in ("train", "test"):
        torch.testing.assert_close(item[f"{which}_boxes"], frames[f"{which}_boxes"], rtol=0, atol=0)
        assert item[f"{which}_feat"].dtype == torch.float16
        expected = module.features(frames[f"{which}_images"])
        torch.testing.assert_close(item[f"{which}_feat"].float(), expected, rtol=2e-3, atol=2e-3)
    # The streamed loss is the image module's on the same sets (features stored as float16).
    config.feature_stream = FeatureStreamConfig()
    images = config.build_module().eval()
    with torch.no_grad():
        from_stream, _ = module.eval()(default_collate([streamed[i] for i in range(3)]))
        from_images, _ = images(default_collate([samples[i] for i in range(3)]))
    torch.testing.assert_close(from_stream, from_images, rtol=2e-2, atol=1e-3)


def test_a_dimp_stream_draws_whole_sets_and_not_with_the_cache():
    config = stream_config()
    with pytest.raises(ValueError, match="tests_per_reference .* must be 1, got 2"):
        DiMPExperiment(feature_stream=FeatureStreamConfig(enabled=True, tests_per_reference=2))
    with pytest.raises(ValueError, match="enable feature_stream or feature_cache, not both"):
        DiMPExperiment(
            feature_stream=config.feature_stream, feature_cache=FeatureCacheConfig(enabled=True)
        )
    stream = preset_config("dimp-pack-stream")
    assert stream.feature_stream.enabled and stream.feature_stream.runtime == "onnx"
    assert not stream.feature_cache.enabled and not stream.trainer.shuffle
    clips = preset_config("dimp-pack-clips")
    assert (stream.data, stream.dimp) == (clips.data, clips.dimp)  # the same samples, fresh


def full_cut_and_resumed(make_config, tmp_path):
    """The epoch results of a whole run, of the same run stopped after epoch 1, and of its
    resumption (one thread, as in a fresh process): folders ``full`` and ``cut``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        full = run_experiment(make_config(), tmp_path / "full")
        cut = run_experiment(make_config(), tmp_path / "cut", stop_after_epoch=1)
        assert not (tmp_path / "cut" / make_config().model_file).exists()  # written at the end
        torch.manual_seed(777)  # as if in a new process
        resumed = run_experiment(make_config(), tmp_path / "cut", resume=True)
    finally:
        torch.set_num_threads(threads)
    return full, cut, resumed


@pytest.mark.slow
def test_a_streamed_dimp_run_sees_distinct_sets_and_resumes_with_the_same_weights(tmp_path):
    full, _, resumed = full_cut_and_resumed(stream_config, tmp_path)
    assert [r.train["pairs_seen"] for r in full] == [8, 16, 24]  # 3 epochs of 8 fresh sets
    assert resumed[-1].val["loss"] == full[-1].val["loss"]
    name = stream_config().model_file
    first = load_file(str(tmp_path / "full" / name))
    second = load_file(str(tmp_path / "cut" / name))
    for key in first:
        assert torch.equal(first[key], second[key]), key


@pytest.mark.slow
def test_dimp_training_resumed_after_a_stop_matches_the_uninterrupted_run(tmp_path):
    full, cut, resumed = full_cut_and_resumed(tiny_config, tmp_path)
    assert [r.epoch for r in cut] == [1]
    name = tiny_config().model_file
    assert name == "dimp_classifier.safetensors"
    assert [r.epoch for r in full] == [1, 2, 3] and [r.epoch for r in resumed] == [2, 3]
    assert resumed[-1].val["loss"] == full[-1].val["loss"]
    untrained = json.loads((tmp_path / "full" / UNTRAINED_VAL_FILE).read_text())
    assert {"loss", "peak_error", "peak_in_box", "peak_error_init"} <= set(untrained)
    first = load_file(str(tmp_path / "full" / name))
    second = load_file(str(tmp_path / "cut" / name))
    assert first.keys() == second.keys()
    for key in first:
        assert torch.equal(first[key], second[key]), key
    model = load_model(tmp_path / "full" / name, expected="DiMPClassifier")
    assert model.config.feature_dim == 16 and model.config.in_channels == 96


def test_dimp_cpu_preset_uses_dimps_recipe():
    config = preset_config("dimp-cpu")
    module = config.build_module()
    classifier = module.classifier.config
    assert (classifier.in_channels, classifier.feature_dim, classifier.num_blocks) == (96, 128, 1)
    assert classifier.init_gauss_sigma == pytest.approx(0.9)
    assert config.data.max_gap == 30 and config.dimp.loss_weights == (100.0, 100.0, 400.0)
    processing = config.dimp.processing
    assert (processing.output_size, processing.search_area_factor) == (288, 5.0)
    assert processing.center_jitter_factor == (3.0, 4.5)
    assert processing.scale_jitter_factor == (0.25, 0.5)
    assert isinstance(config, DiMPExperiment) and config.model_file == "dimp_classifier.safetensors"
    with pytest.raises(ValueError, match="config.model must be one of iou-net, dimp, got 'dimpp'"):
        experiment_from_dict({"model": "dimpp"})


def test_classifier_must_match_the_backbone_layer():
    backbone = create_backbone("mobilenetv2", pretrained=False)
    with pytest.raises(ValueError, match="do not match the backbone layer features.13"):
        CachedDiMPTrainingModule(
            backbone, DiMPClassifier(DiMPConfig(in_channels=64)), DiMPTrainingConfig()
        )


WEIGHTS = Path(__file__).resolve().parents[2] / "src" / "ebmtrack" / "weights"


def test_shipped_classifier_matches_its_record_and_loads():
    path = dimp_classifier("mobilenetv2")
    if path is None:
        pytest.skip("no DiMP classifier ships in this checkout")
    assert dimp_classifier("resnet50") is None
    assert path.stat().st_size < 2 * 1024 * 1024
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert f"`{path.name}` | " in (WEIGHTS / "README.md").read_text()
    assert digest in (WEIGHTS / "README.md").read_text()
    model = load_model(path, expected="DiMPClassifier")
    config = model.config
    assert (config.backbone, config.feature_layer, config.in_channels) == (
        "mobilenetv2",
        "features.13",
        96,
    )
    # Trained, not the seeded initialisation: the learned step length moved off its start value.
    assert model.optimizer.log_step_length.exp().item() != pytest.approx(0.9, abs=1e-3)
