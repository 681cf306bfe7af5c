"""ATOM's classifier part (paper 3.2): a projection and a filter learnt per video by
Gauss-Newton and conjugate gradient (:mod:`ebmtrack.models.atom_classifier`), its labels
Gaussians at the target centre. It reads one layer of features (:class:`FeatureLayer`): the
backbone's classifier layer on ATOM's search region, or, with ``classifier_features="siamese"``,
the siamese box estimator's search features on its own crop
(:class:`~ebmtrack.tracking.search_region.SiameseSearchRegion`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ebmtrack.lite.classifier import label_sigma
from ebmtrack.lite.params import one_pass
from ebmtrack.models.atom_classifier import (
    AtomClassifier,
    ClassifierConfig,
    fit_classifier,
    gaussian_labels,
    update_filter,
)
from ebmtrack.models.backbones.base import Backbone
from ebmtrack.ops.crop import apply_matrix
from ebmtrack.tracking.base import TrackStatus
from ebmtrack.tracking.composition import TargetState
from ebmtrack.tracking.localize import Localization
from ebmtrack.tracking.search_region import FirstFrame, Region

__all__ = ["FeatureLayer", "GaussNewtonClassifier", "GaussNewtonConfig", "normalize_features"]


@dataclass(frozen=True)
class GaussNewtonConfig:
    """What ATOM's classifier part reads (fields of :class:`~ebmtrack.tracking.atom.params.
    AtomParams` of the same names): the model's shape and regularisation, its labels, its
    optimisation, the crops' size and scale."""

    projection_dim: int = 64
    filter_size: int = 4
    pelu_alpha: float = 0.05
    filter_reg: float = 0.1
    projection_reg: float = 1e-4
    sigma_factor: float = 0.25
    init_gn_iters: int = 6
    init_cg_iters: int = 10
    update_cg_iters: int = 5
    train_skipping: int = 10
    search_size: int = 288
    search_area_scale: float = 5.0
    classifier_features: str = "auto"
    box_mode: str = "refine"

    @property
    def one_pass(self) -> bool:
        """Whether the classifier reads the siamese backbone's features
        (:func:`ebmtrack.lite.params.one_pass`)."""
        return one_pass(self.classifier_features, self.box_mode)


@dataclass(frozen=True)
class FeatureLayer:
    """The features the classifier reads: the ``layer``'s name, its ``stride`` (crop px per
    cell), its ``channels`` and the ``crop_size`` (px) of the crops it reads them from."""

    layer: str
    stride: int
    channels: int
    crop_size: int

    @classmethod
    def of_backbone(cls, backbone: Backbone, crop_size: int) -> FeatureLayer:
        """The backbone's ``classifier_layer`` on crops of ``crop_size`` px."""
        info = backbone.feature_info[backbone.classifier_layer]
        return cls(backbone.classifier_layer, info.stride, info.channels, crop_size)


def normalize_features(features: Tensor) -> Tensor:
    """Divide each sample (B, C, H, W) by its root mean square over C, H, W (reference
    ``normalize_power=2``), so that the classifier's regularisation means the same for every
    backbone and image."""
    power = features.pow(2).mean(dim=(1, 2, 3), keepdim=True)
    return features / (power + 1e-10).sqrt()


class GaussNewtonClassifier:
    """ATOM's online classifier as a tracker part (:class:`~ebmtrack.tracking.composition.
    Classifier`): the per-target model is an :class:`~ebmtrack.models.atom_classifier.
    AtomClassifier`; memory samples are its projected features, labels Gaussian maps.

    The labels' std in crop px is ATOM's, ``sigma_factor * search_size / search_area_scale``
    (``sigma_factor`` times the target's side in the crop), or, with
    ``classifier_features="siamese"`` (a crop not sized by ``search_area_scale``),
    ``sigma_factor * sqrt(w h) * crop_size / side`` of the first frame's target and region,
    kept for the target (as the runtime's, :mod:`ebmtrack.lite.tracker`).

    Args:
        features: the layer it reads (:meth:`FeatureLayer.of_backbone`, or the siamese search
            features).
        params: its config.
        device: where it runs.
        dtype: of the filter update's matrix products (bfloat16 is 3x faster on CPUs with
            native bfloat16).
    """

    def __init__(
        self,
        features: FeatureLayer,
        params: GaussNewtonConfig,
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        self.params = params
        self.device = device
        self.dtype = dtype
        self.layer = features.layer
        self.stride = features.stride
        self.config = ClassifierConfig(
            in_channels=features.channels,
            projection_dim=params.projection_dim,
            filter_size=params.filter_size,
            pelu_alpha=params.pelu_alpha,
            filter_reg=params.filter_reg,
            projection_reg=params.projection_reg,
        )
        self.map_size = math.ceil(features.crop_size / self.stride)
        self.crop_size = features.crop_size

    def sigma(self, first: FirstFrame) -> float:
        """The labels' std in crop px for the target of ``first`` (class docstring)."""
        params = self.params
        if params.one_pass:
            return label_sigma(params.sigma_factor, first.size, self.crop_size, first.side)
        return params.sigma_factor * params.search_size / params.search_area_scale

    def labels(self, centers_px: np.ndarray, sigma: float) -> Tensor:
        """Gaussian labels (N, H, W) of std ``sigma`` (crop px) for target centres (N, 2) in
        crop pixels."""
        centers = torch.as_tensor(centers_px / self.stride, dtype=torch.float32, device=self.device)
        return gaussian_labels(centers, sigma / self.stride, (self.map_size, self.map_size))

    def samples(self, features: Tensor) -> Tensor:
        return normalize_features(features)

    def start(self, first: FirstFrame) -> tuple[AtomClassifier, Tensor, Tensor]:
        """Fit projection and filter on the augmented first frame (``init_gn_iters`` GN steps
        of ``init_cg_iters`` CG each); the memory holds the projected samples. The model
        keeps its labels' std (``label_sigma``, crop px)."""
        params, samples = self.params, first.samples
        sigma = self.sigma(first)
        labels = self.labels(first.centers, sigma)
        weights = torch.full((samples.shape[0],), 1.0 / samples.shape[0], device=self.device)
        model = AtomClassifier(self.config, generator=first.generator).to(self.device)
        model.label_sigma = sigma
        fit_classifier(
            model,
            samples,
            labels,
            weights,
            gn_iters=params.init_gn_iters,
            cg_iters=params.init_cg_iters,
        )
        with torch.no_grad():
            projected = model.project(samples)
        return model, projected, labels

    def score(self, model: AtomClassifier, features: Tensor) -> tuple[Tensor, Tensor]:
        with torch.inference_mode():
            projected = model.project(normalize_features(features))
            return model.score(projected), projected

    def position(self, found: Localization) -> np.ndarray:
        return np.asarray(found.position, dtype=np.float64)

    def label(self, state: TargetState, region: Region) -> Tensor:
        centers = apply_matrix(region.matrix, state.center)[None]
        return self.labels(centers, state.model.label_sigma)[0]

    def train(self, state: TargetState, status: TrackStatus) -> None:
        """``update_cg_iters`` CG steps on the filter every ``train_skipping`` frames and at
        once after a hard negative."""
        scheduled = (state.frame_index - 1) % self.params.train_skipping == 0
        if status == TrackStatus.HARD_NEGATIVE or scheduled:
            update_filter(
                state.model,
                *state.memory.training_set(),
                self.params.update_cg_iters,
                product_dtype=self.dtype,
            )
