from pathlib import Path

import pytest

import ebmtrack.training.presets as presets_package
from ebmtrack.training.config import config_to_dict
from ebmtrack.training.presets import (
    DATA_ROOT_ENV,
    DEFAULT_DATA_ROOT,
    PRESETS,
    data_root,
    preset_config,
)

FOLDERS = {  # the folder each preset reads, below the data root
    "default-cpu": ("sequence_folder", "sequences"),
    "dimp-cpu": ("sequence_folder", "sequences"),
    "pack-cpu": ("pack", "train"),
    "pack-stream": ("pack", "train"),
    "dimp-pack-cpu": ("pack", "train"),
    "dimp-pack-clips": ("pack", "train"),
    "dimp-pack-stream": ("pack", "train"),
}


def paths_in(value) -> list[str]:
    """Every string of a plain-data config that looks like a path."""
    if isinstance(value, dict):
        return [p for v in value.values() for p in paths_in(v)]
    if isinstance(value, list):
        return [p for v in value for p in paths_in(v)]
    return [value] if isinstance(value, str) and "/" in value else []


def test_the_data_root_defaults_to_the_shared_data_beside_the_repository(monkeypatch):
    monkeypatch.delenv(DATA_ROOT_ENV, raising=False)
    assert data_root() == DEFAULT_DATA_ROOT == "../shared/data"
    for name, (key, below) in FOLDERS.items():
        assert getattr(preset_config(name).data, key) == f"../shared/data/{below}"


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_presets_read_their_data_below_the_data_root(monkeypatch, tmp_path, preset):
    root = tmp_path / "elsewhere"
    monkeypatch.setenv(DATA_ROOT_ENV, str(root))
    config = preset_config(preset)
    found = paths_in(config_to_dict(config))
    assert all(Path(p).is_relative_to(root) for p in found), found
    if preset in FOLDERS:
        key, below = FOLDERS[preset]
        assert getattr(config.data, key) == str(root / below)
    else:
        assert found == []  # data sets given by flags, or generated sequences


def test_only_the_root_module_names_the_default_data_root():
    folder = Path(presets_package.__file__).parent
    naming = sorted(p.name for p in folder.glob("*.py") if "../shared" in p.read_text())
    assert naming == ["root.py"]
