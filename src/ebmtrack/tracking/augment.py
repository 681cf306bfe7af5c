"""First-frame data augmentation: the initial training samples of ATOM's online classifier.

Each transform is one crop of the first frame (:func:`ebmtrack.lite.crop.crop_squares`, all of
them from one anti-aliasing pyramid, so the geometry is exact and borders replicate) followed, for
blur, by a Gaussian filter of the crop. The target centre in each crop comes from the crop's
affine map, so labels move with shifts, rotations and flips. The crops are NumPy and OpenCV, one
definition shared with the torch-free runtime (:mod:`ebmtrack.lite.augment`). Channel dropout
works on features and is applied by :func:`dropout_copies`.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from ebmtrack.lite import augment as lite

__all__ = ["AugmentationParams", "augmented_crops", "dropout_copies", "num_augmented_crops"]


class AugmentationParams(Protocol):
    """The settings :func:`augmented_crops` reads (fields of ``AtomParams`` and ``DiMPParams``)."""

    search_size: int
    aug_relative_shift: float
    aug_random_shift_factor: float
    aug_flip: bool
    aug_blur_sigmas: tuple[tuple[float, float], ...]
    aug_rotations: tuple[float, ...]


def _fields(params: AugmentationParams) -> dict:
    return {name: getattr(params, name) for name in AugmentationParams.__annotations__}


def num_augmented_crops(params: AugmentationParams) -> int:
    """How many crops :func:`augmented_crops` makes: 1 + 4 shifts (if ``aug_relative_shift`` >
    0) + 1 flip (if ``aug_flip``) + one per blur and per rotation."""
    return lite.num_augmented_crops(_fields(params))


def augmented_crops(
    frame: np.ndarray,
    center: tuple[float, float],
    side: float,
    params: AugmentationParams,
    rng: np.random.Generator,
    search_size: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`ebmtrack.lite.augment.augmented_crops` with the settings of ``params``; crops of
    ``search_size`` px instead of ``params.search_size`` where given (the siamese search crop's
    255 px, :class:`~ebmtrack.tracking.search_region.SiameseSearchRegion`)."""
    fields = _fields(params)
    if search_size is not None:
        fields["search_size"] = search_size
    return lite.augmented_crops(frame, center, side, fields, rng)


def dropout_copies(
    features: Tensor, copies: int, probability: float, generator: torch.Generator
) -> Tensor:
    """``copies`` versions of ``features`` (1, C, H, W) with whole channels zeroed with
    ``probability`` and the rest scaled by 1 / (1 - probability) -> (copies, C, H, W).

    ``generator`` is a CPU generator; the mask moves to the features' device."""
    keep = torch.rand(copies, features.shape[1], 1, 1, generator=generator) >= probability
    return features * keep.to(features) / (1.0 - probability)
