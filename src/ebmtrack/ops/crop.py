"""Square image crops around a target: the search regions of tracking and training.

Coordinates are continuous pixels with (0, 0) the top-left corner of the top-left pixel (the box
convention of :mod:`ebmtrack.tracking.base`). A crop of side ``side`` centred on ``center`` maps the
image square ``[cx - side/2, cx + side/2] x [cy - side/2, cy + side/2]`` onto the output square
``[0, output_size]^2``; areas outside the image repeat the border pixels (replicate padding).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np


def crop_matrix(
    center: tuple[float, float],
    side: float,
    output_size: int,
    angle_deg: float = 0.0,
    flip: bool = False,
) -> np.ndarray:
    """The affine map (2, 3) from continuous image coordinates to continuous crop coordinates.

    The crop is rotated by ``angle_deg`` (counter-clockwise as seen in the image) and mirrored
    left-right when ``flip`` is set, both about its centre.
    """
    if not side > 0:
        raise ValueError(f"side must be positive, got {side}")
    scale = output_size / side
    angle = math.radians(angle_deg)
    cos, sin = math.cos(angle) * scale, math.sin(angle) * scale
    linear = np.array([[cos, sin], [-sin, cos]])
    if flip:
        linear = np.array([[-1.0, 0.0], [0.0, 1.0]]) @ linear
    half = output_size / 2.0
    offset = np.array([half, half]) - linear @ np.asarray(center, dtype=np.float64)
    return np.concatenate([linear, offset[:, None]], axis=1)


def apply_matrix(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Apply an affine (2, 3) map to points (..., 2)."""
    points = np.asarray(points, dtype=np.float64)
    return points @ matrix[:, :2].T + matrix[:, 2]


def crop_square(
    image: np.ndarray,
    center: tuple[float, float],
    side: float,
    output_size: int,
    angle_deg: float = 0.0,
    flip: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Cut a square of side ``side`` centred on ``center`` and resize it to ``output_size``.

    Args:
        image: uint8 (H, W, 3) or (H, W).
        center: (cx, cy) in image pixels.
        side: side of the square in image pixels (> 0).
        output_size: side of the output in pixels.
        angle_deg, flip: see :func:`crop_matrix`.

    Returns:
        ``(patch, matrix)``: patch (output_size, output_size[, 3]) of the image's dtype, and the
        (2, 3) map from image to crop coordinates (use :func:`apply_matrix` to move points).

    When the crop shrinks the image by 2x or more, the covered region is first reduced with area
    averaging, so that small output sizes do not alias.
    """
    if image.ndim not in (2, 3) or image.size == 0:
        raise ValueError(f"image must be a non-empty (H, W) or (H, W, C) array, got {image.shape}")
    if not (np.all(np.isfinite(center)) and math.isfinite(side)):
        raise ValueError(f"center and side must be finite, got {center}, {side}")
    matrix = crop_matrix(center, side, output_size, angle_deg, flip)
    height, width = image.shape[:2]
    # The image region the crop can touch (its rotated square fits in a circle of this radius).
    radius = side / 2.0 * (math.sqrt(2.0) if angle_deg % 90 else 1.0) + 2.0
    x0 = int(np.clip(math.floor(center[0] - radius), 0, width - 1))
    y0 = int(np.clip(math.floor(center[1] - radius), 0, height - 1))
    x1 = int(np.clip(math.ceil(center[0] + radius), x0 + 1, width))
    y1 = int(np.clip(math.ceil(center[1] + radius), y0 + 1, height))
    region = image[y0:y1, x0:x1]
    factor = side / output_size
    # Region pixel p covers region coordinates [p, p + 1); shrink by `reduction` when aliasing.
    reduction = max(int(factor), 1) if factor >= 2.0 else 1
    if reduction > 1:
        new_w = max(round(region.shape[1] / reduction), 1)
        new_h = max(round(region.shape[0] / reduction), 1)
        sx, sy = region.shape[1] / new_w, region.shape[0] / new_h
        region = cv2.resize(region, (new_w, new_h), interpolation=cv2.INTER_AREA)
    else:
        sx = sy = 1.0
    # Continuous image coords -> continuous region coords: (x - x0) / sx, (y - y0) / sy.
    to_region = np.array([[1.0 / sx, 0.0, -x0 / sx], [0.0, 1.0 / sy, -y0 / sy], [0.0, 0.0, 1.0]])
    region_to_crop = matrix @ np.linalg.inv(to_region)
    # OpenCV puts pixel centres at integer coordinates: shift by half a pixel on both sides.
    shift_in = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])
    shift_out = np.array([[1.0, 0.0, -0.5], [0.0, 1.0, -0.5]])
    cv_matrix = shift_out @ np.vstack([region_to_crop, [0.0, 0.0, 1.0]]) @ shift_in
    patch = cv2.warpAffine(
        np.ascontiguousarray(region),
        cv_matrix,
        (output_size, output_size),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_REPLICATE,
    )
    return patch, matrix


def search_region_side(size: Sequence[float], search_area_scale: float) -> float:
    """Side in pixels of the square search region around a target of ``size`` (w, h):
    ``search_area_scale * sqrt(w h)``, not rounded. The trackers and training crop with it."""
    return search_area_scale * math.sqrt(float(size[0]) * float(size[1]))


def crop_search_region(
    image: np.ndarray, box_xywh: Sequence[float], search_area_scale: float, output_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """The square search region around ``box_xywh`` (:func:`search_region_side`, centred on the
    box), resized to ``output_size``; returns ``(patch, matrix)`` as :func:`crop_square`."""
    x, y, w, h = (float(v) for v in box_xywh)
    side = search_region_side((w, h), search_area_scale)
    return crop_square(image, (x + w / 2, y + h / 2), side, output_size)


def box_to_crop(box_xywh: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Map axis-aligned boxes (..., 4) xywh from image to crop coordinates (no rotation/flip)."""
    box = np.asarray(box_xywh, dtype=np.float64)
    scale = np.hypot(matrix[0, 0], matrix[1, 0])
    top_left = apply_matrix(matrix, box[..., :2])
    return np.concatenate([top_left, box[..., 2:] * scale], axis=-1)


def box_from_crop(box_xywh: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Inverse of :func:`box_to_crop` for a crop without rotation or flip."""
    box = np.asarray(box_xywh, dtype=np.float64)
    scale = np.hypot(matrix[0, 0], matrix[1, 0])
    inverse = cv2.invertAffineTransform(matrix)
    top_left = apply_matrix(inverse, box[..., :2])
    return np.concatenate([top_left, box[..., 2:] / scale], axis=-1)
