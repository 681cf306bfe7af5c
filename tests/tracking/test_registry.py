"""The registry: every variant builds with its own parameter set, the kinds it declares are
what its options say, and check_options is the one check of a tracker's options."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest

from ebmtrack.tracking import registry
from ebmtrack.tracking.opencv import MODEL_FILES
from ebmtrack.tracking.registry import (
    LAZY_TRACKERS,
    TrackerKind,
    TrackerVariant,
    accepted_options,
    check_options,
    create_tracker,
    kind_refusal,
    tracker_kind,
    tracker_names,
    trackers_of_kind,
)

PEERS = Path(__file__).resolve().parents[2] / ".." / "shared" / "peers"


@pytest.mark.parametrize("name", tracker_names())
def test_every_registered_variant_builds_with_its_defaults(name):
    if name not in MODEL_FILES:
        assert create_tracker(name) is not None
    elif PEERS.is_dir():
        assert create_tracker(name, model_dir=PEERS) is not None
    else:  # its files are not here: refused naming them
        files = [file for file, _ in MODEL_FILES[name].values()]
        with pytest.raises(FileNotFoundError, match=files[0]):
            create_tracker(name)


@pytest.mark.parametrize("name", tracker_names())
def test_each_kind_is_what_the_options_say(name):
    kind, options = tracker_kind(name), accepted_options(name)
    assert kind.box_head == ("weights" in options), name
    assert kind.backbone == ("backbone_weights" in options), name
    assert kind.model_files == (name in MODEL_FILES), name
    if kind.model_files:  # a folder, or one option per file
        assert {"model_dir", *MODEL_FILES[name]} <= options


def test_the_lists_the_command_line_uses_come_from_the_registry():
    assert set(trackers_of_kind(backbone=True)) == set(LAZY_TRACKERS)  # ours, all of them
    assert set(trackers_of_kind(box_head=True)) == set(LAZY_TRACKERS)
    assert set(trackers_of_kind(model_files=True)) == set(MODEL_FILES) == {"nanotrack", "vit"}
    assert "csrt" in trackers_of_kind(backbone=False, box_head=False, model_files=False)
    with pytest.raises(ValueError, match="TrackerKind has no field.s. gpu"):
        trackers_of_kind(gpu=True)


def test_an_option_of_a_kind_the_tracker_is_not_says_so():
    assert kind_refusal("csrt", "weights") == "tracker 'csrt' takes no box-head weights"
    assert kind_refusal("kcf", "backbone") == "tracker 'kcf' has no backbone of ours"
    assert kind_refusal("atom", "model_dir") == "tracker 'atom' reads no model files"
    assert kind_refusal("atom", "weights") is None and kind_refusal("csrt", "seed") is None
    with pytest.raises(ValueError, match="^tracker 'csrt' takes no box-head weights$"):
        check_options("csrt", {"weights": "w.safetensors"})
    check_options("nanotrack", {"backbone": "b.onnx"})  # its own model file, not a backbone
    with pytest.raises(ValueError, match=r"unknown backbone 'vgg'; valid names: \["):
        check_options("atom", {"backbone": "vgg"})


@dataclass
class _Params:
    """A parameter set whose ``old_steps`` became ``steps``."""

    steps: int = 3
    scale: float = 1.0
    renamed: ClassVar[dict[str, str]] = {"old_steps": "steps", "old_scale": "scale"}
    tags: tuple = field(default_factory=tuple)

    @classmethod
    def names(cls) -> list[str]:
        return ["steps", "scale", "tags"]


def _build(**options):
    return options


def test_a_renamed_option_is_refused_with_its_new_name(monkeypatch):
    monkeypatch.setattr(registry, "TRACKERS", dict(registry.TRACKERS))
    registry.register_tracker("renamed-probe", TrackerVariant(_build, {}, _Params))
    with pytest.raises(ValueError, match="^tracker 'renamed-probe': option 'old_steps' was "
                       "renamed 'steps'$"):
        check_options("renamed-probe", {"old_steps": 2})
    with pytest.raises(ValueError, match="'old_steps' was renamed 'steps'; 'old_scale' was"):
        create_tracker("renamed-probe", old_steps=2, old_scale=0.5)
    check_options("renamed-probe", {"steps": 2})
    assert create_tracker("renamed-probe", steps=2) == {"steps": 2}
    with pytest.raises(ValueError, match="steps must be an integer"):
        check_options("renamed-probe", {"steps": 0.5})


def test_a_kindless_factory_is_none_of_the_kinds(monkeypatch):
    monkeypatch.setattr(registry, "TRACKERS", dict(registry.TRACKERS))
    registry.register_tracker("plain-probe", _build)
    assert tracker_kind("plain-probe") == TrackerKind()
    assert "plain-probe" not in trackers_of_kind(box_head=True)
