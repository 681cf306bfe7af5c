"""The one rule for the box a tracker starts from, applied by every tracker, ours and OpenCV's.

A box that overlaps the first frame but crosses its edge (a legal start: the target enters the
view) is clipped to the frame, with one warning. A box that does not overlap the frame, or that
is not four finite numbers with positive width and height, is refused with a ValueError.
"""

from __future__ import annotations

import logging

import numpy as np

from ebmtrack.tracking.base import validate_box

__all__ = ["clip_init_box"]

logger = logging.getLogger("ebmtrack")


def _text(box: np.ndarray) -> str:
    return ",".join(f"{v:g}" for v in box)


def clip_init_box(box, frame_shape: tuple[int, ...], name: str = "init box") -> np.ndarray:
    """``box`` (x, y, w, h) clipped to a frame of shape ``frame_shape`` (H, W[, C]).

    Returns a float64 array (4,). Logs one warning, naming ``name``, when the box was clipped;
    a box inside the frame comes back unchanged and silently, so applying the rule twice warns
    once.

    Raises:
        ValueError: the box is malformed or does not overlap the frame.
    """
    box = validate_box(box, frame_shape, name)
    height, width = frame_shape[:2]
    if box[0] >= 0 and box[1] >= 0 and box[0] + box[2] <= width and box[1] + box[3] <= height:
        return box  # inside: unchanged (x + w - x need not equal w in floating point)
    x0, y0 = max(box[0], 0.0), max(box[1], 0.0)
    x1, y1 = min(box[0] + box[2], float(width)), min(box[1] + box[3], float(height))
    clipped = np.array([x0, y0, x1 - x0, y1 - y0])
    logger.warning(
        "%s %s crosses the edge of the %dx%d frame: clipped to %s",
        name,
        _text(box),
        width,
        height,
        _text(clipped),
    )
    return clipped
