import csv
import hashlib

import cv2
import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import load_file

from ebmtrack.data.processing import AtomProcessing
from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequences
from ebmtrack.training.box_regression import BoxLossConfig
from ebmtrack.training.config import config_to_dict
from ebmtrack.training.experiment import (
    EXPERIMENTS,
    DiMPExperiment,
    Experiment,
    IoUNetExperiment,
    experiment_from_dict,
    run_experiment,
    setting_names,
)
from ebmtrack.training.feature_cache import FeatureCacheConfig
from ebmtrack.training.legacy import upgrade_config_dict
from ebmtrack.training.presets import PRESETS, preset_config
from ebmtrack.training.runs import load_experiment
from ebmtrack.training.sources import DataConfig


def tiny_config(loss: BoxLossConfig, num_workers: int = 0):
    """Three epochs of two batches of 4 pairs on the synthetic-smoke model."""
    config = preset_config("synthetic-smoke")
    config.loss = loss
    trainer = config.trainer
    trainer.epochs, trainer.samples_per_epoch, trainer.batch_size = 3, 8, 4
    trainer.val_samples, trainer.progress, trainer.num_workers = 4, False, num_workers
    return config


NCE_PLUS = BoxLossConfig("nce+", {"num_samples": 16})


@pytest.mark.slow
def test_box_training_resumed_after_a_stop_matches_the_uninterrupted_run(tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_experiment(tiny_config(NCE_PLUS), tmp_path / "full")
        cut = run_experiment(tiny_config(NCE_PLUS), tmp_path / "cut", stop_after_epoch=1)
        assert [r.epoch for r in cut] == [1]
        assert not (tmp_path / "cut" / IoUNetExperiment.model_file).exists()
        torch.manual_seed(777)  # as if in a new process
        # The resumed part loads its data in 2 worker processes: pairs are seeded by their index,
        # so where they are made does not matter.
        resumed = run_experiment(
            tiny_config(NCE_PLUS, num_workers=2), tmp_path / "cut", resume=True
        )
        assert [r.epoch for r in resumed] == [2, 3]
    finally:
        torch.set_num_threads(threads)
    # NCE+ draws noise and jitter every step: equal weights need exact RNG handling.
    full = load_file(str(tmp_path / "full" / IoUNetExperiment.model_file))
    again = load_file(str(tmp_path / "cut" / IoUNetExperiment.model_file))
    assert full.keys() == again.keys()
    for key in full:
        torch.testing.assert_close(again[key], full[key], rtol=0, atol=1e-6)


def write_got10k_split(root, split: str, sequences) -> None:
    """A GOT-10k-layout split folder made of generated sequences."""
    split_dir = root / split
    split_dir.mkdir(parents=True)
    names = []
    for k, sequence in enumerate(sequences):
        name = f"GOT-10k_{split.title()}_{k + 1:06d}"
        folder = split_dir / name
        folder.mkdir()
        for i in range(len(sequence)):
            frame = cv2.cvtColor(sequence.frame(i), cv2.COLOR_RGB2BGR)
            cv2.imwrite(str(folder / f"{i + 1:08d}.jpg"), frame)
        np.savetxt(folder / "groundtruth.txt", sequence.ground_truth, fmt="%.4f", delimiter=",")
        np.savetxt(folder / "cover.label", sequence.visible.astype(int) * 8, fmt="%d")
        names.append(name)
    (split_dir / "list.txt").write_text("\n".join(names) + "\n")


def test_training_on_a_data_set_folder_with_validation_split(tmp_path):
    look = SyntheticConfig(num_frames=6, frame_size=(96, 128))
    write_got10k_split(tmp_path / "got10k", "train", SyntheticSequences(3, look, seed=5))
    write_got10k_split(tmp_path / "got10k", "val", SyntheticSequences(2, look, seed=6))
    config = tiny_config(BoxLossConfig("mse"))
    config.data = DataConfig(
        source="datasets", roots={"got10k": str(tmp_path / "got10k")}, val_splits={"got10k": "val"}
    )
    config.trainer.epochs = 1
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        (result,) = run_experiment(config, tmp_path / "run")
    finally:
        torch.set_num_threads(threads)
    assert result.val is not None and 0 <= result.val["top1_iou"] <= 1
    with open(tmp_path / "run" / "metrics.csv") as handle:
        assert [row["split"] for row in csv.DictReader(handle)] == ["train", "val"]


# Feature-cache keys of the presets, as the code before the experiment classes made them:
# caches built then are found by these keys (a cached chunk's header holds the key).
PACK_CPU_KEY = (
    '{"backbone": "mobilenetv2", "backbone_weights": null, "data": {"holdout": ["Biker", "boat1",'
    ' "car1", "group2_2", "zebrafish1"], "max_gap": 50, "pack": "../shared/data/train", "pack_par'
    'ts": ["sequences", "coco128", "tiny-imagenet"], "pack_tracks": 0, "roots": {}, "sequence_fol'
    'der": null, "splits": {}, "synthetic": {"camera_speed": 1.0, "frame_size": [240, 320], "max_'
    'aspect_ratio": 2.5, "min_visible_fraction": 0.3, "num_distractors": [0, 2], "num_frames": 10'
    '0, "num_occluders": [0, 2], "object_rotation": 5.0, "rotation_rate": 1.5, "scale_rate": 0.01'
    ', "speed": 0.015, "target_scale": [0.12, 0.4]}, "synthetic_sequences": 2000, "val_splits": {'
    '}, "weights": {"sequences": 1.0, "stills": 0.5, "synthetic": 1.5}}, "head_dims": 128, "head_'
    'width": 0.5, "pretrained": true, "processing": {"brightness_jitter": 0.2, "center_jitter_fac'
    'tor": [0.0, 4.5], "flip_probability": 0.0, "gmm_sigmas": [[0.05, 0.05], [0.5, 0.5]], "graysc'
    'ale_probability": 0.05, "gt_sigma": [0.05, 0.05], "num_proposals": 16, "output_size": 288, "'
    'proposal_min_iou": 0.1, "proposal_sigma_factors": [0.01, 0.05, 0.1, 0.2, 0.3], "proposals": '
    '"iou", "scale_jitter_factor": [0.0, 0.5], "search_area_factor": 5.0}, "seed": 1}'
)
DIMP_PACK_CPU_KEY = (
    '{"backbone": "mobilenetv2", "backbone_weights": null, "data": {"holdout": ["Biker", "boat1",'
    ' "car1", "group2_2", "zebrafish1"], "max_gap": 30, "pack": "../shared/data/train", "pack_par'
    'ts": ["sequences", "coco128", "tiny-imagenet"], "pack_tracks": 0, "roots": {}, "sequence_fol'
    'der": null, "splits": {}, "synthetic": {"camera_speed": 1.0, "frame_size": [240, 320], "max_'
    'aspect_ratio": 2.5, "min_visible_fraction": 0.3, "num_distractors": [0, 2], "num_frames": 10'
    '0, "num_occluders": [0, 2], "object_rotation": 5.0, "rotation_rate": 1.5, "scale_rate": 0.01'
    ', "speed": 0.015, "target_scale": [0.12, 0.4]}, "synthetic_sequences": 2000, "val_splits": {'
    '}, "weights": {"sequences": 1.0, "stills": 0.5, "synthetic": 1.5}}, "dimp": {"num_test_frame'
    's": 3, "num_train_frames": 3, "processing": {"brightness_jitter": 0.2, "center_jitter_factor'
    '": [3.0, 4.5], "grayscale_probability": 0.05, "output_size": 288, "scale_jitter_factor": [0.'
    '25, 0.5], "search_area_factor": 5.0}}, "model": "dimp", "pretrained": true, "seed": 1}'
)
PRESET_KEY_SHA256 = {
    "atom-r18": "31f8db46ee8cb418418cf03ed8680cda27f351fc17d3df26c1829b1ee09f10b4",
    "synthetic-smoke": "0dd7be5009fb5afaa48331ce77b74c762ea06d680ce88353398c412bb26bbe2f",
    "default-cpu": "6bbc5b52b1a0f568ee49934969f59614ada11fb4a6758348006ce05185481914",
    "dimp-cpu": "47fcaf6ddbc78aa27a251ad1661fa09fa03a3f40da7fb6fd3091898176f8acd1",
    "pack-cpu": "8baed4d0681380d0274feba1e80dfd20adb0d8efca0c0b5827a3547d55910536",
    "dimp-pack-cpu": "10a270844c7150c88742621dd1d3527045aefef2bb8e8fd7b7b230a741250247",
    "dimp-pack-clips": "6cbd30906f153a877bf8b0853fa50586d7d11fd25b8dbd2cd227fb99cccad94f",
    "pack-stream": "2ff26f76921156313d640d0ea8278f198d0a986a552f2eaeb42d92ff402fc431",
    # dimp-pack-clips' samples, streamed instead of cached
    "dimp-pack-stream": "6cbd30906f153a877bf8b0853fa50586d7d11fd25b8dbd2cd227fb99cccad94f",
}

KINDS = {
    "atom-r18": IoUNetExperiment,
    "synthetic-smoke": IoUNetExperiment,
    "default-cpu": IoUNetExperiment,
    "pack-cpu": IoUNetExperiment,
    "pack-stream": IoUNetExperiment,
    "dimp-cpu": DiMPExperiment,
    "dimp-pack-cpu": DiMPExperiment,
    "dimp-pack-clips": DiMPExperiment,
    "dimp-pack-stream": DiMPExperiment,
}


def legacy_dict(config) -> dict:
    """``config`` as the code before the experiment classes wrote it to ``config.yaml``: one
    mapping with the keys of both kinds (those of the other kind at their defaults)."""
    iou_net, dimp = config_to_dict(IoUNetExperiment()), config_to_dict(DiMPExperiment())
    data = {**iou_net, **dimp, **config_to_dict(config)}
    del data["data"]["source"]  # the data source was the one whose fields were set
    order = ("preset", "model", "backbone", "pretrained", "backbone_weights", "head_width")
    order += ("head_dims", "processing", "data", "loss", "dimp", "trainer", "feature_cache")
    # feature_stream and head_windows came later: the code before never wrote them (a preset
    # that sets one keeps it).
    for later in ("feature_stream", "head_windows"):
        if data[later] == iou_net[later]:
            del data[later]
        else:
            order += (later,)
    assert set(data) == set(order)
    return {key: data[key] for key in order}


def write_yaml(data: dict, path) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_every_preset_has_a_kind():
    assert set(KINDS) == set(PRESETS)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_each_preset_builds_its_class_and_keeps_its_cache_key(preset):
    config = preset_config(preset)
    assert type(config) is KINDS[preset] and EXPERIMENTS[config.model] is KINDS[preset]
    assert config.preset == preset
    key = config.cache_key()
    assert hashlib.sha256(key.encode()).hexdigest() == PRESET_KEY_SHA256[preset]
    # A run's config.yaml of the code before, with the settings of both kinds, keeps the key.
    again = experiment_from_dict(upgrade_config_dict(legacy_dict(config)))
    assert type(again) is type(config) and again.cache_key() == key
    assert config_to_dict(again) == config_to_dict(config)


def test_the_pack_presets_keep_the_keys_of_their_existing_caches():
    assert preset_config("pack-cpu").cache_key() == PACK_CPU_KEY
    assert preset_config("dimp-pack-cpu").cache_key() == DIMP_PACK_CPU_KEY
    # Only what the crops and features depend on: not the loss, the loop or the folder.
    config = preset_config("pack-cpu")
    config.loss, config.trainer.epochs = BoxLossConfig("nce+"), 9
    config.feature_cache = FeatureCacheConfig(enabled=True, folder="elsewhere")
    assert config.cache_key() == PACK_CPU_KEY
    config.processing = AtomProcessing(output_size=96)
    assert config.cache_key() != PACK_CPU_KEY


def test_each_kind_has_only_its_own_settings():
    iou_net, dimp = setting_names(IoUNetExperiment), setting_names(DiMPExperiment)
    common = {"preset", "backbone", "pretrained", "backbone_weights", "data", "trainer"}
    assert iou_net & dimp == common | {"feature_cache", "feature_stream"}
    own = {"head_width", "head_dims", "processing", "loss", "head_windows"}
    assert iou_net - dimp == own
    assert dimp - iou_net == {"dimp"}
    assert (IoUNetExperiment.model_file, DiMPExperiment.model_file) == (
        "iou_net.safetensors",
        "dimp_classifier.safetensors",
    )
    assert DiMPExperiment.validates_untrained and not IoUNetExperiment.validates_untrained
    with pytest.raises(TypeError):
        Experiment()  # the kinds are the subclasses


def test_old_config_files_load_into_their_class(tmp_path):
    # Runs from before DiMP experiments wrote neither ``model`` nor ``dimp``: box-head runs.
    old = config_to_dict(preset_config("synthetic-smoke"))
    del old["model"]
    write_yaml(old, tmp_path / "old.yaml")
    config = load_experiment(tmp_path / "old.yaml")
    assert isinstance(config, IoUNetExperiment) and config.head_dims == 64
    # Runs of the code before the experiment classes wrote the settings of both kinds.
    for preset in ("default-cpu", "dimp-cpu"):
        write_yaml(legacy_dict(preset_config(preset)), tmp_path / f"{preset}.yaml")
        config = load_experiment(tmp_path / f"{preset}.yaml")
        assert type(config) is KINDS[preset]
        assert config_to_dict(config) == config_to_dict(preset_config(preset))


def test_settings_of_another_kind_are_refused_not_ignored():
    iou_net = config_to_dict(preset_config("synthetic-smoke"))
    message = "dimp in config does not apply to iou-net experiments; it is a setting of dimp"
    with pytest.raises(ValueError, match=message):
        experiment_from_dict({**iou_net, "dimp": {"num_iter": 3}})
    dimp = config_to_dict(preset_config("dimp-cpu"))
    with pytest.raises(ValueError, match="loss in config does not apply to dimp experiments"):
        experiment_from_dict({**dimp, "loss": {"name": "nce+"}})
    with pytest.raises(ValueError, match=r"unknown key\(s\) head_size in config; valid keys"):
        experiment_from_dict({**iou_net, "head_size": 3})
    # Only a complete file of the code before has the other kind's settings left out.
    partial = {"model": "iou-net", "trainer": {"epochs": 3}, "dimp": {"num_iter": 3}}
    assert upgrade_config_dict(partial, whole=False) == partial
    assert upgrade_config_dict(partial)["dimp"] == partial["dimp"]  # and refused when built


@pytest.mark.parametrize("preset", ["synthetic-smoke", "default-cpu"])
def test_the_box_head_is_iou_nets_config_for_the_backbone(preset):
    from ebmtrack.models.iou_net import IoUNetConfig

    config = preset_config(preset)
    module = config.build_module()
    assert module.iou_net.config == IoUNetConfig.for_backbone(module.backbone, config.head_width)
    assert module.iou_net.config.pred_inter_dim == (config.head_dims, config.head_dims)
