"""Frame sources: folders, files, cameras, devices and URLs, each opened as its kind."""

from __future__ import annotations

import functools
import http.server
import threading

import cv2
import numpy as np
import pytest

from ebmtrack.data import streams
from ebmtrack.data.streams import BadFrame, open_source, source_kind


class FakeCapture:
    """A cv2.VideoCapture stand-in: ``frames`` BGR frames, then the end of the stream (or
    ``then``, an exception raised by the next read, e.g. KeyboardInterrupt as Ctrl-C)."""

    def __init__(self, frames, fps=0.0, then=None, opened=True):
        self.frames, self.fps, self.then, self.opened = list(frames), fps, then, opened
        self.released = False
        self.reads = 0

    def isOpened(self):  # noqa: N802 (OpenCV's name)
        return self.opened

    def get(self, prop):
        return {cv2.CAP_PROP_FPS: self.fps, cv2.CAP_PROP_FRAME_COUNT: -1}.get(prop, 0.0)

    def read(self):
        self.reads += 1
        if self.frames:
            return True, self.frames.pop(0)
        if self.then is not None:
            raise self.then
        return False, None

    def release(self):
        self.released = True


def bgr_frames(count, size=(64, 48)):
    return [np.full((size[1], size[0], 3), (10 * i, 0, 255), np.uint8) for i in range(count)]


@pytest.fixture
def served(tmp_path):
    """``served(name)``: the URL of ``tmp_path / name`` on an HTTP server on the loopback
    interface, run by a thread of this test."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield lambda name: f"http://127.0.0.1:{server.server_address[1]}/{name}"
    server.shutdown()
    thread.join()


def write_avi(path, frames):
    """An MJPG AVI: FFmpeg reads it front to back, so a plain HTTP server can stream it."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (64, 48))
    for frame in frames:
        writer.write(frame)
    writer.release()


def test_kinds(tmp_path):
    assert source_kind("0") == "camera" and source_kind("12") == "camera"
    assert source_kind("rtsp://127.0.0.1:8554/cam") == "url"
    assert source_kind("http://127.0.0.1/x.mjpg") == "url"
    assert source_kind("/dev/null") == "device"  # a character device, as /dev/video0
    assert source_kind(str(tmp_path)) == "folder"
    assert source_kind(str(tmp_path / "clip.mp4")) == "video"
    (tmp_path / "0").mkdir()  # a folder named 0 is a folder, not camera 0
    assert source_kind(str(tmp_path / "0")) == "folder"


def test_camera_index_opens_the_camera(monkeypatch):
    opened = []

    def fake(target):
        opened.append(target)
        return FakeCapture(bgr_frames(3))

    monkeypatch.setattr(streams, "_open_capture", fake)
    source = open_source("0")
    assert opened == [0] and source.live and source.kind == "camera"
    assert source.count is None and source.fps == 30.0  # the camera said 0
    frames = list(source.frames)
    assert len(frames) == 3
    assert frames[1][0, 0].tolist() == [255, 0, 10]  # BGR -> RGB


def test_device_and_url_go_to_the_capture_as_typed(monkeypatch):
    opened = []
    monkeypatch.setattr(
        streams, "_open_capture", lambda t: opened.append(t) or FakeCapture(bgr_frames(1), 25)
    )
    url = "rtsp://user:pw@127.0.0.1:8554/cam?x=1"
    source = open_source(url)
    assert opened == [url] and source.live and source.fps == 25.0
    open_source("/dev/null")
    assert opened[-1] == "/dev/null"


def test_sources_that_do_not_open_say_what_they_are(monkeypatch):
    with pytest.raises(ValueError, match="cannot open device /dev/null as a video source"):
        open_source("/dev/null")
    monkeypatch.setattr(streams, "_open_capture", lambda t: FakeCapture([], opened=False))
    with pytest.raises(ValueError, match="cannot open camera 3"):
        open_source("3")
    with pytest.raises(ValueError, match=r"cannot open stream rtsp://127\.0\.0\.1:8554/cam "):
        open_source("rtsp://127.0.0.1:8554/cam")


def test_stream_over_loopback_http(tmp_path, served):
    write_avi(tmp_path / "clip.avi", bgr_frames(7))
    source = open_source(served("clip.avi"))
    assert source.kind == "url" and source.live
    assert len(list(source.frames)) == 7
    with pytest.raises(ValueError, match=r"cannot open stream http://127\.0\.0\.1:\d+/none\.avi"):
        open_source(served("none.avi"))


def test_folder_skips_bad_images_when_asked(tmp_path):
    for i, frame in enumerate(bgr_frames(4), start=1):
        cv2.imwrite(str(tmp_path / f"{i:04d}.png"), frame)
    (tmp_path / "0003.png").write_bytes(b"broken")
    frames = list(open_source(str(tmp_path), skip_bad=True).frames)
    assert isinstance(frames[2], BadFrame) and frames[2].index == 2
    assert "cannot decode image" in frames[2].reason
    assert all(isinstance(f, np.ndarray) for f in frames[:2] + frames[3:])
    with pytest.raises(ValueError, match="cannot decode image"):
        list(open_source(str(tmp_path)).frames)


def test_missing_and_wrong_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="source not found"):
        open_source(str(tmp_path / "nothing.mp4"))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="not a video file"):
        open_source(str(tmp_path / "notes.txt"))
