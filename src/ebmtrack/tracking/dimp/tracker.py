"""The DiMP-NCE+ tracker (BMVC 2020 section 5): DiMP's classifier + an EBM box head.

Per frame, as ATOM (:mod:`ebmtrack.tracking.atom.tracker`) but with DiMP's classifier:

1. one square search region of ``search_area_scale`` times the target's size around the previous
   position, resized to ``search_size``; one backbone pass feeds both heads;
2. the target filter, predicted by DiMP's meta-learned model optimizer
   (:class:`~ebmtrack.models.dimp.DiMPClassifier`), scores every location; the peak gives the
   position and a status (ATOM's localisation: normal, uncertain, hard negative, not found);
3. unless the target is lost, the box is refined from the located position by gradient ascent on
   the EBM head's f(x, y) (Algorithm S1, :mod:`ebmtrack.tracking.dimp.refine`);
4. normal and hard-negative frames enter the sample memory with their box; the filter takes
   ``update_iters`` optimizer steps every ``train_skipping`` frames, ``hard_negative_iters`` right
   after a hard negative. Lost and uncertain frames change nothing (reference ``update_flag``).

The first frame: ATOM's augmentations of the target crop (shifts, flip, blurs, rotations) plus
channel dropout on the classification features; the filter initializer pools the target from all
of them and the model optimizer takes ``init_iters`` steps; the box head's modulation comes from
the unaugmented crop. Geometry as ATOM: continuous frame pixels, crops with exact affine maps.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.dimp import DiMPClassifier
from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.ops.crop import box_from_crop, box_to_crop
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
from ebmtrack.tracking.dimp.params import DiMPParams
from ebmtrack.tracking.dimp.refine import FrameBoxEnergy, ascend_boxes
from ebmtrack.tracking.features import feature_extractor
from ebmtrack.tracking.iou_gradient import IoUGradient
from ebmtrack.tracking.memory import SampleMemory
from ebmtrack.tracking.search_region import SearchRegionTracker

__all__ = ["DiMPTracker"]


@dataclass
class _State:
    center: np.ndarray  # (2,) frame px
    size: np.ndarray  # (2,) frame px
    min_size: np.ndarray  # (2,)
    frame_index: int
    filter: Tensor  # (1, D, k, k)
    memory: SampleMemory  # classification features (D, H, W) with their target box (4,)
    modulation: list[Tensor] | None


class DiMPTracker(SearchRegionTracker):
    """DiMP-NCE+ behind the :class:`~ebmtrack.tracking.base.Tracker` interface.

    Args:
        backbone: a backbone from :func:`ebmtrack.models.backbones.create_backbone`; the
            classifier reads ``backbone.classifier_layer``, the box head ``default_layers``.
        classifier: DiMP's target classifier for this backbone's classifier layer.
        box_head: the IoU-Net trained as an EBM (any loss of :data:`ebmtrack.ebm.LOSSES`);
            required when ``params.use_box_head``.
        params: :class:`DiMPParams`; its ``backbone`` name is informational here.
        calibrator: maps the per-frame features of :mod:`ebmtrack.tracking.confidence` to
            ``TrackResult.confidence``; None: the confidence is NaN.

    The modules are moved to ``device`` and set to eval mode; the box head runs as a private
    BatchNorm-folded copy (:func:`~ebmtrack.tracking.box_refine.fold_iou_net`), the backbone as
    ATOM's (:func:`~ebmtrack.tracking.features.feature_extractor`). After each :meth:`track`
    call ``last_timings`` holds the seconds spent in ``crop``, ``backbone``, ``classifier``
    (features, scores, localisation), ``box`` (refinement), ``update`` (memory, filter) and
    ``confidence``; ``confidence_estimator.last_features`` holds the frame's confidence features.
    """

    name = "dimp-nce+"

    def __init__(
        self,
        backbone: Backbone,
        classifier: DiMPClassifier,
        box_head: AtomIoUNet | None = None,
        params: DiMPParams | None = None,
        calibrator=None,
    ) -> None:
        self.params = params = params or DiMPParams()
        self.confidence_estimator = ConfidenceEstimator(calibrator)
        self._box_value = math.nan  # the box head's value at its last box (for the confidence)
        self.device = torch.device(params.device)
        self.backbone = backbone.to(self.device).eval()
        self.classifier_layer = backbone.classifier_layer
        self._check_classifier(backbone, classifier)
        self.classifier = classifier.to(self.device).eval().requires_grad_(False)
        self.stride = classifier.config.stride
        self.filter_size = classifier.config.filter_size
        if params.use_box_head and box_head is None:
            raise ValueError("use_box_head=True needs a box_head (or pass use_box_head=False)")
        self.box_head = box_head.to(self.device).eval() if params.use_box_head else None
        self.box_layers: tuple[str, str] = tuple(backbone.default_layers)
        if self.box_head is not None:
            check_iou_net(self.box_head, backbone, self.box_layers)
        self._box_head = fold_iou_net(self.box_head) if self.box_head is not None else None
        layers = (*self.box_layers, self.classifier_layer) if self.box_head else ()
        self.layers = tuple(dict.fromkeys((*layers, self.classifier_layer)))
        self._extract = feature_extractor(self.backbone, self.layers, params.backbone_runtime)
        self.last_timings: dict[str, float] = {}
        self._image = torch.empty(1, 3, params.search_size, params.search_size, device=self.device)
        self._state: _State | None = None

    def _check_classifier(self, backbone: Backbone, classifier: DiMPClassifier) -> None:
        config = classifier.config
        info = backbone.feature_info[self.classifier_layer]
        if config.feature_layer not in (None, self.classifier_layer) or (
            config.in_channels,
            config.stride,
        ) != (info.channels, info.stride):
            raise ValueError(
                f"the DiMP classifier reads {config.in_channels} channels at stride "
                f"{config.stride} (layer {config.feature_layer!r} of {config.backbone!r}); "
                f"backbone {backbone.name!r} layer {self.classifier_layer!r} gives "
                f"{info.channels} at {info.stride}"
            )

    # ------------------------------------------------------------------ geometry helpers
    def _boxes_tensor(self, boxes: np.ndarray) -> Tensor:
        return torch.as_tensor(boxes, dtype=torch.float32, device=self.device)

    # ------------------------------------------------------------------ tracker interface
    def initialize(self, frame: np.ndarray, box: np.ndarray) -> None:
        """Predict the filter from the augmented first frame; the box head's modulation."""
        params = self.params
        first = self._first_frame(frame, box, self.classifier.extract_features)
        feats, samples, centers, size = first.feats, first.samples, first.centers, first.size
        crop_size = size * params.search_size / first.side
        with torch.no_grad():
            boxes = self._boxes_tensor(
                np.concatenate(
                    [centers - crop_size / 2, np.broadcast_to(crop_size, centers.shape)], 1
                )
            )
            target_filter = self.classifier.initialize_filter(samples[:, None], boxes[:, None])
            if params.init_iters:
                iterates, _ = self.classifier.optimize_filter(
                    target_filter, samples[:, None], boxes[:, None], params.init_iters
                )
                target_filter = iterates[-1]
            modulation = None
            if self.box_head is not None:
                ref_feats = [feats[layer][:1] for layer in self.box_layers]
                modulation = self.box_head.modulation(ref_feats, boxes[:1])
        self._start(first, _State, samples, boxes, filter=target_filter, modulation=modulation)
        self.confidence_estimator.reset()

    def _finish(self, state, frame, regions, feats, timings) -> TrackResult:
        """The frame after the backbone (:meth:`SearchRegionTracker._finish`): classifier, box
        head, the memory and filter update. The features come without autograd history, not
        as inference tensors: the refinement's autograd reads them."""
        params = self.params
        (region,) = regions
        matrix, scale = region.matrix, region.scale  # scale: crop px per frame px
        tic = time.perf_counter()
        with torch.no_grad():
            sample = self.classifier.extract_features(feats[self.classifier_layer])
            scores = self.classifier.classify(state.filter, sample[:, None])[0, 0]
            target_crop = state.size * scale
            found = self._localize(scores, self.stride, target_crop)
        toc = time.perf_counter()
        timings["classifier"], tic = toc - tic, toc

        status = found.status
        timings["box"] = 0.0
        self._box_value = math.nan
        if status != TrackStatus.NOT_FOUND:
            # Score cell i sits at pixel stride * i for an even filter, half a cell on for odd.
            center_crop = np.asarray(found.position) + self.stride * (self.filter_size % 2) / 2
            box_crop = np.concatenate([center_crop - state.size * scale / 2, state.size * scale])
            refine = status != TrackStatus.UNCERTAIN or params.update_scale_when_uncertain
            if self.box_head is not None and refine:
                refined = self._refine_box(feats, box_crop)
                box_crop = box_crop if refined is None else refined
            new_box = box_from_crop(box_crop, matrix)
            state.center = new_box[:2] + new_box[2:] / 2
            state.size = blend_size(state.size, new_box[2:], params.size_update_rate)
            self._clamp_state(state, frame.shape)
            toc = time.perf_counter()
            timings["box"], tic = toc - tic, toc
            if status in (TrackStatus.NORMAL, TrackStatus.HARD_NEGATIVE):
                self._update(sample[0], box_to_crop(self._box(state), matrix), status)
        timings["update"] = time.perf_counter() - tic
        # The confidence reads what the frame computed and changes nothing.
        confidence = self.confidence_estimator(
            scores, found, params.search_size, target_crop, head_value=self._box_value
        )
        timings["confidence"] = self.confidence_estimator.last_seconds
        return TrackResult(self._box(state), found.score, status, confidence)

    def _update(self, sample: Tensor, box_crop: np.ndarray, status: TrackStatus) -> None:
        """Store the frame's sample with its target box; run the optimizer if it is due."""
        params, state = self.params, self._state
        hard = status == TrackStatus.HARD_NEGATIVE
        learning_rate = params.hard_negative_learning_rate if hard else params.learning_rate
        state.memory.add(sample, self._boxes_tensor(box_crop), learning_rate)
        if hard:
            num_iter = params.hard_negative_iters
        elif (state.frame_index - 1) % params.train_skipping == 0:
            num_iter = params.update_iters
        else:
            return
        if num_iter:
            samples, boxes, weights = state.memory.training_set()
            with torch.no_grad():
                iterates, _ = self.classifier.optimize_filter(
                    state.filter, samples[:, None], boxes[:, None], num_iter, weights[:, None]
                )
            state.filter = iterates[-1]

    def _refine_box(self, feats: dict[str, Tensor], box: np.ndarray) -> np.ndarray | None:
        """EBM refinement of ``box`` (xywh crop px) -> xywh crop px, None if no box qualifies."""
        params = self.params
        start = torch.tensor(box, dtype=torch.float32)
        proposals = jitter_proposals(
            start,
            params.num_random_proposals,
            params.proposal_center_jitter,
            params.proposal_size_jitter,
            self._proposal_generator(),
        ).to(self.device)
        test_features, offset = window_test_features(
            self._box_head,
            [feats[layer] for layer in self.box_layers],
            proposals,
            # No margin beyond the window's two border cells (16 px at stride 8): the small EBM
            # steps stay inside (ATOM's 0.25 box sizes gave the same refinement on the training
            # sequences, at 1.2x the cost).
            margin=0.0,
        )
        with torch.no_grad():
            modulated = self._box_head.modulate(self._state.modulation, test_features)
        energy = FrameBoxEnergy(IoUGradient(self._box_head, modulated))
        boxes, values = ascend_boxes(
            energy,
            proposals - offset,
            start[2:].to(self.device),
            params.box_steps,
            params.box_step_length,
            params.box_step_rule,
            params.box_step_decay,
        )
        best = select_box(boxes + offset, values, params.box_top_k, params.max_aspect_ratio)
        if best is None:
            return None
        top = torch.topk(values.flatten(), min(params.box_top_k, values.numel())).values
        self._box_value = float(top.mean())
        return best.double().cpu().numpy()
