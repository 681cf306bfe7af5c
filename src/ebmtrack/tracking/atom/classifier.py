"""ATOM's classifier part (paper 3.2): a projection and a filter learnt per video by
Gauss-Newton and conjugate gradient (:mod:`ebmtrack.models.atom_classifier`), its labels
Gaussians at the target centre."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

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

__all__ = ["GaussNewtonClassifier", "GaussNewtonConfig", "normalize_features"]


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

    Args:
        backbone: the classifier reads its ``classifier_layer``.
        params: its config.
        device: where it runs.
        dtype: of the filter update's matrix products (bfloat16 is 3x faster on CPUs with
            native bfloat16).
    """

    def __init__(
        self,
        backbone: Backbone,
        params: GaussNewtonConfig,
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        self.params = params
        self.device = device
        self.dtype = dtype
        self.layer = backbone.classifier_layer
        info = backbone.feature_info[self.layer]
        self.stride = info.stride
        self.config = ClassifierConfig(
            in_channels=info.channels,
            projection_dim=params.projection_dim,
            filter_size=params.filter_size,
            pelu_alpha=params.pelu_alpha,
            filter_reg=params.filter_reg,
            projection_reg=params.projection_reg,
        )
        self.map_size = math.ceil(params.search_size / self.stride)

    def labels(self, centers_px: np.ndarray) -> Tensor:
        """Gaussian labels (N, H, W) for target centres (N, 2) in crop pixels."""
        params = self.params
        sigma = params.sigma_factor * params.search_size / params.search_area_scale
        centers = torch.as_tensor(centers_px / self.stride, dtype=torch.float32, device=self.device)
        return gaussian_labels(centers, sigma / self.stride, (self.map_size, self.map_size))

    def samples(self, features: Tensor) -> Tensor:
        return normalize_features(features)

    def start(self, first: FirstFrame) -> tuple[AtomClassifier, Tensor, Tensor]:
        """Fit projection and filter on the augmented first frame (``init_gn_iters`` GN steps
        of ``init_cg_iters`` CG each); the memory holds the projected samples."""
        params, samples = self.params, first.samples
        labels = self.labels(first.centers)
        weights = torch.full((samples.shape[0],), 1.0 / samples.shape[0], device=self.device)
        model = AtomClassifier(self.config, generator=first.generator).to(self.device)
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
        return self.labels(apply_matrix(region.matrix, state.center)[None])[0]

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
