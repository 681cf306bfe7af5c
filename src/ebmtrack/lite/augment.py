"""First-frame augmentation in NumPy: the crops of ATOM's initial training samples (the torch
trackers' too: :mod:`ebmtrack.tracking.augment` hands its settings here) and the channel-dropout
copies, drawn as the torch trackers draw them (tested equal): identity, four shifts, flip, blurs,
rotations, all cut from one pyramid (:func:`ebmtrack.lite.crop.crop_squares`), the target centre
in each crop from its affine map."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ebmtrack.lite.crop import CropSpec, apply_matrix, crop_squares
from ebmtrack.lite.imageops import gaussian_blur
from ebmtrack.lite.torch_random import TorchGenerator

__all__ = ["augmented_crops", "dropout_copies", "num_augmented_crops"]


def num_augmented_crops(params: dict) -> int:
    """How many crops :func:`augmented_crops` makes: 1 + 4 shifts (if ``aug_relative_shift`` >
    0) + 1 flip (if ``aug_flip``) + one per blur and per rotation."""
    return (
        1
        + 4 * (params["aug_relative_shift"] > 0)
        + int(params["aug_flip"])
        + len(params["aug_blur_sigmas"])
        + len(params["aug_rotations"])
    )


def augmented_crops(
    frame: np.ndarray,
    center: Sequence[float],
    side: float,
    params: dict,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """The image samples of the first frame: identity first, then shifts, flip, blurs, rotations.

    Args:
        frame: uint8 (H, W, 3) RGB.
        center: target centre (cx, cy) in frame px.
        side: side of the search region in frame px.
        params: the tracker's parameters (``search_size`` and the ``aug_*`` fields).
        rng: draws the random shifts (``np.random.default_rng(seed)``).

    Returns:
        ``(crops, centers)``: uint8 (N, S, S, 3) with S = ``search_size``, and (N, 2) float64
        target centres (x, y) in crop px, N = :func:`num_augmented_crops`.
    """
    size = params["search_size"]
    px_per_crop_px = side / size
    max_random = params["aug_random_shift_factor"] * size / 2.0

    def random_shift() -> np.ndarray:
        # Integer crop pixels, as the reference (U(+-48) at 288).
        return np.trunc(rng.uniform(-max_random, max_random, size=2))

    # (shift in crop px, angle, flip, blur sigmas (y, x) or None)
    transforms: list[tuple[np.ndarray, float, bool, tuple[float, float] | None]] = [
        (np.zeros(2), 0.0, False, None)
    ]
    if params["aug_relative_shift"] > 0:
        step = params["aug_relative_shift"] * size / 2.0
        for sx, sy in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
            transforms.append((np.array([sx * step, sy * step]), 0.0, False, None))
    if params["aug_flip"]:
        transforms.append((random_shift(), 0.0, True, None))
    for sigmas in params["aug_blur_sigmas"]:
        transforms.append((random_shift(), 0.0, False, (float(sigmas[0]), float(sigmas[1]))))
    for angle in params["aug_rotations"]:
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
            crops[i] = gaussian_blur(crops[i], ksize, sigma_x, sigma_y)
        centers[i] = apply_matrix(matrices[i], target)
    return crops, centers


def dropout_copies(
    features: np.ndarray, copies: int, probability: float, generator: TorchGenerator
) -> np.ndarray:
    """``copies`` versions of ``features`` (1, C, H, W) with whole channels zeroed with
    ``probability`` and the rest scaled by 1 / (1 - probability) -> (copies, C, H, W), float32;
    the mask drawn as ``torch.rand(copies, C, 1, 1, generator=...)``."""
    keep = generator.rand(copies, features.shape[1], 1, 1) >= probability
    return (features * keep.astype(np.float32)) / np.float32(1.0 - probability)
