"""Square image crops around a target: the search regions of tracking and training (NumPy, and
OpenCV where installed: :mod:`ebmtrack.lite.imageops`; the torch-free runtime crops with it too;
:mod:`ebmtrack.ops.crop` is its name on the torch side).

Coordinates are continuous pixels with (0, 0) the top-left corner of the top-left pixel (the box
convention of :mod:`ebmtrack.tracking.base`). A crop of side ``side`` centred on ``center`` maps the
image square ``[cx - side/2, cx + side/2] x [cy - side/2, cy + side/2]`` onto the output square
``[0, output_size]^2``; areas outside the image repeat the border pixels (replicate padding).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ebmtrack.lite.imageops import (
    gaussian_blur,
    invert_affine_transform,
    pad_replicate,
    resize_area,
    warp_affine,
)

__all__ = [
    "CropSpec",
    "apply_matrix",
    "box_from_crop",
    "box_to_crop",
    "crop_matrix",
    "crop_search_region",
    "crop_square",
    "crop_squares",
    "halve",
    "invert_affine",
    "pyramid_level",
    "residual_sigma",
    "search_region_side",
]


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


def invert_affine(matrix: np.ndarray) -> np.ndarray:
    """Inverse of an affine (2, 3) map (crop -> frame from frame -> crop)."""
    linear_inv = np.linalg.inv(matrix[:, :2])
    return np.concatenate([linear_inv, -(linear_inv @ matrix[:, 2])[:, None]], axis=1)


def _check_image(image: np.ndarray) -> None:
    if image.ndim not in (2, 3) or image.size == 0:
        raise ValueError(f"image must be a non-empty (H, W) or (H, W, C) array, got {image.shape}")


def _check_crop(center: tuple[float, float], side: float) -> None:
    if not (np.all(np.isfinite(center)) and math.isfinite(side)):
        raise ValueError(f"center and side must be finite, got {center}, {side}")


def _touched_region(
    shape: tuple[int, ...],
    center: tuple[float, float],
    side: float,
    angle_deg: float,
    margin: float,
) -> tuple[int, int, int, int]:
    """The pixels ``(x0, y0, x1, y1)`` (end exclusive, inside an image of ``shape``, at least one)
    that a crop can touch, ``margin`` px around its (rotated) square."""
    height, width = shape[:2]
    # A rotated square fits in the circle of this radius.
    radius = side / 2.0 * (math.sqrt(2.0) if angle_deg % 90 else 1.0) + margin
    x0 = int(np.clip(math.floor(center[0] - radius), 0, width - 1))
    y0 = int(np.clip(math.floor(center[1] - radius), 0, height - 1))
    x1 = int(np.clip(math.ceil(center[0] + radius), x0 + 1, width))
    y1 = int(np.clip(math.ceil(center[1] + radius), y0 + 1, height))
    return x0, y0, x1, y1


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
    averaging, so that small output sizes do not alias. That reduction costs in proportion to the
    region (the frame's pixels, not the output's): several crops of one frame share it in
    :func:`crop_squares`, which the trackers use.
    """
    _check_image(image)
    _check_crop(center, side)
    matrix = crop_matrix(center, side, output_size, angle_deg, flip)
    x0, y0, x1, y1 = _touched_region(image.shape, center, side, angle_deg, 2.0)
    region = image[y0:y1, x0:x1]
    factor = side / output_size
    # Region pixel p covers region coordinates [p, p + 1); shrink by `reduction` when aliasing.
    reduction = max(int(factor), 1) if factor >= 2.0 else 1
    if reduction > 1:
        new_w = max(round(region.shape[1] / reduction), 1)
        new_h = max(round(region.shape[0] / reduction), 1)
        sx, sy = region.shape[1] / new_w, region.shape[0] / new_h
        region = resize_area(region, (new_w, new_h))
    else:
        sx = sy = 1.0
    return _warp(region, (x0, y0), (sx, sy), matrix, output_size), matrix


def _warp(
    region: np.ndarray,
    origin: tuple[int, int],
    pixel: tuple[float, float],
    matrix: np.ndarray,
    output_size: int,
) -> np.ndarray:
    """The crop of ``matrix`` (2, 3) sampled bilinearly from ``region`` (h, w[, C]), whose pixel
    (i, j) covers frame pixels ``[x0 + j sx, x0 + (j + 1) sx) x [y0 + i sy, ...)`` with
    ``origin`` (x0, y0) and ``pixel`` (sx, sy); outside the region its border repeats.
    Returns (output_size, output_size[, C])."""
    (x0, y0), (sx, sy) = origin, pixel
    # Continuous image coords -> continuous region coords: (x - x0) / sx, (y - y0) / sy.
    to_region = np.array([[1.0 / sx, 0.0, -x0 / sx], [0.0, 1.0 / sy, -y0 / sy], [0.0, 0.0, 1.0]])
    region_to_crop = matrix @ np.linalg.inv(to_region)
    # OpenCV puts pixel centres at integer coordinates: shift by half a pixel on both sides.
    shift_in = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])
    shift_out = np.array([[1.0, 0.0, -0.5], [0.0, 1.0, -0.5]])
    cv_matrix = shift_out @ np.vstack([region_to_crop, [0.0, 0.0, 1.0]]) @ shift_in
    return warp_affine(region, cv_matrix, (output_size, output_size))


@dataclass(frozen=True)
class CropSpec:
    """One square crop of a frame, as :func:`crop_square` takes it: ``center`` (cx, cy) and
    ``side`` in frame pixels, rotated by ``angle_deg`` and mirrored by ``flip`` about its centre
    (:func:`crop_matrix`)."""

    center: tuple[float, float]
    side: float
    angle_deg: float = 0.0
    flip: bool = False


def pyramid_level(side: float, output_size: int) -> int:
    """The level ``k`` of a 2x pyramid that a crop of ``side`` frame px into ``output_size`` px
    samples: the largest ``k`` with ``2**k <= side / output_size``, 0 when the crop shrinks by
    less than 2. The bilinear warp from level ``k`` then shrinks by less than 2."""
    factor = side / output_size
    return max(int(math.floor(math.log2(factor))), 1) if factor >= 2.0 else 0


def halve(image: np.ndarray) -> np.ndarray:
    """One pyramid step, (h, w[, C]) -> (ceil(h / 2), ceil(w / 2)[, C]): the mean of each 2x2
    block (rounded, uint8 stays uint8); an odd last row or column is paired with a copy of
    itself (the border repeats, as in the crops)."""
    height, width = image.shape[:2]
    if height % 2 or width % 2:
        image = pad_replicate(image, 0, height % 2, 0, width % 2)
    return resize_area(image, ((width + 1) // 2, (height + 1) // 2))


def crop_squares(
    image: np.ndarray, specs: Sequence[CropSpec], output_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Cut several square crops of one frame, sharing one anti-aliasing reduction among them.

    Args:
        image: uint8 (H, W, C) or (H, W).
        specs: N >= 1 crops (:class:`CropSpec`).
        output_size: side S of every output, in pixels.

    Returns:
        ``(patches, matrices)``: (N, S, S[, C]) of the image's dtype and (N, 2, 3) maps from image
        to crop coordinates (:func:`crop_matrix`), in the order of ``specs``.

    A crop that shrinks the frame by less than 2x is the one :func:`crop_square` cuts (the same
    pixels). A crop that shrinks it by ``f >= 2`` is warped (bilinear, shrinking by less than 2)
    from level ``k`` = :func:`pyramid_level` of a pyramid of 2x2 means (level k: the mean of
    aligned 2^k x 2^k blocks), where :func:`crop_square` area-averages its own region by
    ``floor(f)`` first; where ``floor(f)`` is not a power of 2, a Gaussian blur of the level
    (:func:`residual_sigma`) makes up the difference in smoothing. The pyramid is built once
    over the union of the crops' regions that overlap (crops far apart, e.g. of several
    targets, get one window each), so that the scale search's three crops, or the first frame's
    augmented ones, pay for one reduction; its 2x steps are the cheapest area reduction OpenCV
    has (a 1600-pixel square region of a 4K frame in about 1 ms on one core, against 4-11 ms for
    an area resize by 5). A crop comes out the same alone or among others, up to one grey level
    where OpenCV's warp rounds a position differently from another window's origin.
    """
    _check_image(image)
    specs = list(specs)
    if not specs:
        raise ValueError("specs must hold at least one crop")
    matrices, levels, regions = [], [], []
    for spec in specs:
        _check_crop(spec.center, spec.side)
        matrices.append(crop_matrix(spec.center, spec.side, output_size, spec.angle_deg, spec.flip))
        level = pyramid_level(spec.side, output_size)
        levels.append(level)
        # Pixels of the sampled level around the square: the warp's bilinear neighbours and the
        # blur's reach (3 sigma < 3 px), so that the crop is the same alone or among others.
        margin = 2.0 if level == 0 else 4.0 * 2**level
        regions.append(_touched_region(image.shape, spec.center, spec.side, spec.angle_deg, margin))
    patches = np.empty((len(specs), output_size, output_size, *image.shape[2:]), image.dtype)
    slot = patches.shape[1:]
    for i, level in enumerate(levels):
        if level == 0:
            x0, y0, x1, y1 = regions[i]
            region = image[y0:y1, x0:x1]
            patches[i] = _warp(region, (x0, y0), (1.0, 1.0), matrices[i], output_size).reshape(slot)
    for members, window in _windows(regions, levels):
        top = max(levels[i] for i in members)
        x0, y0, x1, y1 = _align(window, 2**top, image.shape)
        level_image = image[y0:y1, x0:x1]
        for level in range(1, top + 1):
            level_image = halve(level_image)
            pixel = (float(2**level), float(2**level))
            blurred: dict[float, np.ndarray] = {}  # one blur per width among the level's crops
            for i in members:
                if levels[i] == level:
                    sigma = residual_sigma(specs[i].side, output_size)
                    if sigma not in blurred:
                        blurred[sigma] = _blur(level_image, sigma)
                    patch = _warp(blurred[sigma], (x0, y0), pixel, matrices[i], output_size)
                    patches[i] = patch.reshape(slot)
    return patches, np.stack(matrices)


def residual_sigma(side: float, output_size: int) -> float:
    """The Gaussian blur (sigma, in pixels of level :func:`pyramid_level`) that brings a crop
    cut from the pyramid to the smoothing :func:`crop_square` applies: that one averages blocks of
    ``r = floor(side / output_size)`` pixels, the pyramid blocks of ``2**k``; a box of width
    ``b`` then the bilinear warp spread a pixel by a variance of ``b**2 / 4``, so the rest is
    ``((r / 2**k)**2 - 1) / 4`` level pixels squared (0 where ``r`` is a power of 2)."""
    level = pyramid_level(side, output_size)
    if level == 0:
        return 0.0
    ratio = int(side / output_size) / 2**level
    return math.sqrt(max(ratio * ratio - 1.0, 0.0)) / 2.0


def _blur(image: np.ndarray, sigma: float) -> np.ndarray:
    """``image`` smoothed by a Gaussian of ``sigma`` px (border repeated), itself if 0."""
    if sigma <= 0.0:
        return image
    ksize = 2 * math.ceil(3.0 * sigma) + 1
    return gaussian_blur(image, (ksize, ksize), sigma)


def _windows(
    regions: Sequence[tuple[int, int, int, int]], levels: Sequence[int]
) -> list[tuple[list[int], tuple[int, int, int, int]]]:
    """The crops of level >= 1 grouped by overlapping regions: ``[(indices, union region)]``."""
    groups: list[tuple[list[int], tuple[int, int, int, int]]] = []
    for i, level in enumerate(levels):
        if level == 0:
            continue
        members, box = [i], regions[i]
        merged = True
        while merged:  # a grown union may reach a further group
            merged = False
            for group in groups:
                other = group[1]
                if _overlap(box, other):
                    groups.remove(group)
                    members += group[0]
                    box = (
                        min(box[0], other[0]),
                        min(box[1], other[1]),
                        max(box[2], other[2]),
                        max(box[3], other[3]),
                    )
                    merged = True
                    break
        groups.append((sorted(members), box))
    return groups


def _overlap(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _align(
    region: tuple[int, int, int, int], block: int, shape: tuple[int, ...]
) -> tuple[int, int, int, int]:
    """``region`` grown to whole ``block`` x ``block`` cells of the image's grid, clipped to the
    image (only a cell at its right or bottom edge stays partial)."""
    x0, y0, x1, y1 = region
    height, width = shape[:2]
    return (
        x0 // block * block,
        y0 // block * block,
        min(-(-x1 // block) * block, width),
        min(-(-y1 // block) * block, height),
    )


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
    inverse = invert_affine_transform(matrix)
    top_left = apply_matrix(inverse, box[..., :2])
    return np.concatenate([top_left, box[..., 2:] / scale], axis=-1)
