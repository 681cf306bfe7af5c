"""The commands in the default install (no PyTorch, ebmtrack[train]'s modules missing) and in an
install without OpenCV: what runs there runs, what cannot is one line naming the module that is
missing and the install that provides it."""

import re

import pytest
from cli_helpers import square_sequence
from default_install import EXTRA, TRAIN_MODULES, one_error_line, run_command, run_python

from ebmtrack.cli.main import missing_module
from ebmtrack.tracking.runtime import lite_options


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    """An OTB-layout sequence of 3 frames, ``Square``, in a folder of its own."""
    return square_sequence(tmp_path_factory.mktemp("data"))


def _entries(out: str) -> dict[str, str]:
    """``KEY -> DEFAULT and the entry's text`` of ``trackers NAME``'s listing."""
    entries, key = {}, None
    for line in out.splitlines():
        match = re.match(r"^  (\w+)=(\S+)\s*(.*)$", line)
        if match:
            key = match.group(1)
            entries[key] = f"{match.group(2)} {match.group(3)}"
        elif key and line.startswith("   "):
            entries[key] += " " + line.strip()
        else:
            key = None
    return entries


@pytest.mark.parametrize("name", ["atom", "atom-polished"])
def test_without_torch_a_shipped_tracker_lists_its_exports_options(name):
    done = run_command(["trackers", name])
    assert done.returncode == 0 and not done.stderr, done.stderr[-3000:]
    assert done.stdout.startswith(f"Without PyTorch {name} runs its shipped export")
    entries = _entries(done.stdout)
    assert set(entries) == set(lite_options(name))
    assert entries["learning_rate"].startswith("0.01 weight of a new sample.")
    assert "capacity of the sample memory. [an integer >= 1]" in entries["memory_size"]
    assert "[in (0, 1]]" in entries["size_update_rate"]
    assert "[true or false]" in entries["aug_flip"]
    assert "--search-size" not in done.stdout  # the export fixes it
    assert done.stdout.rstrip().endswith("docs/atom.md")


def test_without_torch_atom_lt_runs_its_shipped_export(clip, tmp_path):
    """The long-term tracker ships as an export: ``track`` and ``load_tracker`` run it."""
    out = tmp_path / "boxes.txt"
    args = ["track", clip, "--init", "30,20,20,20", "--tracker", "atom-lt", "--no-progress"]
    done = run_command([*args, "--out", out])
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(out.read_text().splitlines()) == 3
    code = (
        "import ebmtrack; tracker = ebmtrack.load_tracker('atom-lt'); "
        "print(type(tracker).__name__, tracker.long_term is not None)"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["LiteTracker", "True"]


def test_without_torch_a_tracker_that_runs_on_torch_only_is_one_line():
    line = one_error_line(run_command(["trackers", "dimp-nce+"]), "trackers")
    assert line.endswith(f"dimp-nce+ needs PyTorch: {EXTRA}")


def test_without_torch_an_opencv_tracker_takes_device_cpu_and_auto(clip, tmp_path):
    out = tmp_path / "boxes.txt"
    base = ["track", clip, "--init", "30,20,20,20", "--tracker", "csrt", "--no-progress"]
    for device in ("auto", "cpu"):
        done = run_command([*base, "--device", device, "--out", out])
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(out.read_text().splitlines()) == 3
    line = one_error_line(run_command([*base, "--device", "cuda", "--out", out]), "track")
    assert line == "ebmtrack track: error: --device cuda: tracker csrt runs on the CPU only"
    evaluate = ["eval", clip.parent, "--trackers", "csrt", "--out", tmp_path / "eval"]
    line = one_error_line(run_command([*evaluate, "--device", "cuda"]), "eval")
    assert line == "ebmtrack eval: error: --device cuda: tracker csrt runs on the CPU only"
    done = run_command([*evaluate, "--device", "auto", "--workers", "0", "--no-progress"])
    assert "PyTorch" not in done.stderr and "--device" not in done.stderr, done.stderr


def test_a_missing_module_is_named_and_needs_pytorch_only_where_the_command_does():
    needs = f"(ebmtrack[train]): {EXTRA}"
    assert missing_module("export", "torch") == f"export needs PyTorch {needs}"
    assert missing_module("train", "scipy.optimize") == f"train needs SciPy {needs}"
    assert (
        missing_module("track", "torch") == f"PyTorch is not installed (no module 'torch'): {EXTRA}"
    )
    assert missing_module("eval", "matplotlib.figure") == (  # the default install's own
        "matplotlib is not installed (no module 'matplotlib'): pip install matplotlib"
    )
    assert missing_module("track", "cv2") == (
        "OpenCV is not installed (no module 'cv2'): pip install opencv-contrib-python-headless"
    )
    assert missing_module("track", "ebmtrack.nothing") is None  # ours: a fault, not an install


def test_without_opencv_the_help_runs_and_a_command_that_needs_it_is_one_line(clip, tmp_path):
    blocked = {*TRAIN_MODULES, "cv2"}
    for args in (["--help"], ["trackers"], ["track", "--help"]):
        done = run_command(args, blocked)
        assert done.returncode == 0 and not done.stderr, done.stderr[-3000:]
    args = ["track", clip, "--init", "30,20,20,20", "--out", tmp_path / "b.txt", "--no-progress"]
    line = one_error_line(run_command(args, blocked), "track")
    assert line.endswith(
        "OpenCV is not installed (no module 'cv2'): pip install opencv-contrib-python-headless"
    )


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("size_update_rate=-3", "size_update_rate must be in (0, 1], got -3"),
        ("learning_rate=abc", "learning_rate must be a number, got 'abc'"),
        ("memory_size=2.5", "memory_size must be an integer, got 2.5"),
        ("seed=-1", "seed must be an integer >= 0, got -1"),
    ],
)
def test_without_torch_an_option_out_of_range_is_one_line_naming_it(
    clip, tmp_path, option, message
):
    args = ["track", clip, "--init", "30,20,20,20", "--out", tmp_path / "b.txt", "--option", option]
    line = one_error_line(run_command(args), "track")
    assert line == f"ebmtrack track: error: --option {option}: {message}"
    assert not (tmp_path / "b.txt").exists()


@pytest.mark.parametrize(
    "flags",
    [
        ["--search-size", "256"],
        ["--backbone", "resnet18"],
        ["--onnx", "--option", "classifier_features=backbone"],
    ],
)
def test_without_torch_a_torch_trackers_flag_says_what_needs_pytorch(clip, tmp_path, flags):
    args = ["track", clip, "--init", "30,20,20,20", "--out", tmp_path / "b.txt", *flags]
    line = one_error_line(run_command(args), "track")
    assert "(--runtime torch)" in line and "ebmtrack export" in line
    assert line.endswith(f"both need PyTorch: {EXTRA}")


def test_without_torch_onnx_says_the_default_runs_no_backbone_of_ours(clip, tmp_path):
    args = ["track", clip, "--init", "30,20,20,20", "--out", tmp_path / "b.txt", "--onnx"]
    line = one_error_line(run_command(args), "track")
    assert "one backbone pass" in line and "classifier_features=backbone" in line
