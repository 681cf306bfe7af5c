"""First-frame data augmentation: the initial training samples of ATOM's online classifier.

Each transform is one crop of the first frame (:func:`ebmtrack.ops.crop.crop_squares`, all of them
from one anti-aliasing pyramid, so the geometry is exact and borders replicate) followed, for
blur, by a Gaussian filter of the crop. The
target centre in each crop comes from the crop's affine map, so labels move with shifts, rotations
and flips. Channel dropout works on features and is applied by :func:`dropout_copies`.
"""

from __future__ import annotations

import math
from typing import Protocol

import cv2
import numpy as np
import torch
from torch import Tensor

from ebmtrack.ops.crop import CropSpec, apply_matrix, crop_squares

__all__ = ["AugmentationParams", "augmented_crops", "dropout_copies", "num_augmented_crops"]


class AugmentationParams(Protocol):
    """The settings :func:`augmented_crops` reads (fields of ``AtomParams`` and ``DiMPParams``)."""

    search_size: int
    aug_relative_shift: float
    aug_random_shift_factor: float
    aug_flip: bool
    aug_blur_sigmas: tuple[tuple[float, float], ...]
    aug_rotations: tuple[float, ...]


def num_augmented_crops(params: AugmentationParams) -> int:
    """How many crops :func:`augmented_crops` makes: 1 + 4 shifts (if ``aug_relative_shift`` >
    0) + 1 flip (if ``aug_flip``) + one per blur and per rotation."""
    return (
        1
        + 4 * (params.aug_relative_shift > 0)
        + int(params.aug_flip)
        + len(params.aug_blur_sigmas)
        + len(params.aug_rotations)
    )


def augmented_crops(
    frame: np.ndarray,
    center: tuple[float, float],
    side: float,
    params: AugmentationParams,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """The image samples of the first frame: identity first, then shifts, flip, blurs, rotations.

    Args:
        frame: uint8 (H, W, 3) RGB.
        center: target centre (cx, cy) in frame pixels.
        side: side of the search region in frame pixels.
        params: the augmentation settings (``aug_*``) and ``search_size``.
        rng: draws the random shifts.

    Returns:
        ``(crops, centers)``: uint8 (N, S, S, 3) with S = ``search_size``, and (N, 2) float64 target
        centres (x, y) in crop pixels, N = :func:`num_augmented_crops`.
    """
    size = params.search_size
    px_per_crop_px = side / size
    max_random = params.aug_random_shift_factor * size / 2.0

    def random_shift() -> np.ndarray:
        # Integer crop pixels, as the reference (U(+-48) at 288).
        return np.trunc(rng.uniform(-max_random, max_random, size=2))

    # (shift in crop px, angle, flip, blur sigmas (y, x) or None)
    transforms: list[tuple[np.ndarray, float, bool, tuple[float, float] | None]] = [
        (np.zeros(2), 0.0, False, None)
    ]
    if params.aug_relative_shift > 0:
        step = params.aug_relative_shift * size / 2.0
        for sx, sy in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
            transforms.append((np.array([sx * step, sy * step]), 0.0, False, None))
    if params.aug_flip:
        transforms.append((random_shift(), 0.0, True, None))
    for sigmas in params.aug_blur_sigmas:
        transforms.append((random_shift(), 0.0, False, tuple(sigmas)))
    for angle in params.aug_rotations:
        transforms.append((random_shift(), float(angle), False, None))

    target = np.asarray(center, dtype=np.float64)
    # Moving the crop by -shift moves the target by +shift in the crop.
    specs = [
        CropSpec(tuple(target - shift * px_per_crop_px), side, angle, flip)
        for shift, angle, flip, _ in transforms
    ]
    crops, matrices = crop_squares(frame, specs, size)
    centers = np.empty((len(transforms), 2))
    for i, (_, _, _, blur) in enumerate(transforms):
        if blur is not None:
            sigma_y, sigma_x = blur
            ksize = (2 * math.ceil(2 * sigma_x) + 1, 2 * math.ceil(2 * sigma_y) + 1)
            crops[i] = cv2.GaussianBlur(
                crops[i], ksize, sigmaX=sigma_x, sigmaY=sigma_y, borderType=cv2.BORDER_REPLICATE
            )
        centers[i] = apply_matrix(matrices[i], target)
    return crops, centers


def dropout_copies(
    features: Tensor, copies: int, probability: float, generator: torch.Generator
) -> Tensor:
    """``copies`` versions of ``features`` (1, C, H, W) with whole channels zeroed with
    ``probability`` and the rest scaled by 1 / (1 - probability) -> (copies, C, H, W).

    ``generator`` is a CPU generator; the mask moves to the features' device."""
    keep = torch.rand(copies, features.shape[1], 1, 1, generator=generator) >= probability
    return features * keep.to(features) / (1.0 - probability)
