"""Ordinary faults, met as a user meets them. Each gives one line on stderr naming the flag or
path and the cause, a non-zero exit, no traceback, and leaves the files that were there as they
were (docs/reliability.md lists these faults).

Every kind of fault is met at least once by the real command in a subprocess (``ebmtrack``);
its variants run ``main()`` in this process (``cli``), which is the same code without the
seconds each new interpreter costs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path

import cv2
import numpy as np
import pytest
from cli_helpers import (
    EBMTRACK,
    QUIET,
    ebmtrack,
    error_line,
    generated_sequences,
    snapshot,
    without_fps,
)

from ebmtrack.cli.main import main

SHARED_PEERS = Path(__file__).resolve().parents[2] / ".." / "shared" / "peers"
INIT = "15,20,20,20"  # the first box of generated_sequences


def summary(frames: int, out) -> str:
    """track's summary line for one target in txt, its speeds written ``*``."""
    return f"{frames} frames, 1 target, * FPS (* tracking only), boxes in {out} (txt)"


@pytest.fixture
def data(tmp_path):
    return generated_sequences(tmp_path / "data", count=1, frames=6)


@pytest.fixture
def sequence(data):
    return data / "Square0"


@pytest.fixture
def cli(capsys):
    """``cli(*args)``: ``main(args)`` in this process, as a CompletedProcess."""

    def run(*args) -> subprocess.CompletedProcess:
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return run


# 1. I/O errors: --out under a file, unwritable, a full disk -------------------------------

COMMANDS = {
    "track": lambda d, out: ["track", d / "Square0", "--init", INIT, "--tracker", "kcf", "--out",
                             out / "boxes.txt"],
    "eval": lambda d, out: ["eval", d, "--trackers", "kcf", "--out", out],
    "train": lambda d, out: ["train", "--preset", "synthetic-smoke", "--out", out],
    "regress1d": lambda d, out: ["regress1d", "--quick", "--out", out],
    "demo": lambda d, out: ["demo", "--tracker", "kcf", "--out", out],
}  # fmt: skip


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_out_under_a_file_is_one_line_and_changes_nothing(command, data, tmp_path, cli):
    blocker = tmp_path / "taken"
    blocker.write_text("keep me\n")
    before = snapshot(tmp_path)
    run = ebmtrack if command == "track" else cli
    done = run(*COMMANDS[command](data, blocker / "below"), "--no-progress")
    line = error_line(done, command)
    assert f"{blocker} is a file, not a folder" in line and "--out" in line
    assert snapshot(tmp_path) == before


def _sys_refuses_files() -> bool:
    try:
        with tempfile.TemporaryFile(dir="/sys"):
            return False
    except OSError:
        return True


@pytest.mark.skipif(
    not _sys_refuses_files(), reason="needs /sys, a folder where even root creates no files"
)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_out_without_permission_is_one_line(command, data, cli):
    done = cli(*COMMANDS[command](data, Path("/sys/ebmtrack-out")), "--no-progress")
    assert "cannot write to /sys: Permission denied" in error_line(done, command)


def test_track_out_that_is_a_folder(sequence, tmp_path, cli):
    done = cli("track", sequence, "--init", INIT, "--tracker", "kcf", "--out", tmp_path)
    assert f"--out {tmp_path}: is a folder, not a file" in error_line(done, "track")


def test_track_on_a_full_device_names_it(sequence, cli):
    args = ["track", sequence, "--init", INIT, "--tracker", "kcf", "--out", "/dev/full"]
    done = cli(*args, "--no-progress")
    assert error_line(done, "track").endswith("/dev/full: No space left on device")


def test_track_write_failure_keeps_the_old_file_and_a_partial(sequence, tmp_path):
    out = tmp_path / "boxes.txt"
    out.write_text("an earlier run\n")
    args = ["track", sequence, "--init", INIT, "--tracker", "kcf", "--out", out, "--no-progress"]
    done = ebmtrack(*args, file_size_limit=60)  # two lines of boxes fit
    line = error_line(done, "track")
    assert f"{out}: File too large" in line
    assert line.endswith(f"2 of 6 boxes written to {out}.partial")
    assert out.read_text() == "an earlier run\n"
    assert len((tmp_path / "boxes.txt.partial").read_text().splitlines()) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["boxes.txt", "boxes.txt.partial", "data"]


def test_eval_stops_when_results_cannot_be_written(data, tmp_path):
    out = tmp_path / "out"
    for workers in ("0", "1"):
        args = ["eval", data, "--trackers", "kcf", "--out", out, "--workers", workers]
        done = ebmtrack(*args, "--no-progress", file_size_limit=100)
        assert error_line(done, "eval") == (
            f"ebmtrack eval: error: cannot write results to {out}: File too large"
        )
        assert not list(out.rglob("Square0.txt"))


@pytest.mark.slow
def test_train_stops_when_a_checkpoint_cannot_be_written(tmp_path):
    out = tmp_path / "run"
    args = ["train", "--preset", "synthetic-smoke", "--out", out, "--epochs", "1"]
    args += ["--samples-per-epoch", "8", "--batch-size", "4", "--set", "trainer.val_every=0"]
    done = ebmtrack(*args, "--threads", "1", "--no-progress", file_size_limit=4096)
    line = error_line(done, "train")
    assert line.startswith(f"ebmtrack train: error: cannot write the run to {out}: ")
    assert "File too large" in line
    assert not (out / "checkpoints" / "latest").exists()


@pytest.mark.slow
def test_track_onnx_export_that_cannot_be_written(sequence, tmp_path):
    home = tmp_path / "home"
    home.write_text("a file, not a folder\n")
    args = ["track", sequence, "--init", INIT, "--onnx", "--search-size", "128", "--no-progress"]
    # the torch tracker with two passes exports its backbone into the cache
    args += ["--runtime", "torch", "--option", "classifier_features=backbone"]
    done = subprocess.run(
        [*EBMTRACK, *map(str, args)], capture_output=True, text=True, env={**QUIET, "HOME": home}
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]  # after the classifier-only warning
    assert last.startswith(f"ebmtrack track: error: {home}/.cache/ebmtrack/onnx: Not a directory")
    assert last.endswith(
        "--onnx exports the backbone into the ONNX cache (~/.cache/ebmtrack/onnx, or "
        "$XDG_CACHE_HOME/ebmtrack/onnx)"
    )


# 2. track never destroys an existing boxes file --------------------------------------------


def test_bad_render_path_leaves_the_boxes_file_alone(sequence, tmp_path):
    out = tmp_path / "boxes.txt"
    out.write_text("an earlier run\n")
    (tmp_path / "file").write_text("x")
    render = tmp_path / "file" / "video.mp4"
    args = ["track", sequence, "--init", INIT, "--tracker", "kcf", "--out", out, "--render", render]
    line = error_line(ebmtrack(*args), "track")
    assert f"--render {render}: {tmp_path / 'file'} is a file, not a folder" in line
    assert out.read_text() == "an earlier run\n"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_after_a_frame_is_written_counts_that_frame(sequence, tmp_path, cli,
                                                            monkeypatch, signum):
    """Ctrl-C (or SIGTERM) that lands after frame 3's lines are written, before they were
    counted, said 2 boxes while the .partial files held 3: the count printed is the count
    written, in the boxes file and the video alike."""
    from ebmtrack.cli import track

    emit = track._Outputs.emit

    def emit_then_signal(self, index, frame, results):
        keep_going = emit(self, index, frame, results)
        if index == 3:
            os.kill(os.getpid(), signum)  # handled at once, where no handler is held
        return keep_going

    monkeypatch.setattr(track._Outputs, "emit", emit_then_signal)
    out, render = tmp_path / "boxes.csv", tmp_path / "video.avi"
    args = ["track", sequence, "--init", INIT, "--tracker", "kcf", "--out", out, "--render", render]
    code = {signal.SIGINT: 130, signal.SIGTERM: 143}[signum]
    line = error_line(cli(*args, "--no-progress"), "track", code=code)
    word = "interrupted" if signum == signal.SIGINT else "terminated (SIGTERM)"
    assert line == (
        f"ebmtrack track: {word}; 3 of 6 boxes written to {out}.partial; "
        f"3 of 6 frames written to {render}.partial"
    )
    assert len(Path(f"{out}.partial").read_text().splitlines()) == 1 + 3  # the header, 3 rows
    video = cv2.VideoCapture(f"{render}.partial")
    assert int(video.get(cv2.CAP_PROP_FRAME_COUNT)) == 3
    video.release()


def test_undecodable_frame_keeps_the_old_file_and_a_partial(sequence, tmp_path, cli):
    (sequence / "img" / "0005.png").write_bytes(b"not a png")
    out, render = tmp_path / "boxes.txt", tmp_path / "video.mp4"
    out.write_text("an earlier run\n")
    args = ["track", sequence, "--init", INIT, "--tracker", "kcf", "--out", out, "--render", render]
    line = error_line(cli(*args, "--no-progress"), "track")
    prefix = f"ebmtrack track: error: frame 5: cannot decode image: {sequence}/img/0005.png"
    assert line.startswith(prefix)
    assert line.endswith(
        f"4 of 6 boxes written to {out}.partial; 4 of 6 frames written to {render}.partial"
    )
    assert out.read_text() == "an earlier run\n" and not render.exists()
    assert len(Path(f"{out}.partial").read_text().splitlines()) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "boxes.txt",
        "boxes.txt.partial",
        "data",
        "video.mp4.partial",
    ]


def test_complete_run_replaces_the_file(sequence, tmp_path, cli):
    out = tmp_path / "boxes.txt"
    out.write_text("an earlier run\n")
    done = cli("track", sequence, "--init", INIT, "--tracker", "kcf", "--out", out, "--no-progress")
    assert done.returncode == 0
    # One summary line, nothing else.
    assert without_fps(done.stderr) == f"ebmtrack track: {summary(6, out)}\n"
    assert len(out.read_text().splitlines()) == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["boxes.txt", "data"]


# 4. init boxes: clipped with one warning, refused without overlap ---------------------------


@pytest.mark.parametrize("tracker", ["csrt", "kcf", "mosse", "medianflow", "boosting"])
@pytest.mark.parametrize(
    ("init", "clipped"),
    [("100,70,40,40", "100.00,70.00,20.00,20.00"), ("0,0,100000,100000", "0.00,0.00,120.00,90.00")],
)
def test_box_crossing_the_edge_is_clipped_once(sequence, tracker, init, clipped, cli):
    run = ebmtrack if (tracker, init) == ("csrt", "100,70,40,40") else cli
    done = run("track", sequence, "--init", init, "--tracker", tracker, "--no-progress")
    assert done.returncode == 0, done.stderr
    boxes = done.stdout.splitlines()
    assert len(boxes) == 6 and boxes[0] == clipped
    warning, last = done.stderr.strip().splitlines()
    assert warning == (
        f"ebmtrack track: warning: --init {init} crosses the edge of the 120x90 frame: "
        f"clipped to {clipped.replace('.00', '')}"
    )
    assert without_fps(last) == f"ebmtrack track: {summary(6, 'stdout')}"


@pytest.mark.slow
def test_atom_clips_a_huge_box_to_the_frame(sequence):
    args = ["track", sequence, "--init", "0,0,100000,100000", "--search-size", "128"]
    args += ["--runtime", "torch"]
    done = ebmtrack(*args, "--threads", "1", "--no-progress")
    assert done.returncode == 0, done.stderr
    boxes = np.array([[float(v) for v in line.split(",")] for line in done.stdout.splitlines()])
    assert boxes[0].tolist() == [0, 0, 120, 90]
    # Every box the tracker reports overlaps the frame (before the rule: mostly outside it).
    assert np.all(boxes[:, 0] < 120) and np.all(boxes[:, 1] < 90)
    assert np.all(boxes[:, 0] + boxes[:, 2] > 0) and np.all(boxes[:, 1] + boxes[:, 3] > 0)
    assert "clipped to 0,0,120,90" in done.stderr


def test_a_tracker_that_cannot_start_says_so(sequence, cli):
    # MIL draws negative samples around the box: none fit beside a box that fills the frame.
    done = cli("track", sequence, "--init", "0,0,120,90", "--tracker", "mil", "--no-progress")
    assert "OpenCV's mil cannot start on the box 0,0,120,90 in a 120x90 frame" in error_line(
        done, "track"
    )


@pytest.mark.parametrize("tracker", ["kcf", "atom"])
def test_box_outside_the_frame_is_refused(sequence, tracker, cli):
    done = cli("track", sequence, "--init", "130,10,20,20", "--tracker", tracker)
    assert "lies outside the first frame of size 120x90" in error_line(done, "track")


# 5. sources ----------------------------------------------------------------------------------


def test_text_file_is_not_a_video(tmp_path, cli):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n" * 50)
    done = cli("track", notes, "--init", "1,1,5,5", "--tracker", "kcf")
    assert f"source {notes}: not a video file" in error_line(done, "track")


def test_truncated_video_warns(tmp_path):
    path = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (160, 120))
    rng = np.random.default_rng(0)
    for _ in range(40):
        writer.write(rng.integers(0, 255, (120, 160, 3), dtype=np.uint8))
    writer.release()
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    out = tmp_path / "boxes.txt"
    args = ["track", path, "--init", "10,10,40,40", "--tracker", "kcf", "--out", out]
    done = ebmtrack(*args, "--no-progress")
    assert done.returncode == 0
    read = len(out.read_text().splitlines())
    assert 0 < read < 40
    warning, last = done.stderr.strip().splitlines()
    assert warning == (
        f"ebmtrack track: warning: read {read} of the 40 frames {path} announces: the file is "
        "truncated or damaged"
    )
    assert without_fps(last) == f"ebmtrack track: {summary(read, out)}"


# 6. flags, not Python argument names ---------------------------------------------------------


def test_dnn_peers_name_the_flag_they_need(sequence, cli):
    for tracker in ("nanotrack", "vit"):
        done = cli("track", sequence, "--init", INIT, "--tracker", tracker)
        line = error_line(done, "track")
        assert f"--tracker {tracker} needs --peer-models DIR" in line and "=" not in line
    done = cli("eval", sequence.parent, "--trackers", "vit", "--out", sequence.parent.parent / "x")
    assert "--tracker vit needs --peer-models DIR" in error_line(done, "eval")


def test_backbones_without_shipped_weights_name_the_flag(sequence, cli):
    for backbone, needs in (("resnet18", "torchvision's"), ("nanotrack", "nanotrack_backbone")):
        done = cli("track", sequence, "--init", INIT, "--backbone", backbone, "--runtime", "torch")
        line = error_line(done, "track")
        assert f"--backbone {backbone} needs --backbone-weights FILE" in line and needs in line
        assert "=" not in line
    done = cli("train", "--out", sequence / "run", "--backbone", "resnet50")
    assert "needs --backbone-weights FILE for backbone resnet50" in error_line(done, "train")
    done = cli("track", sequence, "--init", INIT, "--tracker", "kcf", "--backbone", "resnet18")
    # The registry's message, the same as load_tracker's (tests/cli/test_tracker_options.py).
    assert "--backbone resnet18: tracker 'kcf' has no backbone of ours" in error_line(done, "track")


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_PEERS.is_dir(), reason="needs ../shared/peers")
def test_peer_models_flag_reaches_nanotrack_vit_and_the_nanotrack_backbone(sequence, tmp_path, cli):
    for extra in (["--tracker", "vit"], ["--tracker", "nanotrack"], ["--backbone", "nanotrack"]):
        args = ["track", sequence, "--init", INIT, *extra, "--peer-models", SHARED_PEERS]
        if extra[0] == "--backbone":
            args += ["--search-size", "128", "--threads", "1", "--runtime", "torch"]
        done = cli(*args, "--no-progress")
        assert done.returncode == 0, done.stderr
        assert len(done.stdout.splitlines()) == 6
    args = ["demo", "--tracker", "vit", "--peer-models", SHARED_PEERS, "--out", tmp_path / "demo"]
    done = ebmtrack(*args, "--max-frames", "3", "--no-video", "--no-progress")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "demo" / "boxes.txt").read_text().count("\n") == 3


def test_train_without_a_preset_says_what_it_needs(tmp_path):
    done = ebmtrack("train", "--out", tmp_path / "run")
    line = error_line(done, "train")
    assert line.startswith("ebmtrack train: error: --preset atom-r18 (the default) needs ")
    assert "--backbone-weights FILE" in line and "--got10k DIR" in line
    assert "--preset synthetic-smoke runs on generated data alone" in line
    assert not (tmp_path / "run").exists()


# 7. train --resume without a run -------------------------------------------------------------


def test_resume_without_a_run_is_refused_and_creates_nothing(tmp_path):
    missing = tmp_path / "missing"
    done = ebmtrack("train", "--preset", "synthetic-smoke", "--out", missing, "--resume")
    assert f"--resume: {missing} holds no run to resume" in error_line(done, "train")
    assert not missing.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    done = ebmtrack("train", "--out", empty, "--resume")
    assert f"--resume: {empty} holds no run to resume" in error_line(done, "train")
    assert list(empty.iterdir()) == []


# 8. short ground truth, broken pipe, eval progress --------------------------------------------


def test_ground_truth_shorter_than_the_frames_warns(data, tmp_path):
    gt = data / "Square0" / "groundtruth_rect.txt"
    gt.write_text("".join(gt.read_text().splitlines(keepends=True)[:4]))
    out = tmp_path / "out"
    done = ebmtrack("eval", data, "--trackers", "kcf", "--out", out, "--workers", "0")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if ": warning: " in line]
    assert warnings == [
        f"ebmtrack eval: warning: {data / 'Square0'}: 4 boxes in groundtruth_rect.txt for 6 "
        "frames: the first 4 frames are used"
    ]
    assert len((out / "results" / "kcf" / "default_000" / "Square0.txt").read_text().split()) == 16


def test_closed_stdout_ends_track_quietly(sequence):
    process = subprocess.Popen(
        [*EBMTRACK, "track", str(sequence), "--init", INIT, "--tracker", "kcf", "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=QUIET,
        bufsize=0,
    )
    process.stdout.readline()
    process.stdout.close()  # as `| head -1` does
    _, err = process.communicate(timeout=60)
    assert process.returncode in (0, 141)  # 0: everything was written before the close
    # Quiet: no error, no traceback; a run that wrote everything says so in its summary line.
    lines = err.decode().splitlines()
    assert lines == [] or (
        process.returncode == 0
        and len(lines) == 1
        and lines[0].startswith("ebmtrack track: 6 frames, 1 target")
    ), err


def test_eval_progress_counts_frames(data, tmp_path, cli):
    done = cli("eval", data, "--trackers", "kcf,csrt", "--out", tmp_path / "out", "--workers", "0")
    assert done.returncode == 0
    # Counted in frames (2 trackers x 6 frames), not in sequences: it moves from the first frame.
    assert "0/12 [" in done.stderr and "12/12 [" in done.stderr and "frame/s" in done.stderr


# 9. help texts ---------------------------------------------------------------------------------


def test_help_runs():
    done = subprocess.run([*EBMTRACK, "track", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "--peer-models DIR" in done.stdout
