"""The registry: a variant registered in one place is a tracker everywhere (``load_tracker``,
several targets, its OpenCV-style class, ``ebmtrack track``); every shipped variant builds with
its own parameter set; the kinds it declares are what its options say; its one check of the
options is the one the commands use."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import cv2
import numpy as np
import pytest

import ebmtrack
from ebmtrack.cli.main import main
from ebmtrack.tracking import registry
from ebmtrack.tracking.base import TrackResult
from ebmtrack.tracking.opencv import MODEL_FILES
from ebmtrack.tracking.registry import (
    OUR_TRACKER,
    TrackerKind,
    TrackerVariant,
    accepted_options,
    check_options,
    create_tracker,
    get_factory,
    kind_refusal,
    register_tracker,
    tracker_kind,
    tracker_names,
    trackers_of_kind,
)
from ebmtrack.values import OptionError

PEERS = Path(__file__).resolve().parents[2] / ".." / "shared" / "peers"
OURS = {"atom", "atom-iounet", "atom-polished", "atom-lt", "dimp-nce+"}


def _frames(count=3):
    """A textured square moving over a smooth background (RGB)."""
    rng = np.random.default_rng(3)
    yy, xx = np.mgrid[0:96, 0:128]
    background = np.stack([xx, yy, (xx + yy) // 2], axis=2).astype(np.uint8)
    texture = cv2.resize(rng.integers(0, 256, (4, 4, 3), dtype=np.uint8), (24, 24),
                         interpolation=cv2.INTER_NEAREST)  # fmt: skip
    frames = []
    for t in range(count):
        frame = background.copy()
        frame[30 + t : 54 + t, 40 + 2 * t : 64 + 2 * t] = texture
        frames.append(frame)
    return frames


@pytest.mark.slow
@pytest.mark.parametrize("name", tracker_names())
def test_every_registered_variant_builds_with_its_parameter_set_and_tracks(name):
    options = {"search_size": 96} if name in OURS else {}
    if name in MODEL_FILES:
        if not PEERS.is_dir():  # its files are not here: refused naming them
            files = [file for file, _ in MODEL_FILES[name].values()]
            with pytest.raises(FileNotFoundError, match=files[0]):
                create_tracker(name)
            return
        options["model_dir"] = PEERS
    tracker = create_tracker(name, **options)
    variant = get_factory(name)
    if name in OURS:  # the variant's parameter set, then the caller's options
        for key, value in variant.params.items():
            if hasattr(tracker.params, key):
                assert getattr(tracker.params, key) == value, key
        assert tracker.params.search_size == 96
    frames = _frames()
    tracker.initialize(frames[0], np.array([40.0, 30, 24, 24]))
    result = tracker.track(frames[1])
    assert isinstance(result, TrackResult) and np.all(np.isfinite(result.box))


@pytest.mark.parametrize("name", tracker_names())
def test_each_kind_is_what_the_options_say(name):
    kind, options = tracker_kind(name), accepted_options(name)
    assert kind.box_head == ("weights" in options), name
    assert kind.backbone == ("backbone_weights" in options), name
    assert kind.model_files == (name in MODEL_FILES), name
    if kind.model_files:  # a folder, or one option per file
        assert {"model_dir", *MODEL_FILES[name]} <= options


def test_the_lists_the_command_line_uses_come_from_the_registry():
    assert set(trackers_of_kind(backbone=True)) == OURS
    assert set(trackers_of_kind(box_head=True)) == OURS
    assert set(trackers_of_kind(model_files=True)) == set(MODEL_FILES) == {"nanotrack", "vit"}
    assert "csrt" in trackers_of_kind(backbone=False, box_head=False, model_files=False)
    with pytest.raises(ValueError, match="TrackerKind has no field.s. gpu"):
        trackers_of_kind(gpu=True)
    with pytest.raises(ValueError, match="unknown tracker 'atm' .did you mean 'atom'.."):
        get_factory("atm")


def test_an_option_of_a_kind_the_tracker_is_not_says_so():
    assert kind_refusal("csrt", "weights") == "tracker 'csrt' takes no box-head weights"
    assert kind_refusal("kcf", "backbone") == "tracker 'kcf' has no backbone of ours"
    assert kind_refusal("atom", "model_dir") == "tracker 'atom' reads no model files"
    assert kind_refusal("atom", "weights") is None and kind_refusal("csrt", "seed") is None
    with pytest.raises(OptionError, match="^tracker 'csrt' takes no box-head weights$") as error:
        check_options("csrt", {"weights": "w.safetensors"})
    assert error.value.options == ("weights",)
    check_options("nanotrack", {"backbone": "b.onnx"})  # its own model file, not a backbone
    with pytest.raises(OptionError, match=r"unknown backbone 'vgg'; valid names: \[") as error:
        check_options("atom", {"backbone": "vgg"})
    assert error.value.options == ("backbone",)


@dataclass
class _Params:
    """A parameter set whose ``old_steps`` became ``steps``, checking its own values."""

    steps: int = 3
    scale: float = 1.0
    renamed: ClassVar[dict[str, str]] = {"old_steps": "steps", "old_scale": "scale"}
    tags: tuple = field(default_factory=tuple)

    def __post_init__(self):
        if self.steps < 1:
            raise OptionError(f"steps must be at least 1, got {self.steps}", "steps")

    @classmethod
    def names(cls) -> list[str]:
        return ["steps", "scale", "tags"]


def _build(**options):
    return options


def test_options_are_checked_once_by_the_variant_and_its_parameter_set(monkeypatch):
    monkeypatch.setattr(registry, "TRACKERS", dict(registry.TRACKERS))
    register_tracker("renamed-probe", TrackerVariant(_build, {}, _Params))
    with pytest.raises(
        OptionError, match="^tracker 'renamed-probe': option 'old_steps' was renamed 'steps'$"
    ):
        check_options("renamed-probe", {"old_steps": 2})
    with pytest.raises(OptionError, match="'old_steps' was renamed 'steps'; 'old_scale' was"):
        create_tracker("renamed-probe", old_steps=2, old_scale=0.5)
    check_options("renamed-probe", {"steps": 2})
    assert create_tracker("renamed-probe", steps=2) == {"steps": 2}
    with pytest.raises(OptionError, match="steps must be at least 1") as error:
        create_tracker("renamed-probe", steps=0)  # the dataclass's own check, where it is defined
    assert error.value.options == ("steps",)
    calls = []
    monkeypatch.setattr(_Params, "__post_init__", lambda self: calls.append(self.steps))
    create_tracker("renamed-probe", steps=5)
    assert calls == [5]  # checked once, not again by the factory


def test_a_kindless_factory_is_none_of_the_kinds(monkeypatch):
    monkeypatch.setattr(registry, "TRACKERS", dict(registry.TRACKERS))
    register_tracker("plain-probe", _build)
    assert tracker_kind("plain-probe") == TrackerKind()
    assert "plain-probe" not in trackers_of_kind(box_head=True)


TOY = TrackerVariant(
    "ebmtrack.tracking.atom.factory:create_atom_tracker",
    {"box_mode": "position", "search_size": 96, "backbone_runtime": "torch", "seed": 7},
    "ebmtrack.tracking.atom.params:AtomParams",
    "ATOM's classifier, the position only, on small crops",
    kind=OUR_TRACKER,
    opencv_class="TrackerToy",
)


@pytest.mark.slow
def test_a_variant_registered_in_one_place_is_a_tracker_everywhere(monkeypatch, tmp_path, capsys):
    """The toy variant is registered here, in one statement: the name, one parameter set, its
    OpenCV-style class. Nothing else is edited, and every route builds it."""
    monkeypatch.setattr(registry, "TRACKERS", dict(registry.TRACKERS))
    toy = register_tracker("atom-toy", TOY)
    assert toy.name == "atom-toy" and toy.params is TOY.params
    assert "atom-toy" in tracker_names() and "atom-toy" in trackers_of_kind(backbone=True)
    frames = _frames(4)
    box = np.array([40.0, 30, 24, 24])
    # load_tracker: the parameter set, the caller's options over it, the one check.
    tracker = ebmtrack.load_tracker("atom-toy", seed=3)
    assert tracker.params.box_mode == "position" and tracker.params.seed == 3
    with pytest.raises(OptionError, match="box_steps applies to box_mode"):
        ebmtrack.load_tracker("atom-toy", box_steps=2)
    tracker.initialize(frames[0], box)
    alone = [tracker.track(frame).box for frame in frames[1:]]
    # Several targets: the same loop, one state each.
    multi = ebmtrack.load_multi_tracker("atom-toy", seed=3)
    multi.initialize(frames[0], [box, box + [30, 20, 0, 0]])
    together = [multi.track(frame)[0].box for frame in frames[1:]]
    np.testing.assert_allclose(np.array(together), np.array(alone), atol=1e-6)
    # Its OpenCV-style class.
    styled = ebmtrack.TrackerToy.create(seed=3)
    styled.init(np.ascontiguousarray(frames[0][:, :, ::-1]), tuple(box))
    ok, got = styled.update(np.ascontiguousarray(frames[1][:, :, ::-1]))
    assert got == tuple(int(round(v)) for v in alone[0])
    # The command line.
    folder = tmp_path / "clip"
    folder.mkdir()
    for index, frame in enumerate(frames):
        cv2.imwrite(str(folder / f"{index:04d}.png"), frame[:, :, ::-1])
    out = tmp_path / "boxes.txt"
    command = ["track", str(folder), "--init", "40,30,24,24", "--tracker", "atom-toy"]
    assert main([*command, "--option", "seed=3", "--out", str(out)]) == 0
    written = np.loadtxt(out, delimiter=",")
    np.testing.assert_allclose(written[1:], np.array(alone), atol=1e-3)
