"""What a tracker returns, and the box rule every tracker applies: the result types of the
torch trackers (:mod:`ebmtrack.tracking.base` names them there) and of the torch-free runtime
(:mod:`ebmtrack.lite`), one definition for both. NumPy only.

A box is ``(x, y, w, h)`` in pixels of its frame, floats, with (x, y) the top-left corner and
0-based coordinates: the pixel (0, 0) covers [0, 1) x [0, 1).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "LOST_BELOW",
    "TRACKED_FROM",
    "TargetPresence",
    "TrackResult",
    "TrackStatus",
    "check_frame_size",
    "target_presence",
    "validate_box",
]


class TrackStatus(str, enum.Enum):
    """How confident the tracker is about the frame's box."""

    NORMAL = "normal"
    UNCERTAIN = "uncertain"
    HARD_NEGATIVE = "hard_negative"
    NOT_FOUND = "not_found"
    # A long-term tracker has lost the target and searches for it (ebmtrack.lite.longterm): the
    # box is the last one it tracked, not the target's.
    LOST = "lost"


class TargetPresence(str, enum.Enum):
    """Whether the target is where the box says, from :attr:`TrackResult.confidence`: ``tracked``
    when the confidence is at least :data:`TRACKED_FROM`, ``lost`` below :data:`LOST_BELOW`
    (more likely wrong than right), ``uncertain`` between; ``unknown`` without a confidence."""

    TRACKED = "tracked"
    UNCERTAIN = "uncertain"
    LOST = "lost"
    UNKNOWN = "unknown"


TRACKED_FROM = 0.8
"""A box at least this likely to overlap the target with IoU > 0.5 is ``tracked``."""
LOST_BELOW = 0.5
"""A box less likely than this to overlap the target with IoU > 0.5 is ``lost``."""


def check_frame_size(first: tuple[int, ...], frame: np.ndarray) -> None:
    """ValueError when ``frame`` is not of the size (height, width) ``first`` of the frame the
    tracker was initialised on: a tracker follows one frame size (its boxes, crops and search
    regions are in that frame's pixels); a new size needs ``initialize`` again."""
    size = tuple(np.shape(frame)[:2])
    if first and size != tuple(first[:2]):
        raise ValueError(
            f"frame of {size[1]}x{size[0]} after a first frame of {first[1]}x{first[0]}: a "
            "tracker follows frames of one size; call initialize(frame, box) on a frame of the "
            "new size to start again"
        )


def target_presence(confidence: float) -> TargetPresence:
    """The :class:`TargetPresence` of a confidence (NaN: ``unknown``)."""
    if not math.isfinite(confidence):
        return TargetPresence.UNKNOWN
    if confidence >= TRACKED_FROM:
        return TargetPresence.TRACKED
    return TargetPresence.LOST if confidence < LOST_BELOW else TargetPresence.UNCERTAIN


@dataclass(frozen=True)
class TrackResult:
    """The output of :meth:`Tracker.track` for one frame.

    Attributes:
        box: (x, y, w, h) in pixels, shape (4,), float64.
        score: the tracker's own score (for ATOM the classifier's max score; its scale differs
            from tracker to tracker and from sequence to sequence); NaN if it has none.
        status: see :class:`TrackStatus` (the tracker's localisation verdict, which also steers
            its updates).
        confidence: the probability that ``box`` overlaps the target with IoU > 0.5, from a
            calibrator fitted on training data over the tracker's per-frame features
            (:mod:`ebmtrack.tracking.confidence`); NaN where the tracker has no calibrator.
    """

    box: np.ndarray
    score: float = float("nan")
    status: TrackStatus = TrackStatus.NORMAL
    confidence: float = float("nan")

    @property
    def target(self) -> TargetPresence:
        """``tracked`` / ``uncertain`` / ``lost`` from :attr:`confidence` (see
        :class:`TargetPresence`)."""
        return target_presence(self.confidence)


def validate_box(box, frame_shape: tuple[int, ...] | None = None, name: str = "box") -> np.ndarray:
    """Return ``box`` as a float64 array (4,), or raise ValueError saying what is wrong.

    A valid box has four finite numbers, positive width and height, and when ``frame_shape`` is
    given it overlaps the frame.
    """
    arr = np.asarray(box, dtype=np.float64).reshape(-1)
    if arr.shape != (4,):
        raise ValueError(f"{name} must have 4 numbers x,y,w,h, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {arr.tolist()}")
    if arr[2] <= 0 or arr[3] <= 0:
        raise ValueError(
            f"{name} must have positive width and height, got w={arr[2]:g} h={arr[3]:g}"
        )
    if frame_shape is not None:
        height, width = frame_shape[:2]
        if arr[0] >= width or arr[1] >= height or arr[0] + arr[2] <= 0 or arr[1] + arr[3] <= 0:
            raise ValueError(
                f"{name} {arr.tolist()} lies outside the first frame of size {width}x{height}"
            )
    return arr
