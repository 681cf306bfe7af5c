"""``ebmtrack track`` on live sources, with several targets, its output formats, the window."""

from __future__ import annotations

import functools
import http.server
import json
import threading
import time

import cv2
import numpy as np
import pytest
from cli_helpers import generated_sequences, without_fps
from PIL import Image

from ebmtrack.cli import window
from ebmtrack.cli.main import main
from ebmtrack.data import streams

INIT = "15,20,20,20"  # the first box of generated_sequences


@pytest.fixture
def sequence(tmp_path):
    return generated_sequences(tmp_path / "data", count=1, frames=6) / "Square0"


def frames_of(sequence) -> list[np.ndarray]:
    return [cv2.imread(str(p)) for p in sorted((sequence / "img").iterdir())]  # BGR


class FakeCapture:
    """A cv2.VideoCapture stand-in giving ``frames`` (BGR), then calling ``then()`` (which may
    raise KeyboardInterrupt, as Ctrl-C does) and ending the stream."""

    def __init__(self, frames, then=None):
        self.frames, self.then = list(frames), then
        self.released = False

    def isOpened(self):  # noqa: N802
        return True

    def get(self, prop):
        return 0.0

    def read(self):
        if self.frames:
            return True, self.frames.pop(0)
        if self.then is not None:
            self.then()
        return False, None

    def release(self):
        self.released = True


@pytest.fixture
def run(capsys):
    def call(*args):
        capsys.readouterr()
        code = main(["track", *map(str, args), "--tracker", "kcf", "--no-progress"])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def test_camera_until_ctrl_c_completes_the_boxes_file(sequence, tmp_path, monkeypatch, run):
    out = tmp_path / "cam.txt"
    seen = []

    def ctrl_c():
        # Written as it goes: the visible PATH.partial holds every frame's box so far. The
        # frames are read ahead in a thread (this runs there), so wait for the tracker to
        # catch up with the frames read before the interrupt.
        partial = tmp_path / "cam.txt.partial"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lines = len(partial.read_text().splitlines()) if partial.exists() else 0
            if lines >= 6:
                break
            time.sleep(0.02)
        seen.append(lines)
        raise KeyboardInterrupt

    capture = FakeCapture(frames_of(sequence), then=ctrl_c)
    monkeypatch.setattr(streams, "_open_capture", lambda target: capture)
    code, _, err = run("0", "--init", INIT, "--out", out)
    assert code == 0, err
    assert seen == [6] and capture.released
    assert len(out.read_text().splitlines()) == 6
    assert not (tmp_path / "cam.txt.partial").exists()
    assert without_fps(err.strip()) == (
        f"ebmtrack track: 6 frames, 1 target, * FPS (* tracking only), boxes in {out} (txt), "
        "stopped by Ctrl-C"
    )


def test_stream_over_loopback_http(sequence, tmp_path, run):
    clip = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"MJPG"), 10, (120, 90))
    for frame in frames_of(sequence):
        writer.write(frame)
    writer.release()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        out = tmp_path / "boxes.csv"
        code, _, err = run(f"{base}/clip.avi", "--init", INIT, "--out", out)
        assert code == 0, err
        assert len(out.read_text().splitlines()) == 1 + 6  # the header, then 6 frames
        code, _, err = run(f"{base}/gone.avi", "--init", INIT)
        assert code == 2
        assert f"error: cannot open stream {base}/gone.avi " in err  # the URL as typed
    finally:
        server.shutdown()


def test_formats(sequence, tmp_path, run):
    csv, jsonl = tmp_path / "b.csv", tmp_path / "b.jsonl"
    assert run(sequence, "--init", INIT, "--out", csv)[0] == 0
    rows = csv.read_text().splitlines()
    assert rows[0] == "frame,target,x,y,w,h,score,status,confidence"
    assert rows[1] == "1,0,15.00,20.00,20.00,20.00,nan,normal,nan" and len(rows) == 7
    assert [r.split(",")[0] for r in rows[1:]] == ["1", "2", "3", "4", "5", "6"]
    assert run(sequence, "--init", INIT, "--out", jsonl)[0] == 0
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert lines[0] == {
        "frame": 1,
        "targets": [
            {"box": [15.0, 20.0, 20.0, 20.0], "score": None, "status": "normal", "confidence": None}
        ],
    }
    # --format names the format where the suffix names none, and must agree where it does.
    other = tmp_path / "b.out"
    code, _, err = run(sequence, "--init", INIT, "--out", other, "--format", "csv")
    assert code == 0 and other.read_text().startswith("frame,target,")
    assert "boxes in " in err and "(csv)" in err
    txt = tmp_path / "b.txt"
    code, _, err = run(sequence, "--init", INIT, "--out", txt, "--format", "csv")
    assert code == 2 and "the suffix says txt, --format says csv" in err and not txt.exists()


def test_several_targets(sequence, tmp_path, run):
    boxes = tmp_path / "boxes.txt"
    boxes.write_text("60 40 20 20\n")
    out = tmp_path / "out.csv"
    code, _, err = run(sequence, "--init", INIT, "--init", "10,60,16,16", "--init-file", boxes,
                       "--out", out)  # fmt: skip
    assert code == 0, err
    rows = [r.split(",") for r in out.read_text().splitlines()[1:]]
    assert len(rows) == 6 * 3 and [r[1] for r in rows[:3]] == ["0", "1", "2"]
    assert rows[2][2:6] == ["60.00", "40.00", "20.00", "20.00"]
    assert "6 frames, 3 targets" in err
    code, _, err = run(sequence, "--init", INIT, "--init", INIT, "--out", tmp_path / "x.txt")
    assert code == 2 and "--format txt holds one target" in err
    assert not (tmp_path / "x.txt").exists()


def test_init_with_spaces_as_the_readers_accept(sequence, run):
    spaced = run(sequence, "--init", "15 20 20 20")
    assert spaced[0] == 0 and spaced[1] == run(sequence, "--init", INIT)[1]
    assert run(sequence, "--init", "15, 20,\t20, 20")[0] == 0
    code, _, err = run(sequence, "--init", "15 20 20")
    assert code == 2 and "--init must be X,Y,W,H" in err


def test_a_stale_partial_is_removed_by_a_complete_run(sequence, tmp_path, run):
    out = tmp_path / "boxes.txt"
    (tmp_path / "boxes.txt.partial").write_text("1,2,3,4\n")
    assert run(sequence, "--init", INIT, "--out", out)[0] == 0
    assert out.exists() and not (tmp_path / "boxes.txt.partial").exists()


def test_bad_frame_skipped_or_stop(sequence, tmp_path, run):
    (sequence / "img" / "0004.png").write_bytes(b"broken")
    out = tmp_path / "boxes.csv"
    code, _, err = run(sequence, "--init", INIT, "--out", out, "--on-bad-frame", "skip")
    assert code == 0, err
    rows = [r.split(",") for r in out.read_text().splitlines()[1:]]
    assert len(rows) == 6 and rows[3][7] == "skipped" and rows[3][6] == "nan"
    assert rows[3][2:6] == rows[2][2:6]  # the box carried over
    assert err.splitlines()[0].startswith("ebmtrack track: warning: frame 4: cannot decode")
    assert "1 unreadable frame(s) skipped" in err
    code, _, err = run(sequence, "--init", INIT, "--out", out, "--on-bad-frame", "stop")
    assert code == 2 and "3 of 6 boxes written" in err


def test_gif_render(sequence, tmp_path, run):
    gif = tmp_path / "out.gif"
    code, _, err = run(sequence, "--init", INIT, "--render", gif)
    assert code == 0, err
    with Image.open(gif) as image:
        assert image.n_frames == 6
    assert f"video in {gif}" in err


def test_mp4_render_names_its_codec(sequence, tmp_path, run):
    video = tmp_path / "out.mp4"
    code, _, err = run(sequence, "--init", INIT, "--render", video)
    assert code == 0, err
    capture = cv2.VideoCapture(str(video))
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 6
    capture.release()
    # H.264 where this OpenCV encodes it; otherwise the summary says what was written instead.
    assert "(avc1)" in err or "no H.264 encoder in this OpenCV build: mp4v" in err


class FakeGUI:
    """The HighGUI functions track uses, recording what they were asked."""

    WINDOW_NORMAL, WND_PROP_VISIBLE, COLOR_RGB2BGR = 0, 1, cv2.COLOR_RGB2BGR

    def __init__(self, keys=(), rois=()):
        self.keys, self.rois, self.shown = list(keys), rois, []

    def getBuildInformation(self):  # noqa: N802
        return "  GUI:                           GTK3\n"

    def namedWindow(self, title, flags):  # noqa: N802
        pass

    def imshow(self, title, image):
        self.shown.append(image)

    def waitKey(self, delay):  # noqa: N802
        return self.keys.pop(0) if self.keys else -1

    def getWindowProperty(self, title, prop):  # noqa: N802
        return 1.0

    def destroyWindow(self, title):  # noqa: N802
        pass

    def cvtColor(self, image, code):  # noqa: N802
        return cv2.cvtColor(image, code)

    def selectROIs(self, title, image, crosshair):  # noqa: N802
        self.shown.append(image)
        return np.array(self.rois)


def test_show_draws_every_frame(sequence, monkeypatch, run):
    gui = FakeGUI()
    monkeypatch.setattr(window, "backend", lambda: gui)
    assert run(sequence, "--init", INIT, "--show")[0] == 0
    assert len(gui.shown) == 6
    first = cv2.imread(str(sorted((sequence / "img").iterdir())[0]))
    assert not np.array_equal(gui.shown[0], first)  # the box and its label are drawn


def test_q_in_the_window_stops_like_ctrl_c(sequence, tmp_path, monkeypatch, run):
    monkeypatch.setattr(window, "backend", lambda: FakeGUI(keys=[-1, -1, ord("q")]))
    out = tmp_path / "boxes.txt"
    code, _, err = run(sequence, "--init", INIT, "--show", "--out", out)
    assert code == 130 and "3 of 6 boxes written" in err and not out.exists()


def test_init_select_draws_the_boxes(sequence, tmp_path, monkeypatch, run):
    gui = FakeGUI(rois=[[15, 20, 20, 20], [60, 40, 20, 20]])
    monkeypatch.setattr(window, "backend", lambda: gui)
    out = tmp_path / "boxes.csv"
    code, _, err = run(sequence, "--init", "select", "--out", out)
    assert code == 0, err
    rows = out.read_text().splitlines()
    assert rows[1] == "1,0,15.00,20.00,20.00,20.00,nan,normal,nan"
    assert rows[2] == "1,1,60.00,40.00,20.00,20.00,nan,normal,nan"
    monkeypatch.setattr(window, "backend", lambda: FakeGUI(rois=np.zeros((0, 4))))
    code, _, err = run(sequence, "--init", "select")
    assert code == 2 and "--init select: no box was drawn" in err


def test_headless_opencv_says_how_to_get_windows(sequence, monkeypatch, run):
    headless = FakeGUI()
    headless.getBuildInformation = lambda: "  GUI:                           NONE\n"
    monkeypatch.setattr(window, "backend", lambda: headless)
    for flags in (["--init", INIT, "--show"], ["--init", "select"]):
        code, _, err = run(sequence, *flags)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1
        assert "needs OpenCV with windows" in lines[0] and "ebmtrack[gui]" in lines[0]


def test_live_sigterm_completes_an_error_keeps_the_partial(sequence, tmp_path, monkeypatch, run):
    from ebmtrack.cli.main import Terminated

    out = tmp_path / "cam.csv"

    def sigterm():
        raise Terminated

    frames = frames_of(sequence)
    monkeypatch.setattr(streams, "_open_capture", lambda t: FakeCapture(frames, sigterm))
    code, _, err = run("1", "--init", INIT, "--out", out)
    assert code == 0 and err.strip().endswith("stopped by SIGTERM")
    assert len(out.read_text().splitlines()) == 1 + 6

    def broken():
        raise ValueError("the camera went away")

    monkeypatch.setattr(streams, "_open_capture", lambda t: FakeCapture(frames, broken))
    code, _, err = run("1", "--init", INIT, "--out", tmp_path / "second.csv")
    assert code == 2
    assert f"the camera went away; 6 boxes written to {tmp_path / 'second.csv.partial'}" in err
    assert len((tmp_path / "second.csv.partial").read_text().splitlines()) == 1 + 6
    assert not (tmp_path / "second.csv").exists()
