"""Frames and the target's box as every tracker takes them (NumPy): the frame as RGB, the first
box clipped to the frame, the target kept sane. One definition for the torch trackers
(:mod:`ebmtrack.tracking.search_region` and :mod:`ebmtrack.tracking.init_box` use it) and the
torch-free runtime."""

from __future__ import annotations

import logging

import numpy as np

from ebmtrack.lite.result import validate_box

__all__ = ["CENTER_OUTSIDE", "as_rgb", "clamp_target", "clip_init_box"]

logger = logging.getLogger("ebmtrack")

# The target centre may leave the frame by this fraction of its size (reference: inside_ratio 0.2).
CENTER_OUTSIDE = 0.3


def as_rgb(frame: np.ndarray) -> np.ndarray:
    """A uint8 (H, W, 3) view of a uint8 (H, W), (H, W, 1), (H, W, 3) or (H, W, 4) frame."""
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8:
        raise ValueError(
            f"frame must be a uint8 numpy array, "
            f"got {getattr(frame, 'dtype', type(frame).__name__)}"
        )
    if frame.ndim == 2:
        frame = frame[:, :, None]
    if frame.ndim != 3 or frame.shape[2] not in (1, 3, 4) or min(frame.shape[:2]) < 1:
        raise ValueError(f"frame must have shape (H, W), (H, W, 3) or (H, W, 4), got {frame.shape}")
    if frame.shape[2] == 1:
        return np.repeat(frame, 3, axis=2)
    return frame[:, :, :3]


def clamp_target(
    center: np.ndarray, size: np.ndarray, min_size: np.ndarray, frame_shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """The target's (centre, size) in frame px kept sane: the size between ``min_size`` and the
    frame's, the centre at most :data:`CENTER_OUTSIDE` sizes outside the frame."""
    height, width = frame_shape[:2]
    limit = np.array([width, height], dtype=np.float64)
    size = np.clip(size, min_size, np.maximum(limit, min_size))
    margin = CENTER_OUTSIDE * size
    return np.clip(center, -margin, limit + margin), size


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
