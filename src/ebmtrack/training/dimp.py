"""Offline training of DiMP's target classifier (DiMP, ICCV 2019, section 3.4; BMVC 2020, App. D).

A training sample is a :class:`~ebmtrack.data.sampler.FrameSet` of one sequence, N training and M
test frames (DiMP: 3 + 3) cropped by :class:`~ebmtrack.data.processing.DiMPProcessing`. The
classifier (:class:`~ebmtrack.models.dimp.DiMPClassifier`) predicts a filter from the training
frames and their boxes (initializer, then the unrolled steepest-descent optimizer) and scores the
test frames with every filter iterate; :func:`~ebmtrack.models.dimp.classification_loss` compares
those scores with Gaussian labels at the test targets (hinge on the background, weights
100 / 100 / 400 for the initial, final and intermediate iterates). The gradient flows through the
whole optimizer, so the feature block, the initializer and the optimizer's step length,
regularisation and label / mask / spatial-weight functions are all learned.

Two ways to feed it, as for the box head (:mod:`ebmtrack.training.feature_cache`):

- :class:`DiMPTrainingModule` runs the frozen backbone on the crops at every step;
- :class:`CachedDiMPTrainingModule` reads the backbone's stride-16 features from a cache built
  once (:func:`build_frame_set_cache`, float16 chunk files keyed by how the samples were made,
  resumable, same layout rules as the box head's cache), walked through by
  :class:`CachedFrameSets`. The crops and their augmentation are then drawn once; the order of
  the samples changes every epoch (the trainer's ``shuffle``).

Tensor layout: the data gives (B, N, ...) per batch (PyTorch's collate stacks samples first); the
classifier takes (N, B, ...), so the modules transpose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from ebmtrack.data.processing import DiMPProcessing
from ebmtrack.models.dimp import (
    DiMPClassifier,
    box_centers_in_cells,
    classification_loss,
    hinge_mse,
    score_labels,
)

from .feature_cache import build_chunked_cache

__all__ = [
    "CachedDiMPTrainingModule",
    "CachedFrameSets",
    "DiMPTrainingConfig",
    "DiMPTrainingModule",
    "build_frame_set_cache",
    "peak_stats",
    "score_peak_offset",
]

CACHE_KEYS = ("train_feat", "test_feat", "train_boxes", "test_boxes")


@dataclass
class DiMPTrainingConfig:
    """The DiMP-specific part of an experiment; defaults from ``ltr/train_settings/dimp/dimp18.py``.

    Attributes:
        processing: crops and jitter of every frame.
        num_train_frames, num_test_frames: frames of each kind per sample (3 and 3).
        feature_dim: channels of the classification features (None: ``DiMPConfig.for_backbone``,
            128 for the mobile backbones).
        num_iter: unrolled optimizer steps in training (5).
        output_sigma_factor: std of the Gaussian label relative to the target size (1/4); in score
            cells ``output_sigma_factor / search_area_factor * output_size / stride`` (0.9 at
            288 / 16); also the initial width of the learned label function.
        hinge_threshold: label value below which a cell is background (0.05).
        loss_weights: (initial filter, final filter, intermediate filters) (100, 100, 400).
    """

    processing: DiMPProcessing = field(default_factory=DiMPProcessing)
    num_train_frames: int = 3
    num_test_frames: int = 3
    feature_dim: int | None = None
    num_iter: int = 5
    output_sigma_factor: float = 0.25
    hinge_threshold: float = 0.05
    loss_weights: tuple[float, float, float] = (100.0, 100.0, 400.0)

    def __post_init__(self) -> None:
        for name in ("num_train_frames", "num_test_frames", "num_iter"):
            value = getattr(self, name)
            if int(value) != value or value < (0 if name == "num_iter" else 1):
                raise ValueError(f"dimp.{name} must be a non-negative integer, got {value}")
        if not self.output_sigma_factor > 0:
            raise ValueError(
                f"dimp.output_sigma_factor must be > 0, got {self.output_sigma_factor}"
            )
        if len(self.loss_weights) != 3 or min(self.loss_weights) < 0:
            raise ValueError("dimp.loss_weights must be three numbers >= 0 (init, final, iter)")

    def label_sigma(self, stride: int) -> float:
        """Std of the Gaussian labels in score cells (DiMP: 1/4 / 5 * 18 = 0.9)."""
        processing = self.processing
        feature_size = processing.output_size / stride
        return self.output_sigma_factor / processing.search_area_factor * feature_size


def score_peak_offset(scores: Tensor, boxes: Tensor, stride: int, filter_size: int) -> Tensor:
    """Offset (x, y) in pixels from the target centre to the highest score of each map.

    Args:
        scores: (..., H', W') score maps of :meth:`DiMPClassifier.classify`.
        boxes: (..., 4) xywh target boxes in pixels of the same images.
        stride, filter_size: the classifier's geometry (where score cells sit).

    Returns:
        (..., 2) offsets; the grid spacing is ``stride`` pixels, so a perfect peak is within
        ``stride / 2`` per axis.
    """
    width = scores.shape[-1]
    peak = scores.flatten(-2).argmax(dim=-1)
    peak_xy = torch.stack([peak % width, torch.div(peak, width, rounding_mode="floor")], dim=-1)
    centers = box_centers_in_cells(boxes, stride, filter_size)
    return stride * (peak_xy.to(centers.dtype) - centers)


def peak_stats(scores: Tensor, boxes: Tensor, stride: int, filter_size: int) -> dict[str, Tensor]:
    """How well score maps (..., H', W') locate the targets (..., 4): ``peak_error``, the mean
    distance in pixels from the peak to the target centre, and ``peak_in_box``, the fraction of
    maps whose peak lies inside the target box (where a tracker would still be on target)."""
    offset = score_peak_offset(scores, boxes, stride, filter_size)
    inside = (offset.abs() <= boxes[..., 2:] / 2).all(dim=-1)
    return {"peak_error": offset.norm(dim=-1).mean(), "peak_in_box": inside.float().mean()}


def _frames_first(tensor: Tensor) -> Tensor:
    """(B, N, ...) -> (N, B, ...)."""
    return tensor.transpose(0, 1)


class DiMPTrainingModule(nn.Module):
    """Training module (see :mod:`ebmtrack.training.trainer`): frozen backbone + DiMP classifier.

    ``forward(batch)`` takes a collated batch of :class:`~ebmtrack.data.processing.DiMPProcessing`
    samples and returns ``(loss, stats)``: the weighted classification loss, and as stats the
    hinge losses of the initial and the final filter (``clf_init``, ``clf_final``) and how well
    their score peaks locate the test targets (:func:`peak_stats`: ``peak_error``,
    ``peak_in_box``, and ``peak_error_init``, ``peak_in_box_init`` for the initial filter).

    Args:
        backbone: an :class:`~ebmtrack.models.backbones.Backbone`; frozen here.
        classifier: the classifier to train; its ``in_channels`` and ``stride`` must match the
            backbone's ``classifier_layer``.
        settings: labels and loss weights.
    """

    frozen_submodules = ("backbone",)

    def __init__(
        self, backbone: nn.Module, classifier: DiMPClassifier, settings: DiMPTrainingConfig
    ) -> None:
        super().__init__()
        self.backbone = backbone.eval().requires_grad_(False)
        self.classifier = classifier
        self.settings = settings
        self.layer = backbone.classifier_layer
        info = backbone.feature_info[self.layer]
        config = classifier.config
        if (info.channels, info.stride) != (config.in_channels, config.stride):
            raise ValueError(
                f"classifier in_channels/stride {config.in_channels}/{config.stride} do not match "
                f"the backbone layer {self.layer} ({info.channels}/{info.stride})"
            )
        self.label_sigma = settings.label_sigma(config.stride)

    def train(self, mode: bool = True) -> DiMPTrainingModule:
        super().train(mode)
        self.backbone.eval()  # frozen: never batch statistics
        return self

    def features(self, images: Tensor) -> Tensor:
        """Backbone features (..., C, H, W) of images (..., 3, S, S), without gradients."""
        with torch.no_grad():
            feats = self.backbone(images.flatten(0, -4), (self.layer,))[self.layer]
        return feats.reshape(*images.shape[:-3], *feats.shape[-3:])

    def forward(self, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        num_train = batch["train_images"].shape[1]
        both = self.features(torch.cat([batch["train_images"], batch["test_images"]], dim=1))
        return self.head_loss(both[:, :num_train], both[:, num_train:], batch)

    def head_loss(
        self, train_feats: Tensor, test_feats: Tensor, batch: dict[str, Tensor]
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The loss and stats of :meth:`forward` from backbone features (B, N, C, H, W) of the
        training and (B, M, C, H, W) of the test crops."""
        config = self.classifier.config
        train_boxes = _frames_first(batch["train_boxes"])
        test_boxes = _frames_first(batch["test_boxes"])
        scores = self.classifier(
            _frames_first(train_feats),
            _frames_first(test_feats),
            train_boxes,
            self.settings.num_iter,
        )
        labels = score_labels(
            test_boxes, scores[0].shape[-2:], self.label_sigma, config.stride, config.filter_size
        )
        threshold = self.settings.hinge_threshold
        loss = classification_loss(scores, labels, threshold, self.settings.loss_weights)
        with torch.no_grad():
            first, last = scores[0].float(), scores[-1].float()
            geometry = (config.stride, config.filter_size)
            initial = peak_stats(first, test_boxes, *geometry)
            stats = {
                "clf_init": hinge_mse(first, labels, threshold),
                "clf_final": hinge_mse(last, labels, threshold),
                **peak_stats(last, test_boxes, *geometry),
                **{f"{name}_init": value for name, value in initial.items()},
            }
        return loss, stats


class CachedDiMPTrainingModule(DiMPTrainingModule):
    """:class:`DiMPTrainingModule` that reads backbone features from a :class:`CachedFrameSets`
    batch (``train_feat``, ``test_feat`` float16) instead of computing them from crops."""

    def forward(self, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        return self.head_loss(batch["train_feat"].float(), batch["test_feat"].float(), batch)


@torch.no_grad()
def _encode_chunk(
    samples: Dataset, indices: range, module: DiMPTrainingModule, batch_size: int
) -> dict[str, Tensor]:
    parts: dict[str, list[Tensor]] = {name: [] for name in CACHE_KEYS}
    for start in range(indices.start, indices.stop, batch_size):
        items = [samples[i] for i in range(start, min(start + batch_size, indices.stop))]
        for which in ("train", "test"):
            images = torch.stack([item[f"{which}_images"] for item in items])
            parts[f"{which}_feat"].append(module.features(images).to(torch.float16))
            parts[f"{which}_boxes"].append(torch.stack([item[f"{which}_boxes"] for item in items]))
    return {name: torch.cat(values).contiguous() for name, values in parts.items()}


def build_frame_set_cache(
    samples: Dataset,
    module: DiMPTrainingModule,
    folder: str | Path,
    key: str,
    chunk_size: int = 128,
    batch_size: int = 4,
    progress: bool = True,
) -> dict[str, Tensor]:
    """Pass every frame set of ``samples`` through ``module``'s frozen backbone once.

    Files as :func:`ebmtrack.training.feature_cache.build_feature_cache` writes them
    (``chunk-00000.safetensors``, ..., atomic, rebuilt when their ``key`` differs, so an
    interrupted build resumes at the first missing chunk), holding ``train_feat`` (K, N, C, H, W)
    and ``test_feat`` (K, M, C, H, W) float16, ``train_boxes`` (K, N, 4) and ``test_boxes``
    (K, M, 4) float32.

    Args:
        samples: processed frame sets (:class:`~ebmtrack.data.processing.DiMPProcessing` dicts).
        module: supplies the backbone and its layer (:meth:`DiMPTrainingModule.features`).
        folder: where the chunk files go.
        key: identifies how the samples were made.
        chunk_size: samples per file.
        batch_size: samples per backbone call (each gives N + M crops).
        progress: show a tqdm bar.

    Returns:
        The whole cache as one dict of the tensors above.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    cache = build_chunked_cache(
        len(samples),
        lambda indices: _encode_chunk(samples, indices, module, batch_size),
        folder,
        key,
        chunk_size,
        unit="samples",
        progress=progress,
    )
    return {name: cache[name] for name in CACHE_KEYS}


class CachedFrameSets(Dataset):
    """The samples of a :func:`build_frame_set_cache` cache, one per index (``len`` = cached
    samples); train with the trainer's ``shuffle=True`` for a new order every epoch."""

    def __init__(self, cache: dict[str, Tensor]) -> None:
        missing = sorted(set(CACHE_KEYS) - set(cache))
        if missing:
            raise ValueError(f"cache lacks {missing}; build it with build_frame_set_cache")
        self.cache = cache

    def __len__(self) -> int:
        return len(self.cache["train_boxes"])

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        if not 0 <= index < len(self):
            raise IndexError(f"sample index {index} out of range for {len(self)}")
        return {name: self.cache[name][index] for name in CACHE_KEYS}
