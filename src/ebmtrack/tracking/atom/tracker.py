"""The ATOM tracker (Danelljan et al., CVPR 2019): online classifier + IoU-Net box refinement.

Per frame (paper 3.3, reference B.1): one square search region of ``search_area_scale`` times the
target's size around the previous position, resized to ``search_size``; one backbone pass whose
features feed both heads; the classifier's peak gives the position and a status; the IoU-Net
refines the box from there; the frame becomes a training sample; every ``train_skipping`` frames
(and at once after a hard negative) the classifier's filter takes a few CG steps.

All geometry is done in continuous pixel coordinates (:mod:`ebmtrack.tracking.base`): the state
is the target centre and size in frame pixels; the crop's affine map converts to and from crop
pixels, where the classifier (stride ``s``: score cell ``i`` at pixel ``s * i``) and the IoU-Net
(boxes in crop pixels) work.
"""

from __future__ import annotations

import functools
import math
import time
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
from ebmtrack.models.backbones.int8 import int8_available
from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.models.precision import resolve_precision
from ebmtrack.ops.crop import apply_matrix
from ebmtrack.runtime import resolve_backbone_runtime
from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.tracking.atom.refine import ascend_iou
from ebmtrack.tracking.base import TrackResult, TrackStatus
from ebmtrack.tracking.box_refine import (
    blend_size,
    check_iou_net,
    fold_iou_net,
    jitter_proposals,
    select_box,
    window_test_features,
)
from ebmtrack.tracking.confidence import ConfidenceEstimator
from ebmtrack.tracking.features import feature_extractor
from ebmtrack.tracking.localize import best_scale
from ebmtrack.tracking.memory import SampleMemory
from ebmtrack.tracking.search_region import SearchRegionTracker

__all__ = ["AtomTracker", "normalize_features"]


def normalize_features(features: Tensor) -> Tensor:
    """Divide each sample (B, C, H, W) by its root mean square over C, H, W (reference
    ``normalize_power=2``), so that the classifier's regularisation means the same for every
    backbone and image."""
    power = features.pow(2).mean(dim=(1, 2, 3), keepdim=True)
    return features / (power + 1e-10).sqrt()


@dataclass
class _State:
    center: np.ndarray  # (2,) frame px
    size: np.ndarray  # (2,) frame px
    min_size: np.ndarray  # (2,)
    frame_index: int
    classifier: AtomClassifier
    memory: SampleMemory
    modulation: list[Tensor] | None


class AtomTracker(SearchRegionTracker):
    """ATOM behind the :class:`~ebmtrack.tracking.base.Tracker` interface.

    Args:
        backbone: a backbone from :func:`ebmtrack.models.backbones.create_backbone`; the
            classifier reads ``backbone.classifier_layer``, the IoU-Net ``default_layers``.
        iou_net: the offline-trained IoU predictor for this backbone; required when
            ``params.use_iou_net``.
        params: :class:`AtomParams`; its ``backbone`` name is informational here.
        calibrator: maps the per-frame features of :mod:`ebmtrack.tracking.confidence` to
            ``TrackResult.confidence``; None: the confidence is NaN.

    For speed the tracker runs private copies with BatchNorm folded in: the eager backbone via
    :func:`~ebmtrack.models.backbones.optimize_for_inference` (channels-last too) and the IoU-Net's
    per-frame layers via :func:`~ebmtrack.tracking.box_refine.fold_iou_net`, whose ascent takes
    closed-form gradients (:class:`~ebmtrack.tracking.iou_gradient.IoUGradient`). The same
    numbers up to float rounding; the modules passed in are only moved to ``device`` and set to
    eval mode.

    After each :meth:`track` call, ``last_timings`` holds the seconds spent in ``crop`` (search
    region), ``backbone``, ``classifier`` (scores and localisation), ``iou`` (box
    refinement), ``update`` (memory and filter training) and ``confidence``; on CUDA they include no
    synchronisation, so they are CPU-side times. ``confidence_estimator.last_features`` holds
    the frame's confidence features.
    """

    name = "atom"

    def __init__(
        self,
        backbone: Backbone,
        iou_net: AtomIoUNet | None = None,
        params: AtomParams | None = None,
        calibrator=None,
    ) -> None:
        self.params = params = params or AtomParams()
        self.confidence_estimator = ConfidenceEstimator(calibrator)
        self.device = torch.device(params.device)
        self.dtype = resolve_precision(params.precision, self.device)
        self.backbone = backbone.to(self.device).eval()
        self.classifier_layer = backbone.classifier_layer
        info = backbone.feature_info[self.classifier_layer]
        self.stride = info.stride
        self.classifier_config = ClassifierConfig(
            in_channels=info.channels,
            projection_dim=params.projection_dim,
            filter_size=params.filter_size,
            pelu_alpha=params.pelu_alpha,
            filter_reg=params.filter_reg,
            projection_reg=params.projection_reg,
        )
        self.map_size = math.ceil(params.search_size / self.stride)
        if params.use_iou_net and iou_net is None:
            raise ValueError("use_iou_net=True needs an iou_net (or pass use_iou_net=False)")
        self.iou_net = iou_net.to(self.device).eval() if params.use_iou_net else None
        self.iou_layers: tuple[str, str] = tuple(backbone.default_layers)
        if self.iou_net is not None:
            check_iou_net(self.iou_net, backbone, self.iou_layers)
        # Per-frame copy with BatchNorm folded (the reference branch runs once, on iou_net).
        self._iou_head = fold_iou_net(self.iou_net) if self.iou_net is not None else None
        layers = (
            (*self.iou_layers, self.classifier_layer) if self.iou_net else (self.classifier_layer,)
        )
        self.layers = tuple(dict.fromkeys(layers))
        # auto: int8 where ranges ship for these weights (docs/results/speed.md), for the
        # classifier alone: box heads were trained and measured on float32 features only.
        self.backbone_runtime = resolve_backbone_runtime(
            params.backbone_runtime,
            self.device,
            self.dtype,
            int8=self.iou_net is None and functools.partial(int8_available, self.backbone),
        )
        self._extract = feature_extractor(
            self.backbone, self.layers, self.backbone_runtime, self.dtype
        )
        self.last_timings: dict[str, float] = {}
        self._side_factors = (1.0, *params.scale_factors)
        self._image = torch.empty(
            len(self._side_factors), 3, params.search_size, params.search_size, device=self.device
        )
        self._state: _State | None = None

    # ------------------------------------------------------------------ geometry helpers
    def _labels(self, centers_px: np.ndarray) -> Tensor:
        """Gaussian labels (N, H, W) for target centres (N, 2) in crop pixels."""
        sigma = self.params.sigma_factor * self.params.search_size / self.params.search_area_scale
        centers = torch.as_tensor(centers_px / self.stride, dtype=torch.float32, device=self.device)
        return gaussian_labels(centers, sigma / self.stride, (self.map_size, self.map_size))

    # ------------------------------------------------------------------ tracker interface
    def initialize(self, frame: np.ndarray, box: np.ndarray) -> None:
        """Learn the classifier on the augmented first frame and the IoU-Net's modulation."""
        params = self.params
        first = self._first_frame(frame, box, normalize_features)
        feats, samples, centers, size = first.feats, first.samples, first.centers, first.size
        generator = first.generator
        modulation = None
        if self.iou_net is not None:
            with torch.no_grad():
                ref_size = size * params.search_size / first.side
                ref_box = np.concatenate([centers[0] - ref_size / 2, ref_size])
                ref_box = torch.as_tensor(ref_box, dtype=torch.float32, device=self.device)
                ref_feats = [feats[layer][:1] for layer in self.iou_layers]
                modulation = self.iou_net.modulation(ref_feats, ref_box[None])
        labels = self._labels(centers)
        weights = torch.full((samples.shape[0],), 1.0 / samples.shape[0], device=self.device)
        classifier = AtomClassifier(self.classifier_config, generator=generator).to(self.device)
        fit_classifier(
            classifier,
            samples,
            labels,
            weights,
            gn_iters=params.init_gn_iters,
            cg_iters=params.init_cg_iters,
        )
        with torch.no_grad():
            projected = classifier.project(samples)
        self._start(first, _State, projected, labels, classifier=classifier, modulation=modulation)
        self.confidence_estimator.reset()

    def _frame_factors(self) -> tuple[float, ...]:
        # Frame t (the first tracked one is 2) searches scale when (t - 2) % interval == 0.
        previous = self._state.frame_index if self._state is not None else 1
        search = (previous - 1) % self.params.scale_search_interval == 0
        return self._side_factors if search else (1.0,)

    def _finish(self, state, frame, regions, feats, timings) -> TrackResult:
        """The frame after the backbone (:meth:`SearchRegionTracker._finish`): classifier,
        scale, the IoU-Net's box, the memory and filter update."""
        params = self.params
        factors = tuple(region.factor for region in regions)
        tic = time.perf_counter()
        with torch.inference_mode():
            projected = state.classifier.project(normalize_features(feats[self.classifier_layer]))
            scores = state.classifier.score(projected)  # (regions, H, W)
            peaks = scores.flatten(1).amax(dim=1).tolist()
            best, factor = best_scale(factors, peaks)
            region, projected = regions[best], projected[best : best + 1]
            matrix, scale = region.matrix, region.scale  # scale: crop px per frame px
            target_crop = state.size * scale
            found = self._localize(scores[best], self.stride, target_crop)
        toc = time.perf_counter()
        timings["classifier"], tic = toc - tic, toc

        status = found.status
        timings["iou"] = 0.0
        reported = None  # the box reported where it is not the state's (iou_box_feedback)
        if status != TrackStatus.NOT_FOUND:
            center_crop = np.asarray(found.position, dtype=np.float64)
            refine = status != TrackStatus.UNCERTAIN or params.update_scale_when_uncertain
            if factor != 1.0 and refine:  # the size follows the best-fitting region's scale
                state.size = blend_size(state.size, state.size * factor, params.size_update_rate)
            inverse = _invert(matrix)
            if self.iou_net is not None and refine:
                region_feats = {layer: feats[layer][best : best + 1] for layer in self.iou_layers}
                refined = self._refine_box(region_feats, center_crop, state.size * scale)
                margin = params.iou_accept_margin
                if refined is not None and (margin is None or refined[1] >= margin):
                    box_crop = refined[0]
                    box_center = box_crop[:2] + box_crop[2:] / 2
                    if params.iou_box_feedback:
                        center_crop = box_center
                        state.size = blend_size(
                            state.size, box_crop[2:] / scale, params.size_update_rate
                        )
                    else:  # reported only: the state keeps the scale search's box
                        size = box_crop[2:] / scale
                        reported = np.concatenate(
                            [apply_matrix(inverse, box_center) - size / 2, size]
                        )
            state.center = apply_matrix(inverse, center_crop)
            self._clamp_state(state, frame.shape)
            toc = time.perf_counter()
            timings["iou"], tic = toc - tic, toc
            if status in (TrackStatus.NORMAL, TrackStatus.HARD_NEGATIVE):
                # The sample is this crop; its label sits at the new target centre in it.
                label = self._labels(apply_matrix(matrix, state.center)[None])[0]
                learning_rate = (
                    params.hard_negative_learning_rate
                    if status == TrackStatus.HARD_NEGATIVE
                    else params.learning_rate
                )
                state.memory.add(projected[0], label, learning_rate)
        scheduled = (state.frame_index - 1) % params.train_skipping == 0
        if status == TrackStatus.HARD_NEGATIVE or scheduled:
            update_filter(
                state.classifier,
                *state.memory.training_set(),
                params.update_cg_iters,
                product_dtype=self.dtype,
            )
        timings["update"] = time.perf_counter() - tic
        # The confidence reads what the frame computed and changes nothing.
        confidence = self.confidence_estimator(
            scores[best], found, params.search_size, target_crop, peaks
        )
        timings["confidence"] = self.confidence_estimator.last_seconds
        box = self._box(state) if reported is None else reported
        return TrackResult(box, found.score, status, confidence)

    def _refine_box(
        self, feats: dict[str, Tensor], center: np.ndarray, size: np.ndarray
    ) -> tuple[np.ndarray, float] | None:
        """IoU-Net refinement of the box at ``center``, ``size`` (crop px): the refined box
        (xywh crop px) and the head's predicted gain (the mean predicted IoU of its best
        ``iou_top_k`` boxes minus that of the start box, before the ascent); None where no box
        passes :func:`select_box`."""
        params = self.params
        box = torch.tensor([*(center - size / 2), *size], dtype=torch.float32)
        generator = self._proposal_generator()
        proposals = jitter_proposals(
            box,
            params.num_random_proposals,
            params.proposal_center_jitter,
            params.proposal_size_jitter,
            generator,
        ).to(self.device)
        test_features, offset = window_test_features(
            self._iou_head,
            [feats[layer] for layer in self.iou_layers],
            proposals,
            0.25 * float(size.max()),
        )
        start_ious: list[Tensor] = []
        boxes, ious = ascend_iou(
            self._iou_head,
            self._state.modulation,
            test_features,
            proposals - offset,
            params.iou_steps,
            params.iou_step_length,
            closed_form=True,
            start_ious=start_ious,
        )
        best = select_box(boxes + offset, ious, params.iou_top_k, params.max_aspect_ratio)
        if best is None:
            return None
        # The start box is proposal 0; its predicted IoU comes from the ascent's first step.
        top = torch.topk(ious, min(params.iou_top_k, ious.numel())).values.mean()
        return best.double().cpu().numpy(), float(top) - float(start_ious[0][0])


def _invert(matrix: np.ndarray) -> np.ndarray:
    """Inverse of an affine (2, 3) map."""
    linear_inv = np.linalg.inv(matrix[:, :2])
    return np.concatenate([linear_inv, -(linear_inv @ matrix[:, 2])[:, None]], axis=1)
