"""Where frames come from: a video file, a folder of images, a camera, a device or a stream URL.

:func:`open_source` turns the text a user typed into a :class:`FrameSource`, an iterator of uint8
RGB frames (grayscale images stay (H, W)) with what is known of it:

- a folder: its images sorted by name (or those of its ``img/`` folder);
- a video file: decoded by OpenCV's FFmpeg (the suffix must be a video container's);
- a camera index (``0``, ``1``, ...): ``cv2.VideoCapture(index)``;
- a device path (``/dev/video0``, any character device): ``cv2.VideoCapture(path)``;
- a URL (``rtsp://``, ``http://``, ``https://``, ... anything with ``://``): passed to
  ``cv2.VideoCapture`` as typed.

Cameras, devices and URLs are *live*: they have no known length and run until the stream ends
(or the caller stops reading).
"""

from __future__ import annotations

import logging
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ebmtrack.data.io import list_images, read_image

__all__ = ["VIDEO_SUFFIXES", "BadFrame", "FrameSource", "open_source", "source_kind"]

logger = logging.getLogger(__name__)

# Containers FFmpeg reads as video. Anything else that is not a folder is refused: FFmpeg also
# "plays" text files and single images, which is never what was meant.
VIDEO_SUFFIXES = (
    ".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm", ".mpg", ".mpeg", ".wmv", ".flv", ".ts",
    ".mts", ".m2ts", ".3gp", ".ogv", ".gif", ".y4m",
)  # fmt: skip

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_CAMERA = re.compile(r"^\d{1,3}$")


@dataclass(frozen=True)
class BadFrame:
    """A frame that could not be read, yielded in its place when the source skips bad frames:
    ``index`` (0-based) and ``reason`` (one line)."""

    index: int
    reason: str


@dataclass
class FrameSource:
    """Frames and what is known of them.

    Attributes:
        frames: iterator of uint8 RGB (H, W, 3) or grayscale (H, W) frames (and
            :class:`BadFrame` items when opened with ``skip_bad=True``).
        count: number of frames, None when unknown (live sources, some streams).
        fps: frames per second (30 when the source does not say).
        live: a camera, device or URL: no end known in advance.
        kind: ``folder``, ``video``, ``camera``, ``device`` or ``url``.
        name: the source as the user gave it.
    """

    frames: Iterator
    count: int | None
    fps: float
    live: bool
    kind: str
    name: str


def source_kind(text: str) -> str:
    """What ``text`` names: ``url`` (it has a scheme, ``rtsp://...``), ``camera`` (a small
    integer that is not an existing path), ``device`` (a character device), ``folder`` or
    ``video`` (anything else, checked when opened)."""
    if _URL.match(text):
        return "url"
    path = Path(text)
    if _CAMERA.match(text) and not path.exists():
        return "camera"
    try:
        mode = path.stat().st_mode
    except OSError:
        return "video"
    if stat.S_ISCHR(mode):
        return "device"
    return "folder" if stat.S_ISDIR(mode) else "video"


def _open_capture(target: int | str):
    """``cv2.VideoCapture(target)`` (a seam the tests replace with a fake capture)."""
    import cv2

    return cv2.VideoCapture(target)


def open_source(text: str, skip_bad: bool = False, open_capture: Callable | None = None):
    """The :class:`FrameSource` ``text`` names (see the module's docstring).

    ``skip_bad``: an image of a folder that cannot be decoded comes as a :class:`BadFrame`
    instead of raising (a video's decoder conceals damaged frames itself, or ends the stream).

    Raises:
        FileNotFoundError: a path that does not exist.
        ValueError: a file that is not a video container, a video, camera or stream that
            cannot be opened, a folder without images.
    """
    kind = source_kind(text)
    if kind == "folder":
        folder = Path(text)
        folder = folder / "img" if (folder / "img").is_dir() else folder
        paths = list_images(folder)
        return FrameSource(_read_images(paths, skip_bad), len(paths), 30.0, False, kind, text)
    if kind == "video":
        path = Path(text)
        if not path.exists():
            raise FileNotFoundError(f"source not found: {text}")
        if path.suffix.lower() not in VIDEO_SUFFIXES:
            raise ValueError(
                f"source {text}: not a video file ({', '.join(VIDEO_SUFFIXES[:6])}, ...), a "
                "folder of images, a camera index (0), a device (/dev/video0) nor a URL"
            )
    opener = open_capture or _open_capture
    capture = opener(int(text) if kind == "camera" else text)
    if not capture.isOpened():
        capture.release()
        raise ValueError(_cannot_open(kind, text))
    return _capture_source(capture, kind, text)


def _cannot_open(kind: str, text: str) -> str:
    if kind == "camera":
        return f"cannot open camera {text} (no such camera, in use, or no permission)"
    if kind == "device":
        return f"cannot open device {text} as a video source"
    if kind == "url":
        return f"cannot open stream {text} (unreachable, or a format FFmpeg does not read)"
    return f"cannot open video: {text}"


def _read_images(paths: list[Path], skip_bad: bool) -> Iterator:
    """The images of ``paths``; one that cannot be decoded, is cut short (a JPEG without its
    end) or is not of the first image's size is a bad frame: named (its number, from 1, and
    path) in a ValueError, or yielded as a :class:`BadFrame` with ``skip_bad``."""
    size = None
    for index, path in enumerate(paths):
        try:
            image = read_image(path, keep_gray=True, whole=True)
            if size is None:
                size = image.shape[:2]
            elif image.shape[:2] != size:
                raise ValueError(
                    f"{path} is {image.shape[1]}x{image.shape[0]}, the first frame "
                    f"{size[1]}x{size[0]}: every frame of a source must have one size"
                )
        except (OSError, ValueError) as err:
            reason = f"frame {index + 1}: {err}"
            if not skip_bad:
                raise ValueError(reason) from None
            yield BadFrame(index, reason)
            continue
        yield image


def _capture_source(capture, kind: str, text: str) -> FrameSource:
    import cv2

    count = None if kind != "video" else int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) or None
    fps = capture.get(cv2.CAP_PROP_FPS)
    fps = float(fps) if fps and np.isfinite(fps) and 0 < fps < 1000 else 30.0

    def read() -> Iterator:
        got = 0
        try:
            while True:
                ok, frame = capture.read()
                if not ok or frame is None:
                    break
                got += 1
                if frame.ndim == 3 and frame.shape[2] == 4:
                    frame = frame[:, :, :3]
                yield frame if frame.ndim == 2 else cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
        finally:
            capture.release()
        if count is not None and got < count:
            logger.warning(
                "read %d of the %d frames %s announces: the file is truncated or damaged",
                got,
                count,
                text,
            )

    return FrameSource(read(), count, fps, kind != "video", kind, text)
