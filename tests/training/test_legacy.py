"""Configs saved in earlier formats load into the present classes with their data source."""

from pathlib import Path

import pytest
import torch

from ebmtrack.cli.main import main
from ebmtrack.models.serialization import load_model
from ebmtrack.training.checkpoint import (
    capture_rng_state,
    latest_checkpoint,
    read_checkpoint_config,
    save_checkpoint,
    trainable_state_dict,
)
from ebmtrack.training.config import config_to_dict, read_config_file
from ebmtrack.training.experiment import experiment_from_dict
from ebmtrack.training.legacy import inferred_source, upgrade_config_dict
from ebmtrack.training.presets import PRESETS, preset_config
from ebmtrack.training.runs import load_experiment

SAVED = Path(__file__).parent / "saved_configs"
"""Each preset's ``config.yaml`` as written before configs named their data source (the presets
of that time: those added later never wrote one)."""


def test_every_saved_config_is_of_a_preset_and_every_preset_of_that_time_has_one():
    saved = {p.stem for p in SAVED.glob("*.yaml")}
    assert saved <= set(PRESETS)
    assert set(PRESETS) - saved == {"dimp-pack-clips", "dimp-pack-stream"}


@pytest.mark.parametrize("preset", sorted(p.stem for p in SAVED.glob("*.yaml")))
def test_a_saved_config_without_a_data_source_loads_as_its_preset(preset):
    saved = read_config_file(SAVED / f"{preset}.yaml")
    assert "source" not in saved["data"]
    config = load_experiment(SAVED / f"{preset}.yaml")
    assert config_to_dict(config) == config_to_dict(preset_config(preset))
    assert config.cache_key() == preset_config(preset).cache_key()  # its cache is reused


def test_the_source_is_the_one_whose_fields_were_set():
    assert inferred_source({"pack": "p", "synthetic_sequences": 5}) == "pack"
    assert inferred_source({"sequence_folder": "s", "synthetic_sequences": 5}) == "folder"
    assert inferred_source({"synthetic_sequences": 5, "roots": {"got10k": "g"}}) == "synthetic"
    assert inferred_source({"roots": {"got10k": "g"}}) == "datasets"
    with pytest.raises(ValueError, match="give data.sequence_folder or data.pack, not both"):
        inferred_source({"pack": "p", "sequence_folder": "s"})


def test_fields_the_source_did_not_read_are_left_out():
    saved = read_config_file(SAVED / "synthetic-smoke.yaml")
    saved["data"]["roots"] = {"got10k": "ignored"}  # synthetic sequences took precedence
    config = experiment_from_dict(upgrade_config_dict(saved))
    assert config.data.source == "synthetic" and "roots" not in config_to_dict(config)["data"]


def test_only_whole_configs_get_a_kind_and_a_source():
    partial = {"trainer": {"epochs": 3}, "data": {"max_gap": 30}}
    assert upgrade_config_dict(partial, whole=False) == partial  # a --config file's subset
    whole = upgrade_config_dict(partial)
    assert whole["model"] == "iou-net" and whole["data"] == {"source": "datasets", "max_gap": 30}
    assert upgrade_config_dict({"trainer": {"epochs": 3}})["data"] == {"source": "datasets"}
    complete = read_config_file(SAVED / "default-cpu.yaml")
    assert upgrade_config_dict(complete, whole=False)["data"]["source"] == "folder"


def test_a_run_of_the_earlier_format_exports_its_checkpoint(tmp_path, capsys):
    """A run folder as earlier versions left it: config.yaml and the checkpoint's config without
    a data source."""
    run = tmp_path / "run"
    run.mkdir()
    saved = read_config_file(SAVED / "synthetic-smoke.yaml")
    (run / "config.yaml").write_text((SAVED / "synthetic-smoke.yaml").read_text())
    module = preset_config("synthetic-smoke").build_module()
    with torch.no_grad():
        module.iou_net.iou_predictor.weight.add_(1.0)  # not the fresh module's weights
    state = trainable_state_dict(module)
    rng = [capture_rng_state()]
    save_checkpoint(run / "checkpoints", 1, 4, state, {}, rng, saved)
    checkpoint = latest_checkpoint(run / "checkpoints")
    stored = experiment_from_dict(upgrade_config_dict(read_checkpoint_config(checkpoint)))
    assert config_to_dict(stored) == config_to_dict(preset_config("synthetic-smoke"))
    exported = tmp_path / "head.safetensors"
    assert main(["train", "--out", str(run), "--export", str(exported)]) == 0
    assert "the model of epoch 1" in capsys.readouterr().out
    head = load_model(exported, expected="AtomIoUNet")
    weight = head.iou_predictor.weight
    torch.testing.assert_close(weight, module.iou_net.iou_predictor.weight)
