from dataclasses import dataclass

import pytest

from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequences
from ebmtrack.training.config import config_to_dict, read_config_file, save_config
from ebmtrack.training.experiment import IoUNetExperiment, experiment_from_dict
from ebmtrack.training.presets import PRESETS, preset_config
from ebmtrack.training.runs import build_experiment, load_experiment
from ebmtrack.training.sources import (
    SOURCES,
    DataConfig,
    DatasetsSource,
    DataSource,
    FolderSource,
    PackSource,
    SourceData,
    SyntheticSource,
    data_source,
    field_defaults,
    register_source,
)

PRESET_SOURCES = {
    "atom-r18": DatasetsSource,
    "synthetic-smoke": SyntheticSource,
    "default-cpu": FolderSource,
    "dimp-cpu": FolderSource,
    "pack-cpu": PackSource,
    "pack-stream": PackSource,
    "dimp-pack-cpu": PackSource,
    "dimp-pack-clips": PackSource,
    "dimp-pack-stream": PackSource,
}


def test_every_preset_names_its_source():
    assert set(PRESET_SOURCES) == set(PRESETS)
    for name, cls in PRESET_SOURCES.items():
        data = preset_config(name).data
        assert SOURCES[data.source] is cls and type(data_source(data)) is cls
        assert config_to_dict(data)["source"] == cls.name  # written to config.yaml


def test_each_source_has_its_own_settings_and_a_config_holds_only_its_sources():
    owned = {name for cls in SOURCES.values() for name in cls.settings}
    assert owned | {"max_gap"} == set(field_defaults())
    for name in PRESET_SOURCES:
        data = preset_config(name).data
        saved = config_to_dict(data)
        assert set(saved) == {"source", "max_gap", *SOURCES[data.source].settings}
        assert DataConfig.from_dict(saved) == data
    # A field of another source reads as no field of this one.
    with pytest.raises(AttributeError, match="data.source synthetic has no setting 'pack'"):
        preset_config("synthetic-smoke").data.pack  # noqa: B018


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (None, "config.data.source is missing; name where the training data comes from: "),
        ({"synthetic_sequences": 5}, "config.data.source is missing; name where the training"),
        ({"source": "folders"}, "data.source must be one of datasets, folder, pack, synthetic, "),
    ],
)
def test_a_config_naming_no_source_or_an_unknown_one_is_refused(data, message):
    config = config_to_dict(preset_config("synthetic-smoke"))
    if data is None:
        del config["data"]
    else:
        config["data"] = data
    with pytest.raises(ValueError, match=message) as refused:
        experiment_from_dict(config)
    assert "\n" not in str(refused.value)


def test_the_source_is_chosen_by_its_name_not_by_the_fields_set():
    with pytest.raises(ValueError, match="data.source is missing"):
        DataConfig(synthetic_sequences=5)
    # Each source's fields apply to it alone: a field of another source is refused, not ignored.
    message = "data.roots does not apply to data.source synthetic; it is a setting of data.source"
    with pytest.raises(ValueError, match=message):
        DataConfig(source="synthetic", synthetic_sequences=5, roots={"got10k": "x"})
    with pytest.raises(ValueError, match="data.synthetic_sequences does not apply to data.source"):
        DataConfig(source="datasets", synthetic_sequences=5)
    with pytest.raises(ValueError, match="data.sequence_folder does not apply to data.source pack"):
        DataConfig(source="pack", pack="p", sequence_folder="s")
    # A source needs its own field.
    with pytest.raises(ValueError, match="data.source folder needs data.sequence_folder"):
        DataConfig(source="folder")
    with pytest.raises(ValueError, match="data.source pack needs data.pack"):
        DataConfig(source="pack")
    with pytest.raises(ValueError, match="data.source synthetic needs data.synthetic_sequences"):
        DataConfig(source="synthetic")
    with pytest.raises(ValueError, match="data.weights names \\['nope'\\]; valid with data.source"):
        DataConfig(source="folder", sequence_folder="s", weights={"nope": 1.0})


def test_a_datasets_source_without_folders_names_the_flags():
    config = preset_config("atom-r18")
    assert config.data.source == "datasets" and not config.data.roots
    with pytest.raises(ValueError, match="no training data: give data.roots \\(e.g. --got10k"):
        config.build_datasets(num_pairs=4)


def test_a_changed_config_is_checked_when_changed_and_when_built():
    config = preset_config("synthetic-smoke")
    with pytest.raises(ValueError, match="data.roots does not apply to data.source synthetic"):
        config.data.roots = {"got10k": "x"}  # set after the config was made
    config.data.synthetic_sequences = 0
    with pytest.raises(ValueError, match="data.source synthetic needs data.synthetic_sequences"):
        config.build_datasets(num_pairs=4)


def test_the_synthetic_source_validates_on_other_sequences():
    look = SyntheticConfig(num_frames=8, frame_size=(64, 80))
    data = DataConfig(source="synthetic", synthetic_sequences=8, synthetic=look)
    found = data_source(data).collections(seed=3)
    (train,), (val,) = found.train, found.val
    assert found.weights is None and (len(train), len(val)) == (8, 2)
    assert train.seed == 3 and val.seed == 4
    samples, val_samples = IoUNetExperiment(data=data).build_datasets(num_pairs=4)
    assert len(samples) == 4 and val_samples is not None


@dataclass
class ToySettings:
    """The one setting of the toy source."""

    toy_sequences: int = 0


class ToySource(DataSource):
    """A source defined in this test: ``data.toy_sequences`` small generated sequences."""

    name = "toy"
    Settings = ToySettings

    def check(self) -> None:
        if self.data.toy_sequences <= 0:
            raise ValueError("data.source toy needs data.toy_sequences > 0")

    def collections(self, seed: int) -> SourceData:
        look = SyntheticConfig(num_frames=8, frame_size=(96, 128))
        sequences = SyntheticSequences(self.data.toy_sequences, look, seed=seed)
        return SourceData([sequences], None, None)


@pytest.fixture
def toy_source():
    register_source(ToySource)
    yield ToySource
    del SOURCES["toy"]


def test_a_source_registered_in_one_place_is_a_source_everywhere(toy_source, tmp_path):
    assert SOURCES["toy"] is ToySource and ToySource.settings == ("toy_sequences",)
    with pytest.raises(ValueError, match="data.source toy needs data.toy_sequences > 0"):
        DataConfig(source="toy")
    with pytest.raises(ValueError, match="data.toy_sequences does not apply to data.source pack"):
        DataConfig(source="pack", pack="p", toy_sequences=2)
    # The public builder (what ebmtrack train runs) takes it by name, from any part.
    config = build_experiment(
        "synthetic-smoke", overrides=["data.source=toy", "data.toy_sequences=3"]
    )
    assert config.data.source == "toy" and config.data.toy_sequences == 3
    train, val = config.build_datasets(num_pairs=4)
    assert len(train) == 4 and val is None
    # Saved and read back as any config.
    save_config(config, tmp_path / "config.yaml")
    assert load_experiment(tmp_path / "config.yaml").data == config.data
    assert read_config_file(tmp_path / "config.yaml")["data"] == {
        "source": "toy",
        "max_gap": config.data.max_gap,
        "toy_sequences": 3,
    }


@pytest.mark.slow
def test_the_command_trains_on_a_source_registered_in_a_test(toy_source, tmp_path, capsys):
    from ebmtrack.cli.main import main

    out = tmp_path / "run"
    flags = ["--preset", "synthetic-smoke", "--epochs", "1", "--samples-per-epoch", "8"]
    flags += ["--batch-size", "4", "--threads", "1", "--no-progress"]
    flags += ["--set", "data.source=toy", "--set", "data.toy_sequences=2"]
    assert main(["train", "--out", str(out), *flags]) == 0
    assert "epoch 1: train loss" in capsys.readouterr().out
    assert read_config_file(out / "config.yaml")["data"]["source"] == "toy"


def test_the_builder_reproduces_the_commands_config(tmp_path):
    """ebmtrack train's config is build_experiment's of the same parts, refusals included."""
    import argparse

    from ebmtrack.cli.main import CLIError
    from ebmtrack.cli.train import add_parser, build_config

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    (tmp_path / "part.yaml").write_text("trainer:\n  lr: 0.002\n")
    argv = ["train", "--out", str(tmp_path / "run"), "--preset", "pack-cpu", "--epochs", "3"]
    argv += ["--config", str(tmp_path / "part.yaml"), "--set", "data.pack_tracks=5"]
    from_command = build_config(parser.parse_args(argv))
    from_python = build_experiment(
        "pack-cpu",
        config_file=tmp_path / "part.yaml",
        changes={"trainer": {"epochs": 3}},
        overrides=["data.pack_tracks=5"],
    )
    assert config_to_dict(from_command) == config_to_dict(from_python)
    assert from_python.trainer.lr == 0.002 and from_python.data.pack_tracks == 5
    with pytest.raises(ValueError, match="^override dimp.num_iter=2: dimp does not apply"):
        build_experiment("pack-cpu", overrides=["dimp.num_iter=2"])
    with pytest.raises(CLIError, match="^--set dimp.num_iter=2: dimp does not apply"):
        build_config(parser.parse_args([*argv, "--set", "dimp.num_iter=2"]))
