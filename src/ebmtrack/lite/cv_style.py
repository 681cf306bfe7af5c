"""The torch-free tracker behind OpenCV's tracker interface, as :mod:`ebmtrack.tracking.cv_style`
gives it for the torch trackers:

>>> tracker = ebmtrack.lite.OpenCVStyleTracker.create("atom-export")   # an export folder
>>> tracker.init(frame, (x, y, w, h))               # frame: BGR, as cv2 reads it
>>> ok, (x, y, w, h) = tracker.update(frame)        # ints; ok False when the target is lost
>>> tracker.getTrackingScore()

Frames are **BGR** unless created with ``color="rgb"``; grayscale (H, W) frames need no order.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ebmtrack.lite.result import TrackResult, TrackStatus

__all__ = ["COLORS", "OpenCVStyleTracker"]

COLORS = ("bgr", "rgb")


class OpenCVStyleTracker:
    """A tracker with OpenCV's ``init`` / ``update`` / ``getTrackingScore`` methods.

    Args:
        tracker: a :class:`~ebmtrack.lite.tracker.LiteTracker` (RGB frames).
        color: the channel order of the frames given to :meth:`init` and :meth:`update`.

    Attributes:
        result: the last update's :class:`~ebmtrack.lite.result.TrackResult`, None before.
    """

    def __init__(self, tracker, color: str = "bgr") -> None:
        if color not in COLORS:
            raise ValueError(f"color must be one of {', '.join(COLORS)}, got {color!r}")
        self.tracker, self.color = tracker, color
        self.result: TrackResult | None = None
        self._started = False

    @classmethod
    def create(cls, folder: str | Path, color: str = "bgr", **options) -> OpenCVStyleTracker:
        """The tracker of an export folder (``options`` as :func:`ebmtrack.lite.load`'s)."""
        from ebmtrack.lite.tracker import load

        if color not in COLORS:  # before the files load
            raise ValueError(f"color must be one of {', '.join(COLORS)}, got {color!r}")
        return cls(load(folder, **options), color=color)

    def _rgb(self, image: np.ndarray) -> np.ndarray:
        image = np.asarray(image)
        if self.color == "rgb" or image.ndim != 3 or image.shape[2] == 1:
            return image
        return np.ascontiguousarray(image[:, :, 2::-1])

    def init(self, image: np.ndarray, boundingBox) -> None:  # noqa: N803 (OpenCV's name)
        """Start on ``image`` with the target at ``boundingBox`` (x, y, w, h)."""
        self.tracker.initialize(self._rgb(image), np.asarray(boundingBox, dtype=np.float64))
        self.result, self._started = None, True

    def update(self, image: np.ndarray) -> tuple[bool, tuple[int, int, int, int]]:
        """``(ok, (x, y, w, h))``: the box rounded to whole pixels; ``ok`` False when the
        tracker reports the target not found. ValueError before :meth:`init`."""
        if not self._started:
            raise ValueError("update(image) called before init(image, boundingBox)")
        self.result = self.tracker.track(self._rgb(image))
        box = tuple(int(round(float(v))) for v in self.result.box)
        return self.result.status not in (TrackStatus.NOT_FOUND, TrackStatus.LOST), box

    def getTrackingScore(self) -> float:  # noqa: N802 (OpenCV's name)
        """The last update's score (NaN before the first update)."""
        return math.nan if self.result is None else float(self.result.score)
