"""The one interface every tracker implements, ours and OpenCV's alike.

Conventions, used throughout ebmtrack:

- A frame is a ``numpy.ndarray`` of dtype uint8, shape (H, W, 3) in RGB order, or (H, W) for a
  grayscale frame. Trackers accept both and frames of any size.
- A box is ``(x, y, w, h)`` in pixels of that frame, floats, with (x, y) the top-left corner and
  0-based coordinates: the pixel (0, 0) covers [0, 1) x [0, 1). Its centre is
  (x + w / 2, y + h / 2).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

# The result types are NumPy-only and shared with the torch-free runtime (ebmtrack.lite): every
# public name of ebmtrack.lite.result (TrackResult, TrackStatus, validate_box, ...) is one here.
from ebmtrack.lite import result as _result
from ebmtrack.lite.result import *  # noqa: F403
from ebmtrack.lite.result import TrackResult

__all__ = [*_result.__all__, "Tracker"]


@runtime_checkable
class Tracker(Protocol):
    """A single-object tracker: initialize once per sequence, then track frame by frame."""

    name: str

    def initialize(self, frame: np.ndarray, box: np.ndarray) -> None:
        """Start a sequence on ``frame`` with the target at ``box`` (x, y, w, h)."""

    def track(self, frame: np.ndarray) -> TrackResult:
        """Locate the target in the next frame."""
