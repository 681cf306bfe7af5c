import pytest

from ebmtrack.training.box_regression import BoxLossConfig
from ebmtrack.training.config import (
    TrainerConfig,
    apply_overrides,
    config_from_dict,
    config_to_dict,
    merge_config_dicts,
    read_config_file,
    save_config,
)
from ebmtrack.training.experiment import DiMPExperiment, IoUNetExperiment
from ebmtrack.training.presets import PRESETS, preset_config
from ebmtrack.training.runs import load_experiment


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_experiment_config_round_trips_through_files(tmp_path, suffix, preset):
    config = preset_config(preset)
    if isinstance(config, IoUNetExperiment):
        config.loss = BoxLossConfig("nce+", {"beta": 0.2, "noise_sigmas": [0.05, 0.5]})
    path = save_config(config, tmp_path / f"config{suffix}")
    assert read_config_file(path)["model"] == config.model
    again = load_experiment(path)
    assert type(again) is type(config)
    assert config_to_dict(again) == config_to_dict(config)
    # Nested dataclasses and tuple fields come back with their types.
    assert again.data == config.data
    if "synthetic" in again.data.settings.__dataclass_fields__:
        assert type(again.data.synthetic) is type(config.data.synthetic)
    processing = again.dimp.processing if isinstance(again, DiMPExperiment) else again.processing
    assert isinstance(processing.center_jitter_factor, tuple)
    if isinstance(again, IoUNetExperiment):
        assert again.processing.gmm_sigmas == config.processing.gmm_sigmas
    else:
        assert again.dimp.loss_weights == config.dimp.loss_weights


def test_atom_preset_has_the_paper_recipe():
    config = preset_config("atom-r18")
    trainer = config.trainer
    assert (trainer.epochs, trainer.batch_size, trainer.samples_per_epoch) == (40, 64, 64000)
    assert (trainer.lr, trainer.lr_step_epochs, trainer.lr_gamma) == (1e-3, 15, 0.2)
    assert config.loss.name == "mse" and config.backbone == "resnet18"
    assert config.processing.output_size == 288 and config.processing.num_proposals == 16


def test_unknown_keys_and_bad_values_are_errors():
    with pytest.raises(ValueError, match=r"unknown key\(s\) lr_decay in config; valid keys: amp"):
        config_from_dict(TrainerConfig, {"lr_decay": 0.1})
    with pytest.raises(ValueError, match="batch_size must be positive"):
        TrainerConfig(batch_size=0)
    with pytest.raises(ValueError, match="device must be one of auto, cpu, cuda"):
        TrainerConfig(device="tpu")
    with pytest.raises(ValueError, match="samples_per_epoch must be None or at least"):
        TrainerConfig(batch_size=64, samples_per_epoch=10)
    with pytest.raises(ValueError, match="config.lr must be a number, got 'fast'"):
        config_from_dict(TrainerConfig, {"lr": "fast"})
    assert config_from_dict(TrainerConfig, {"lr": "2e-4"}).lr == 2e-4  # YAML's 2e-4 is a string


def test_overrides_parse_values_and_merge_recurses():
    data = {"trainer": {"lr": 1e-3, "epochs": 40}, "data": {"roots": {}}}
    out = apply_overrides(data, ["trainer.lr=2e-4", "data.roots.coco=/x", "trainer.epochs=5"])
    assert out == {"trainer": {"lr": 2e-4, "epochs": 5}, "data": {"roots": {"coco": "/x"}}}
    assert data["trainer"]["lr"] == 1e-3  # a copy
    with pytest.raises(ValueError, match="is not a section"):
        apply_overrides(data, ["trainer.lr.x=1"])
    with pytest.raises(ValueError, match="key.sub=value"):
        apply_overrides(data, ["trainer.lr"])
    merged = merge_config_dicts(data, {"trainer": {"epochs": 2}})
    assert merged["trainer"] == {"lr": 1e-3, "epochs": 2}
