"""Drawing tracking results on frames and writing them as a video (MP4, H.264 where OpenCV can
encode it) or a small GIF.

Frames follow the ebmtrack convention: uint8 RGB (H, W, 3) or grayscale (H, W); boxes are
(x, y, w, h) floats with the top-left corner at (x, y) and pixel (0, 0) covering [0, 1) x [0, 1).
A box is drawn on the pixels it covers at its border, so its outline lies on the box edge and
never inside the box by more than the line width.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

# RGB colours of the predicted box for each TrackStatus value, and of the ground truth.
STATUS_COLOURS: dict[str, tuple[int, int, int]] = {
    "normal": (40, 220, 40),
    "uncertain": (255, 170, 0),
    "hard_negative": (255, 90, 0),
    "not_found": (230, 30, 30),
    "lost": (160, 160, 160),
}
GROUND_TRUTH_COLOUR: tuple[int, int, int] = (255, 255, 255)


def box_corners(box, frame_shape: tuple[int, ...]) -> tuple[int, int, int, int] | None:
    """Inclusive pixel corners (x0, y0, x1, y1) of the pixels a box covers, clipped to the frame.

    ``box`` (4,) is (x, y, w, h). Returns None when the box is not finite or misses the frame.
    """
    x, y, w, h = (float(v) for v in np.asarray(box, dtype=np.float64).reshape(4))
    if not all(math.isfinite(v) for v in (x, y, w, h)) or w <= 0 or h <= 0:
        return None
    height, width = frame_shape[:2]
    x0, y0 = max(round(x), 0), max(round(y), 0)
    x1, y1 = min(round(x + w) - 1, width - 1), min(round(y + h) - 1, height - 1)
    if x1 < x0 or y1 < y0:
        return None
    return x0, y0, x1, y1


def _draw_rectangle(image: np.ndarray, box, colour, thickness: int) -> None:
    corners = box_corners(box, image.shape)
    if corners is None:
        return
    x0, y0, x1, y1 = corners
    # Lines of `thickness` pixels growing inwards from the border pixels: the outline stays on
    # the box edge instead of being centred on it (cv2.rectangle's convention).
    t = max(1, min(thickness, (x1 - x0) // 2 + 1, (y1 - y0) // 2 + 1))
    image[y0 : y0 + t, x0 : x1 + 1] = colour
    image[y1 - t + 1 : y1 + 1, x0 : x1 + 1] = colour
    image[y0 : y1 + 1, x0 : x0 + t] = colour
    image[y0 : y1 + 1, x1 - t + 1 : x1 + 1] = colour


def _put_label(image: np.ndarray, text: str, origin: tuple[int, int], colour) -> None:
    """Text with a dark background box so it reads on any frame; origin is its top-left."""
    font, scale, weight = cv2.FONT_HERSHEY_SIMPLEX, 0.45, 1
    (tw, th), baseline = cv2.getTextSize(text, font, scale, weight)
    height, width = image.shape[:2]
    x = int(min(max(origin[0], 0), max(width - tw - 4, 0)))
    y = int(min(max(origin[1], 0), max(height - th - baseline - 4, 0)))
    cv2.rectangle(image, (x, y), (x + tw + 4, y + th + baseline + 4), (0, 0, 0), cv2.FILLED)
    cv2.putText(image, text, (x + 2, y + th + 2), font, scale, colour, weight, cv2.LINE_AA)


def draw_track(
    frame: np.ndarray,
    box,
    score: float = float("nan"),
    status: str = "normal",
    ground_truth=None,
    caption: str = "",
    thickness: int = 2,
    label: str = "",
) -> np.ndarray:
    """A copy of ``frame`` as RGB (H, W, 3) uint8 with the tracker's output drawn on it.

    Args:
        frame: uint8 RGB (H, W, 3) or grayscale (H, W).
        box: the predicted (x, y, w, h), drawn in the colour of ``status``
            (:data:`STATUS_COLOURS`); nothing is drawn for a NaN box.
        score: the tracker's confidence, shown above the box unless NaN.
        status: a :class:`~ebmtrack.tracking.base.TrackStatus` value.
        ground_truth: an optional (x, y, w, h) drawn 1 px wide in white, under the prediction.
        caption: text in the top-left corner (e.g. the frame number).
        thickness: outline width of the prediction in pixels, drawn inside the box's border.
        label: what the box is (a tracker's name, a target's number), shown before its score.

    Raises:
        ValueError: unknown ``status`` or a frame that is not uint8 (H, W) / (H, W, 3).
    """
    if status not in STATUS_COLOURS:
        raise ValueError(f"status must be one of {', '.join(STATUS_COLOURS)}, got {status!r}")
    frame = np.asarray(frame)
    if frame.dtype != np.uint8 or not (
        frame.ndim == 2 or (frame.ndim == 3 and frame.shape[2] == 3)
    ):
        raise ValueError(
            f"frame must be uint8 (H, W) or (H, W, 3), got {frame.dtype} {frame.shape}"
        )
    image = np.repeat(frame[:, :, None], 3, axis=2) if frame.ndim == 2 else frame.copy()
    if ground_truth is not None:
        _draw_rectangle(image, ground_truth, GROUND_TRUTH_COLOUR, 1)
    colour = STATUS_COLOURS[status]
    _draw_rectangle(image, box, colour, thickness)
    corners = box_corners(box, image.shape)
    if corners is not None:
        text = status if math.isnan(score) else f"{score:.2f} {status}"
        _put_label(image, f"{label} {text}".strip(), (corners[0], corners[1] - 20), colour)
    if caption:
        _put_label(image, caption, (0, 0), (255, 255, 255))
    return image


# Codecs tried in order by the video's suffix: H.264 (avc1) plays in browsers, but OpenCV's
# PyPI wheels carry no H.264 encoder; MPEG-4 Part 2 (mp4v) plays in VLC and ffmpeg, not browsers.
VIDEO_CODECS: dict[str, tuple[str, ...]] = {
    ".mp4": ("avc1", "mp4v"),
    ".m4v": ("avc1", "mp4v"),
    ".mov": ("avc1", "mp4v"),
    ".mkv": ("avc1", "mp4v"),
    ".avi": ("MJPG",),
    ".webm": ("VP80", "VP90"),
}
BROWSER_CODECS = ("avc1", "VP80", "VP90")


@contextlib.contextmanager
def _native_stderr_silenced():
    """File descriptor 2 sent to /dev/null for the block: OpenCV's FFmpeg backend prints some
    complaints with C's stdio, past its log level (e.g. WebM's "tag ... is not supported")."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _open_video_writer(path: Path, codec: str, fps: float, size: tuple[int, int]):
    """A cv2.VideoWriter with ``codec``, or None when this OpenCV cannot encode it (OpenCV's
    and FFmpeg's complaints silenced: a missing codec is an answer here, not an error)."""
    logging = getattr(getattr(cv2, "utils", None), "logging", None)
    level = logging.getLogLevel() if logging is not None else None
    if logging is not None:
        logging.setLogLevel(logging.LOG_LEVEL_SILENT)
    try:
        with _native_stderr_silenced():
            fourcc = cv2.VideoWriter_fourcc(*codec)
            writer = cv2.VideoWriter(str(path), fourcc, float(fps), size)
    finally:
        if logging is not None:
            logging.setLogLevel(level)
    if writer.isOpened():
        return writer
    writer.release()
    return None


class VideoWriter:
    """Writes RGB frames to a video file with OpenCV, all at the first frame's size.

    The codec is the first of :data:`VIDEO_CODECS` for the file's suffix that this OpenCV build
    can encode (``.mp4``: H.264 where it can, else mp4v); ``codec`` says which one, and ``note``
    is a one-line warning when browsers will not play the file (None otherwise). Use as a
    context manager, or call :meth:`close`. Frames of another size are resized.
    """

    def __init__(
        self,
        path: str | Path,
        fps: float,
        size: tuple[int, int],
        codecs: tuple[str, ...] | None = None,
    ) -> None:
        """``size`` is (width, height). Raises ValueError when no codec can write the file."""
        self.path = Path(path)
        self.size = (int(size[0]), int(size[1]))
        self.frames = 0
        codecs = codecs or VIDEO_CODECS.get(self.path.suffix.lower(), ("mp4v",))
        for codec in codecs:
            writer = _open_video_writer(self.path, codec, fps, self.size)
            if writer is not None:
                self._writer, self.codec = writer, codec
                break
        else:
            raise ValueError(f"cannot write a {'/'.join(codecs)} video to {self.path}")
        self.note = None
        if self.path.suffix.lower() in (".mp4", ".m4v", ".mov") and codec not in BROWSER_CODECS:
            self.note = (
                f"no H.264 encoder in this OpenCV build: {codec}, which VLC and ffmpeg play "
                "and browsers do not; a .gif or .webm plays in browsers"
            )

    def write(self, image: np.ndarray) -> None:
        """Append one uint8 RGB (H, W, 3) frame."""
        bgr = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2BGR)
        if (bgr.shape[1], bgr.shape[0]) != self.size:
            bgr = cv2.resize(bgr, self.size, interpolation=cv2.INTER_AREA)
        self._writer.write(bgr)
        self.frames += 1

    def close(self) -> None:
        self._writer.release()

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


Mp4Writer = VideoWriter  # the name the demo uses


@dataclass(frozen=True)
class GifBudget:
    """What a GIF may use, so that it stays small enough for a README.

    Attributes:
        max_side: frames are shrunk so that their longer side is at most this many pixels.
        colours: palette size of each frame (at most 256).
        max_frames: at most this many frames are kept, evenly strided; the frame delay grows
            by the stride so the GIF plays at the video's speed.
    """

    max_side: int = 240
    colours: int = 48
    max_frames: int = 60

    def __post_init__(self) -> None:
        if self.max_side < 16:
            raise ValueError(f"max_side must be >= 16, got {self.max_side}")
        if not 2 <= self.colours <= 256:
            raise ValueError(f"colours must be in [2, 256], got {self.colours}")
        if self.max_frames < 1:
            raise ValueError(f"max_frames must be >= 1, got {self.max_frames}")

    def stride(self, total_frames: int) -> int:
        """Keep every stride-th frame of ``total_frames`` so that at most max_frames remain."""
        return max(1, math.ceil(total_frames / self.max_frames))


class GifWriter:
    """Collects RGB frames, shrunk and quantised to a :class:`GifBudget`, and saves a GIF.

    ``total_frames`` (the number of frames that will be offered) fixes the stride: frames
    0, stride, 2 * stride, ... are kept. Only the kept, already shrunk palette images stay in
    memory. Call :meth:`close` (or use as a context manager) to write the file.
    """

    def __init__(
        self,
        path: str | Path,
        fps: float,
        total_frames: int,
        budget: GifBudget | None = None,
    ) -> None:
        if fps <= 0:
            raise ValueError(f"fps must be positive, got {fps}")
        self.path = Path(path)
        self.budget = budget or GifBudget()
        self.stride = self.budget.stride(total_frames)
        self.delay_ms = round(1000.0 * self.stride / fps)
        self._offered = 0
        self._frames: list[Image.Image] = []

    def write(self, image: np.ndarray) -> None:
        """Offer one uint8 RGB (H, W, 3) frame; it is kept if it falls on the stride."""
        index, self._offered = self._offered, self._offered + 1
        if index % self.stride or len(self._frames) >= self.budget.max_frames:
            return
        height, width = image.shape[:2]
        scale = min(1.0, self.budget.max_side / max(height, width))
        if scale < 1.0:
            size = (max(1, round(width * scale)), max(1, round(height * scale)))
            image = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
        # No dithering: dithered noise compresses badly under GIF's LZW.
        self._frames.append(
            Image.fromarray(np.ascontiguousarray(image)).quantize(
                colors=self.budget.colours,
                method=Image.Quantize.MEDIANCUT,
                dither=Image.Dither.NONE,
            )
        )

    def close(self) -> None:
        """Write the GIF (looping forever); ValueError if no frame was kept."""
        if not self._frames:
            raise ValueError(f"no frames to write to {self.path}")
        first, rest = self._frames[0], self._frames[1:]
        first.save(
            self.path,
            save_all=True,
            append_images=rest,
            duration=self.delay_ms,
            loop=0,
            optimize=True,
        )

    def __enter__(self) -> GifWriter:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
