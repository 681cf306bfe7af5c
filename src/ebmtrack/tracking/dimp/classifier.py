"""DiMP's classifier part: the target filter predicted and refined by the meta-learned model
optimizer (:class:`~ebmtrack.models.dimp.DiMPClassifier`), its memory labels the target boxes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.dimp import DiMPClassifier
from ebmtrack.ops.crop import box_to_crop
from ebmtrack.tracking.base import TrackStatus
from ebmtrack.tracking.composition import TargetState
from ebmtrack.tracking.localize import Localization
from ebmtrack.tracking.search_region import FirstFrame, Region

__all__ = ["LearntClassifier", "LearntConfig"]


@dataclass(frozen=True)
class LearntConfig:
    """What DiMP's classifier part reads (fields of :class:`~ebmtrack.tracking.dimp.params.
    DiMPParams` of the same names): the optimizer's steps and schedule, the crops' size."""

    init_iters: int = 10
    update_iters: int = 2
    hard_negative_iters: int = 1
    train_skipping: int = 20
    search_size: int = 288


class LearntClassifier:
    """DiMP's classifier as a tracker part (:class:`~ebmtrack.tracking.composition.Classifier`):
    the per-target model is the filter (1, D, k, k); memory samples are classification features
    (D, H, W), labels their target box (4,) in crop px.

    Args:
        net: DiMP's target classifier for ``backbone``'s classifier layer (refused with a
            ValueError otherwise); frozen, moved to ``device``.
        backbone: the tracker's backbone.
        params: its config.
        device: where it runs.
    """

    def __init__(
        self, net: DiMPClassifier, backbone: Backbone, params: LearntConfig, device: torch.device
    ) -> None:
        self.layer = backbone.classifier_layer
        config, info = net.config, backbone.feature_info[self.layer]
        if config.feature_layer not in (None, self.layer) or (
            config.in_channels,
            config.stride,
        ) != (info.channels, info.stride):
            raise ValueError(
                f"the DiMP classifier reads {config.in_channels} channels at stride "
                f"{config.stride} (layer {config.feature_layer!r} of {config.backbone!r}); "
                f"backbone {backbone.name!r} layer {self.layer!r} gives "
                f"{info.channels} at {info.stride}"
            )
        self.net = net.to(device).eval().requires_grad_(False)
        self.params = params
        self.device = device
        self.stride = config.stride
        self.filter_size = config.filter_size

    def _boxes(self, boxes: np.ndarray) -> Tensor:
        return torch.as_tensor(boxes, dtype=torch.float32, device=self.device)

    def samples(self, features: Tensor) -> Tensor:
        return self.net.extract_features(features)

    def start(self, first: FirstFrame) -> tuple[Tensor, Tensor, Tensor]:
        """The filter initializer pools the target from every augmented sample; the optimizer
        takes ``init_iters`` steps."""
        params, samples, centers = self.params, first.samples, first.centers
        crop_size = first.size * params.search_size / first.side
        with torch.no_grad():
            boxes = self._boxes(
                np.concatenate(
                    [centers - crop_size / 2, np.broadcast_to(crop_size, centers.shape)], 1
                )
            )
            target_filter = self.net.initialize_filter(samples[:, None], boxes[:, None])
            if params.init_iters:
                iterates, _ = self.net.optimize_filter(
                    target_filter, samples[:, None], boxes[:, None], params.init_iters
                )
                target_filter = iterates[-1]
        return target_filter, samples, boxes

    def score(self, model: Tensor, features: Tensor) -> tuple[Tensor, Tensor]:
        # no_grad, not inference_mode: the box refinement's autograd reads the features.
        with torch.no_grad():
            sample = self.net.extract_features(features)
            return self.net.classify(model, sample[:, None])[:, 0], sample

    def position(self, found: Localization) -> np.ndarray:
        # Score cell i sits at pixel stride * i for an even filter, half a cell on for odd.
        return np.asarray(found.position) + self.stride * (self.filter_size % 2) / 2

    def label(self, state: TargetState, region: Region) -> Tensor:
        return self._boxes(box_to_crop(state.box(), region.matrix))

    def train(self, state: TargetState, status: TrackStatus) -> None:
        """After a confident frame: ``hard_negative_iters`` optimizer steps right after a hard
        negative, ``update_iters`` every ``train_skipping`` frames; nothing after lost and
        uncertain frames (reference ``update_flag``)."""
        params = self.params
        if status == TrackStatus.HARD_NEGATIVE:
            num_iter = params.hard_negative_iters
        elif status == TrackStatus.NORMAL and (state.frame_index - 1) % params.train_skipping == 0:
            num_iter = params.update_iters
        else:
            return
        if num_iter:
            samples, boxes, weights = state.memory.training_set()
            with torch.no_grad():
                iterates, _ = self.net.optimize_filter(
                    state.model, samples[:, None], boxes[:, None], num_iter, weights[:, None]
                )
            state.model = iterates[-1]
