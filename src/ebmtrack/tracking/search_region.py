"""The search region, the first of a tracker's three parts (:mod:`ebmtrack.tracking.composition`).

The target is a centre and a size in frame pixels. Each frame, a square region of side
``search_area_scale * sqrt(w h)`` around the last centre is cropped and resized to
``search_size`` pixels (:func:`ebmtrack.ops.crop.crop_squares`: the regions of one frame share its
anti-aliasing pyramid), the backbone runs on the regions in one batch (its runtime resolved once,
:mod:`ebmtrack.models.backbones.runtime`), and the classifier's score map is localised
(:mod:`ebmtrack.tracking.localize`); the classifier and the box estimator work in crop pixels.

With one backbone pass (``classifier_features="siamese"``, :class:`SiameseSearchRegion`) the
region is the siamese box estimator's search crop instead (:mod:`ebmtrack.lite.siamese`: side
255/127 times its template's, 255 px) and the features its backbone's, which the classifier and
the siamese head then share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ebmtrack.lite.frames import as_rgb, clip_init_box
from ebmtrack.lite.siamese import (
    INSTANCE_SIZE,
    SiameseBoxEstimator,
)
from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.backbones.runtime import BackboneRuntime, feature_extractor
from ebmtrack.ops.crop import CropSpec, crop_squares, search_region_side
from ebmtrack.tracking.augment import augmented_crops, dropout_copies
from ebmtrack.tracking.localize import Localization, localize, upsample_scores
from ebmtrack.tracking.params import SearchRegionParams

SIAMESE_LAYER = "search"
"""The name of the siamese backbone's search features among a frame's features."""


@dataclass
class FirstFrame:
    """The first frame, augmented (:mod:`ebmtrack.tracking.augment`): what the classifier and
    the box estimator start from.

    Attributes:
        frame: the frame as uint8 RGB.
        center, size: the target in frame px, (2,) each.
        side: side of the search region in frame px.
        feats: backbone features of the augmented crops, the identity crop first.
        samples: (N, ...) classifier samples of the crops, then ``aug_dropout`` copies of the first.
        centers: (N, 2) the target centre in each sample's crop px.
        generator: the tracker's torch generator, after the dropout draws.
    """

    frame: np.ndarray
    center: np.ndarray
    size: np.ndarray
    side: float
    feats: dict[str, Tensor]
    samples: Tensor
    centers: np.ndarray
    generator: torch.Generator


@dataclass
class Region:
    """One frame's search region: the (S, S, 3) crop, the 2x3 frame -> crop ``matrix``, the
    ``scale`` in crop px per frame px and the side ``factor`` it was cropped with."""

    patch: np.ndarray
    matrix: np.ndarray
    scale: float
    factor: float = 1.0


class SearchRegion:
    """The search-region part: crops around the target, the backbone's features of them, and
    the localisation of a score map.

    Args:
        params: the tracker's :class:`~ebmtrack.tracking.params.SearchRegionParams`.
        backbone: the backbone (on ``device``, in eval mode).
        layers: the backbone layers the classifier and the box estimator read.
        runtime: the resolved backbone runtime (:func:`~ebmtrack.models.backbones.runtime.
            select_runtime`).
        device: where the networks run.
        slots: search regions per frame and target (the input buffer's first batch).

    Attributes:
        size: the crops' side in px (``params.search_size``).
    """

    def __init__(
        self,
        params: SearchRegionParams,
        backbone: Backbone,
        layers: tuple[str, ...],
        runtime: BackboneRuntime,
        device: torch.device,
        slots: int = 1,
    ) -> None:
        self.params = params
        self.layers = layers
        self.runtime = runtime
        self.device = device
        self.extract: Callable[[Tensor], dict[str, Tensor]] = feature_extractor(
            backbone, layers, runtime
        )
        self.size = size = params.search_size
        self.image = torch.empty(slots, 3, size, size, device=device)

    def side(self, size: np.ndarray) -> float:
        """Side in frame px of the search region of a target of ``size`` (w, h)."""
        return search_region_side(size, self.params.search_area_scale)

    def to_tensor(self, crops: np.ndarray) -> Tensor:
        """(N, S, S, 3) uint8 crops -> (N, 3, S, S) float on the device."""
        return torch.from_numpy(crops).to(self.device).permute(0, 3, 1, 2).float()

    def first_frame(
        self,
        frame: np.ndarray,
        box: np.ndarray,
        to_samples: Callable[[Tensor], Tensor],
        layer: str,
    ) -> FirstFrame:
        """Check the first frame and box, crop the augmented search regions, run the backbone
        on them and turn ``layer``'s features into classifier samples with ``to_samples``
        (without autograd), adding the channel-dropout copies of the first."""
        params = self.params
        frame = as_rgb(frame)
        box = clip_init_box(box, frame.shape, "init box")
        rng = np.random.default_rng(params.seed)
        generator = torch.Generator().manual_seed(params.seed)
        center, size = box[:2] + box[2:] / 2, box[2:].copy()
        side = self.side(size)
        crops, centers = augmented_crops(frame, tuple(center), side, params, rng, self.size)
        with torch.no_grad():
            feats = self.extract(self.to_tensor(crops))
            samples = to_samples(feats[layer])
            copies, probability = params.aug_dropout
            if copies:
                dropped = dropout_copies(samples[:1], copies, probability, generator)
                samples = torch.cat([samples, dropped])
                centers = np.concatenate([centers, np.repeat(centers[:1], copies, axis=0)])
        return FirstFrame(frame, center, size, side, feats, samples, centers, generator)

    def crop(
        self, frame: np.ndarray, center: np.ndarray, size: np.ndarray, factors: tuple[float, ...]
    ) -> list[Region]:
        """The regions around ``center`` for a target of ``size`` (frame px), one per side
        factor (1: the usual search region; 1.05: 5 % wider, so that the target appears 5 %
        smaller)."""
        search_size = self.size
        side = self.side(size)
        specs = [CropSpec(tuple(center), side * factor) for factor in factors]
        patches, matrices = crop_squares(frame, specs, search_size)
        return [
            Region(patch, matrix, search_size / spec.side, factor)
            for patch, matrix, spec, factor in zip(patches, matrices, specs, factors, strict=True)
        ]

    def features(self, regions: list[Region]) -> dict[str, Tensor]:
        """The backbone's features of ``regions`` in one batch, one row per region (no autograd
        history, though a refinement may still differentiate functions of them). The input
        buffer grows to the largest batch seen."""
        if len(regions) > len(self.image):
            self.image = self.image.new_empty((len(regions), *self.image.shape[1:]))
        images = self.image[: len(regions)]
        fill_images(images, regions)
        with torch.no_grad():
            return self.extract(images)

    def localize(self, scores: Tensor, stride: int, target_size: np.ndarray) -> Localization:
        """The target in a (H, W) score map of ``stride``-pixel cells, upsampled by
        ``params.score_upsample``, judged by the parameters' thresholds (reference B.1);
        ``target_size`` (w, h) in crop pixels."""
        params = self.params
        return localize(
            upsample_scores(scores, params.score_upsample),
            cell_px=stride / params.score_upsample,
            crop_size=self.size,
            target_size=tuple(target_size),
            not_found_threshold=params.target_not_found_threshold,
            distractor_threshold=params.distractor_threshold,
            hard_negative_threshold=params.hard_negative_threshold,
            neighborhood_scale=params.target_neighborhood_scale,
            displacement_scale=params.displacement_scale,
        )


class SiameseSearchRegion(SearchRegion):
    """The search region of one backbone pass (``classifier_features="siamese"``): around the
    last centre the siamese box estimator's search crop (side :meth:`~ebmtrack.lite.siamese.
    SiameseBoxEstimator.search_side`) resized to 255 px (one region a frame), and its backbone's
    (1, C, 16, 16) features (:meth:`~ebmtrack.lite.siamese.SiameseBoxEstimator.features`, one
    crop a call, as the runtime's) as the layer :data:`SIAMESE_LAYER`, on ``device``; the
    first frame's augmented crops are of that side and size. The crops come from
    :func:`~ebmtrack.ops.crop.crop_squares`, as :class:`SearchRegion`'s and the runtime's.

    Args:
        params: the tracker's parameters (augmentation, localisation).
        siamese: the estimator whose backbone gives the features (the box estimator's own).
        device: where the features go.
        dtype: of the classifier's matrix products (:attr:`BackboneRuntime.dtype`).
    """

    def __init__(
        self,
        params: SearchRegionParams,
        siamese: SiameseBoxEstimator,
        device: torch.device,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.params = params
        self.siamese = siamese
        self.layers = (SIAMESE_LAYER,)
        self.runtime = BackboneRuntime("onnx", dtype)  # ONNX Runtime, float32 features
        self.device = device
        self.extract = self._extract
        self.size = size = INSTANCE_SIZE
        self.image = torch.empty(1, 3, size, size)  # read by ONNX Runtime on the CPU

    def side(self, size: np.ndarray) -> float:
        """Side in frame px of the siamese search crop of a target of ``size`` (w, h)."""
        return self.siamese.search_side(size)

    def _extract(self, images: Tensor) -> dict[str, Tensor]:
        arrays = np.ascontiguousarray(images.detach().cpu().numpy(), dtype=np.float32)
        feats = self.siamese.features_each(arrays)
        return {SIAMESE_LAYER: torch.from_numpy(feats).to(self.device)}


def fill_images(images: Tensor, regions: list[Region]) -> None:
    """Copy the regions' (S, S, 3) uint8 patches into ``images`` (N, 3, S, S), one per slot."""
    with torch.no_grad():
        for slot, region in zip(images, regions, strict=True):
            slot.copy_(torch.from_numpy(region.patch).permute(2, 0, 1))
