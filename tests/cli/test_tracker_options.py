"""One route for tracker options: ``ebmtrack track``, ``ebmtrack eval`` and
``ebmtrack.load_tracker`` pass the same options to the same registry, and refuse the same ones
with the same message."""

from pathlib import Path

import pytest
import torch
from cli_helpers import square_sequence

import ebmtrack
from ebmtrack.cli.main import main
from ebmtrack.exports import SHIPPED_EXPORTS
from ebmtrack.tracking import registry
from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.weights import default_model, pack_box_head


@pytest.fixture
def dataset(tmp_path):
    """An OTB-layout folder with one 3-frame sequence, ``Square``."""
    return square_sequence(tmp_path / "data").parent


def _track(dataset, tracker, *flags):
    return ["track", str(dataset / "Square"), "--init", "30,20,20,20", "--tracker", tracker, *flags]


def _eval(dataset, tmp_path, tracker, *flags):
    out = str(tmp_path / "out")
    return ["eval", str(dataset), "--trackers", tracker, "--out", out, "--workers", "0", *flags]


def _one_error(capsys, command):
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ebmtrack {command}: error: "), lines
    return lines[0].split(": error: ", 1)[1]


REFUSED = [
    # (tracker, options for load_tracker, track flags, eval flags)
    (
        "csrt",
        {"backbone": "resnet50"},
        ["--backbone", "resnet50"],
        ["--option", "csrt.backbone=resnet50"],
    ),
    ("kcf", {"search_size": 96}, ["--search-size", "96"], ["--option", "kcf.search_size=96"]),
    ("atom", {"box_steps": 3}, ["--option", "box_steps=3"], ["--option", "atom.box_steps=3"]),
    ("atom", {"search_size": 100}, ["--search-size", "100"], ["--option", "atom.search_size=100"]),
    (
        "dimp-nce+",
        {"backbone": "vgg"},
        ["--backbone", "vgg"],
        ["--option", "dimp-nce+.backbone=vgg"],
    ),
    (  # int8 replaces the float32 backbone only
        "atom",
        {"backbone_runtime": "onnx-int8", "precision": "bfloat16"},
        ["--option", "backbone_runtime=onnx-int8", "--option", "precision=bfloat16"],
        ["--option", "atom.backbone_runtime=onnx-int8", "--option", "atom.precision=bfloat16"],
    ),
]


@pytest.mark.parametrize(("tracker", "options", "track_flags", "eval_flags"), REFUSED)
def test_the_same_options_are_refused_with_the_same_message(
    dataset, tmp_path, capsys, tracker, options, track_flags, eval_flags
):
    # the torch trackers' options (the runtime's: test_the_runtime_refuses_torch_options_alike)
    runtime = "torch" if tracker in SHIPPED_EXPORTS else None
    flags = ["--runtime", "torch"] if runtime else []
    with pytest.raises(ValueError) as error:
        ebmtrack.load_tracker(tracker, runtime=runtime, **options)
    message = str(error.value)
    # The same message, after the flag the value came from where one value alone is wrong.
    assert main(_track(dataset, tracker, *flags, *track_flags)) == 2
    track_flag = " ".join(track_flags[:2])
    assert _one_error(capsys, "track") in (message, f"{track_flag}: {message}")
    assert main(_eval(dataset, tmp_path, tracker, *flags, *eval_flags)) == 2
    assert _one_error(capsys, "eval") in (message, f"{' '.join(eval_flags[:2])}: {message}")


@pytest.mark.parametrize(
    ("options", "track_flags", "eval_flags"),
    [
        ({"search_size": 256}, ["--search-size", "256"], ["--option", "atom.search_size=256"]),
        ({"device": "cpu", "seed": 2}, ["--option", "device=cpu"], ["--option", "atom.device=cpu"]),
        ({"backbone": "resnet18"}, ["--backbone", "resnet18"], ["--option", "atom.backbone=x"]),
    ],
)
def test_the_runtime_refuses_torch_options_alike(
    dataset, tmp_path, capsys, options, track_flags, eval_flags
):
    with pytest.raises(
        ValueError, match=r"(torch tracker takes|export holds).*--runtime torch"
    ) as error:
        ebmtrack.load_tracker("atom", **options)
    message = str(error.value)
    assert main(_track(dataset, "atom", *track_flags)) == 2
    assert _one_error(capsys, "track") == f"{' '.join(track_flags[:2])}: {message}"
    assert main(_eval(dataset, tmp_path, "atom", *eval_flags)) == 2
    assert _one_error(capsys, "eval") == f"{' '.join(eval_flags[:2])}: {message}"


def test_a_backbone_runtime_is_refused_where_no_backbone_of_ours_runs(dataset, tmp_path, capsys):
    # the default runs one backbone pass, the siamese estimator's: --onnx would change nothing
    with pytest.raises(ValueError, match="runs no backbone of ours") as error:
        ebmtrack.load_tracker("atom", backbone_runtime="onnx")
    assert main(_track(dataset, "atom", "--onnx")) == 2
    assert _one_error(capsys, "track") == f"--onnx: {error.value}"
    assert main(_eval(dataset, tmp_path, "atom", "--option", "atom.backbone_runtime=onnx")) == 2
    assert _one_error(capsys, "eval") == f"--option atom.backbone_runtime=onnx: {error.value}"
    # with two passes it is the export's files that refuse it
    two = {"backbone_runtime": "onnx", "classifier_features": "backbone"}
    with pytest.raises(ValueError, match="export holds onnx-int8 only.*--runtime torch"):
        ebmtrack.load_tracker("atom", **two)


def test_weights_are_refused_where_they_mean_nothing(dataset, tmp_path, capsys):
    weights = str(default_model().box_head)
    with pytest.raises(ValueError, match="with box_mode='siamese' reads no box-head") as error:
        ebmtrack.load_tracker("atom", runtime="torch", weights=weights)
    # The error names the options it concerns, so every command names the flag behind them.
    torch_runtime = ["--runtime", "torch"]
    assert main(_track(dataset, "atom", *torch_runtime, "--weights", weights)) == 2
    assert _one_error(capsys, "track") == f"--weights {weights}: {error.value}"
    assert main(_eval(dataset, tmp_path, "atom", *torch_runtime, "--weights", weights)) == 2
    assert _one_error(capsys, "eval") == f"--weights {weights}: {error.value}"
    # A flag of a kind the tracker is not: refused naming the flag, on every route alike.
    with pytest.raises(ValueError, match="^tracker 'csrt' takes no box-head weights$"):
        ebmtrack.load_tracker("csrt", weights=weights)
    refused = f"--weights {weights}: tracker 'csrt' takes no box-head weights"
    assert main(_track(dataset, "csrt", "--weights", weights)) == 2
    assert _one_error(capsys, "track") == refused
    assert main(_eval(dataset, tmp_path, "csrt", "--weights", weights)) == 2
    assert _one_error(capsys, "eval") == refused
    both = ["--weights", weights, "--option", f"atom-iounet.weights={weights}", *torch_runtime]
    assert main(_eval(dataset, tmp_path, "atom-iounet", *both)) == 2
    assert "given twice" in _one_error(capsys, "eval")


def test_the_issue_case_device_and_backbone_are_not_ignored(dataset, capsys):
    # Once, these two flags were dropped for any tracker but atom: it ran MobileNetV2 on the CPU.
    flags = ["--device", "cuda", "--backbone", "resnet50"]
    assert main(_track(dataset, "dimp-nce+", *flags)) == 2
    expected = "CUDA is not available" if not torch.cuda.is_available() else "resnet50"
    assert expected in _one_error(capsys, "track")


def _probe(**options):
    raise ValueError(f"probe built with {sorted(options.items())}")


def test_every_flag_reaches_the_tracker(dataset, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(registry, "TRACKERS", dict(registry.TRACKERS))
    probe = registry.TrackerVariant(
        _probe, {"seed": 1}, AtomParams, more_options=("weights",), kind=registry.OUR_TRACKER
    )
    registry.register_tracker("probe", probe)
    monkeypatch.chdir(tmp_path)
    Path("w.safetensors").write_bytes(b"")  # the files a flag names must exist
    flags = ["--backbone", "mobilenetv2", "--device", "cpu", "--search-size", "96", "--onnx"]
    flags += ["--weights", "w.safetensors", "--option", "seed=3", "--option", "aug_flip=false"]
    assert main(_track(dataset, "probe", *flags)) == 2
    received = _one_error(capsys, "track")
    expected = {
        "backbone": "mobilenetv2",
        "device": "cpu",
        "search_size": 96,
        "backbone_runtime": "onnx",
        "seed": 3,
        "aug_flip": False,
    }
    for key, value in expected.items():
        assert f"('{key}', {value!r})" in received
    assert f"('weights', {Path('w.safetensors')!r})" in received
    # eval passes the same options the same way.
    options = [f"probe.{k}={v}" for k, v in expected.items()]
    eval_flags = [flag for item in options for flag in ("--option", item)]
    assert main(_eval(dataset, tmp_path, "probe", *eval_flags, "--weights", "w.safetensors")) == 2
    assert _one_error(capsys, "eval") == received
    with pytest.raises(ValueError) as error:
        ebmtrack.load_tracker("probe", weights=Path("w.safetensors"), **expected)
    assert str(error.value) == received


@pytest.mark.slow
def test_box_head_weights_are_taken_by_every_route(dataset, tmp_path, capsys):
    weights = str(pack_box_head())
    tracker = ebmtrack.load_tracker("dimp-nce+", weights=weights, search_size=96)
    assert tracker.box_head is not None
    assert main(_track(dataset, "dimp-nce+", "--weights", weights, "--search-size", "96")) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 3
    flags = ["--weights", weights, "--option", "dimp-nce+.search_size=96", "--no-progress"]
    assert main(_eval(dataset, tmp_path, "dimp-nce+", *flags)) == 0


def test_the_help_names_every_registered_tracker(capsys):
    with pytest.raises(SystemExit):
        main(["track", "--help"])
    help_text = "".join(capsys.readouterr().out.split())  # argparse wraps lines at hyphens
    for name in registry.tracker_names():
        assert name in help_text, name


@pytest.mark.slow
def test_an_exponent_number_reaches_the_tracker_as_a_number(dataset, capsys):
    # YAML reads 1e-3 as a string; the tracker once failed on it with a traceback.
    assert main(_track(dataset, "atom", "--option", "learning_rate=1e-3")) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 3


def test_a_flag_that_does_not_apply_is_refused_by_the_flag(dataset, tmp_path, capsys):
    # nanotrack takes a `backbone` option (its ONNX file), but --backbone names ours.
    assert main(_track(dataset, "nanotrack", "--backbone", "resnet18")) == 2
    refused = "--backbone resnet18: tracker 'nanotrack' has no backbone of ours"
    assert _one_error(capsys, "track") == refused
    assert main(_track(dataset, "kcf", "--onnx")) == 2
    assert _one_error(capsys, "track") == "--onnx: tracker 'kcf' has no backbone of ours"
    assert main(_track(dataset, "csrt", "--peer-models", str(tmp_path))) == 2
    assert _one_error(capsys, "track") == "--peer-models: not used by --tracker csrt"
    # eval gives --peer-models to the trackers that read model files only.
    flags = ["--peer-models", str(tmp_path), "--no-progress"]
    assert main(_eval(dataset, tmp_path, "kcf", *flags)) == 0
    capsys.readouterr()


def test_a_renamed_option_names_its_new_name_in_every_command(
    dataset, tmp_path, capsys, monkeypatch
):
    from dataclasses import dataclass
    from typing import ClassVar

    @dataclass
    class Params:
        steps: int = 3
        renamed: ClassVar[dict[str, str]] = {"old_steps": "steps"}

        @classmethod
        def names(cls):
            return ["steps"]

    monkeypatch.setattr(registry, "TRACKERS", dict(registry.TRACKERS))
    registry.register_tracker("probe", registry.TrackerVariant(_probe, {}, Params))
    message = "tracker 'probe': option 'old_steps' was renamed 'steps'"
    with pytest.raises(ValueError, match=f"^{message}$"):
        ebmtrack.load_tracker("probe", old_steps=2)
    assert main(_track(dataset, "probe", "--option", "old_steps=2")) == 2
    assert _one_error(capsys, "track") == f"--option old_steps=2: {message}"
    assert main(_eval(dataset, tmp_path, "probe", "--option", "probe.old_steps=2")) == 2
    assert _one_error(capsys, "eval") == f"--option probe.old_steps=2: {message}"
