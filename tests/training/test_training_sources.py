import pytest

from ebmtrack.data.synthetic import SyntheticConfig
from ebmtrack.training.config import config_to_dict
from ebmtrack.training.experiment import IoUNetExperiment, experiment_from_dict
from ebmtrack.training.presets import PRESETS, preset_config
from ebmtrack.training.sources import (
    SOURCES,
    DataConfig,
    DatasetsSource,
    FolderSource,
    PackSource,
    SyntheticSource,
    data_source,
    field_defaults,
)

PRESET_SOURCES = {
    "atom-r18": DatasetsSource,
    "synthetic-smoke": SyntheticSource,
    "default-cpu": FolderSource,
    "dimp-cpu": FolderSource,
    "pack-cpu": PackSource,
    "pack-stream": PackSource,
    "dimp-pack-cpu": PackSource,
}


def test_every_preset_names_its_source():
    assert set(PRESET_SOURCES) == set(PRESETS)
    for name, cls in PRESET_SOURCES.items():
        data = preset_config(name).data
        assert SOURCES[data.source] is cls and type(data_source(data)) is cls
        assert config_to_dict(data)["source"] == cls.name  # written to config.yaml


def test_every_field_belongs_to_a_source():
    owned = {name for cls in SOURCES.values() for name in cls.settings}
    assert owned | {"max_gap"} == set(field_defaults())


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (None, "config.data.source is missing; name where the training data comes from: "),
        ({"synthetic_sequences": 5}, "config.data.source is missing; name where the training"),
        ({"source": "folders"}, "data.source must be one of datasets, synthetic, folder, pack, "),
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


def test_a_changed_config_is_checked_again_when_built():
    config = preset_config("synthetic-smoke")
    config.data.roots = {"got10k": "x"}  # set after the config was made
    with pytest.raises(ValueError, match="data.roots does not apply to data.source synthetic"):
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
