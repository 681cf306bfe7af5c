"""ATOM's box-estimator part, one small class per ``box_mode`` (:data:`BOX_ESTIMATORS`): the
classifier's position alone, its scale search, the IoU-Net's ascent (:mod:`ebmtrack.tracking.
atom.refine`; or, with ``box_climb="ebm"``, DiMP-NCE+'s ascent on an energy-based head,
:mod:`ebmtrack.tracking.ebm_refine`), or the two combined, gated or polished.

Each class reads its own small configs (:class:`ScaleSearchConfig`, :class:`IoUAscentConfig`,
:class:`GateConfig`), filled from any tracker's parameters of the same field names
(:func:`~ebmtrack.tracking.params.part_config`);
:func:`~ebmtrack.tracking.composition.build_box_estimator` checks, once, that a mode gets exactly
the head it reads. A new mode is one class here and one entry of the
table; the modes that read a head or search scale, and the fields each mode reads, follow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from ebmtrack.lite.position import (
    ClassifierEvidence,
    PositionRuleConfig,
    bounded_size,
    classifier_prior,
)
from ebmtrack.lite.siamese import SiameseBoxConfig
from ebmtrack.ops.crop import apply_matrix, invert_affine
from ebmtrack.tracking.atom.refine import ascend_iou
from ebmtrack.tracking.box_head import BoxHead, ProposalConfig
from ebmtrack.tracking.box_refine import blend_size, select_box
from ebmtrack.tracking.composition import TargetState
from ebmtrack.tracking.ebm_refine import FrameBoxEnergy, ascend_boxes
from ebmtrack.tracking.iou_gradient import IoUGradient
from ebmtrack.tracking.search_region import SIAMESE_LAYER, Region
from ebmtrack.tracking.siamese import shipped_siamese

__all__ = [
    "BOX_CLIMBS",
    "BOX_ESTIMATORS",
    "BOX_MODES",
    "HEAD_MODES",
    "SCALE_MODES",
    "GateConfig",
    "GatedBox",
    "IoUAscentConfig",
    "PolishedBox",
    "PositionBox",
    "RefineBox",
    "ScaleBox",
    "ScaleSearchConfig",
    "SiameseBox",
    "SiameseOnePassBox",
    "SiamesePolishedBox",
    "SiameseScaleBox",
    "invert_affine",
]


@dataclass(frozen=True)
class ScaleSearchConfig:
    """The classifier's scale search (fields of :class:`~ebmtrack.tracking.atom.params.
    AtomParams`): side factors of the extra regions, how often to search, the size's damping."""

    scale_factors: tuple[float, ...] = (1 / 1.05, 1.05)
    scale_search_interval: int = 1
    size_update_rate: float = 1.0


BOX_CLIMBS = ("iou", "ebm")
"""How the box head's output is climbed: ``iou``, ATOM's ascent on the predicted IoU (steps times
w, h in crop pixels, :func:`~ebmtrack.tracking.atom.refine.ascend_iou`); ``ebm``, DiMP-NCE+'s
ascent on f(x, y) in y = (cx / w0, cy / h0, log w, log h), Algorithm S1
(:func:`~ebmtrack.tracking.ebm_refine.ascend_boxes`), the climb of a head trained as an EBM
(NCE+, KLD, ML)."""


@dataclass(frozen=True)
class IoUAscentConfig:
    """The box head's ascent: how it climbs, steps, the IoU climb's step length (times w, h), the
    EBM climb's step length and decay, boxes averaged, the aspect-ratio bound, the size's damping
    and the proposals it starts from."""

    box_climb: str = "iou"
    box_steps: int = 5
    box_step_length: float = 1.0
    ebm_step_length: float = 2.5e-3
    box_step_decay: float = 0.5
    box_top_k: int = 3
    max_aspect_ratio: float = 6.0
    size_update_rate: float = 1.0
    proposals: ProposalConfig = field(default_factory=ProposalConfig)


@dataclass(frozen=True)
class GateConfig:
    """``gated``: the head's box is taken where its predicted gain is at least this."""

    box_accept_margin: float = 0.1


def _to_frame(region: Region, point: np.ndarray) -> np.ndarray:
    return apply_matrix(invert_affine(region.matrix), point)


def _frame_box(region: Region, box_crop: np.ndarray) -> np.ndarray:
    """A box (x, y, w, h) in crop px of ``region`` as a box in frame px."""
    size = box_crop[2:] / region.scale
    center = _to_frame(region, box_crop[:2] + box_crop[2:] / 2)
    return np.concatenate([center - size / 2, size])


class PositionBox:
    """``position``: the centre moves to the classifier's position, the size is kept
    (:class:`~ebmtrack.tracking.composition.BoxEstimator`)."""

    needs_head: ClassVar[bool] = False
    configs: ClassVar[tuple[type, ...]] = ()
    last_value = math.nan  # the confidence reads no head value of ATOM's
    slots = 1

    def __init__(self, head: BoxHead | None = None) -> None:
        self.head = head
        self.layers: tuple[str, ...] = head.layers if head is not None else ()

    def side_factors(self, frame_index: int) -> tuple[float, ...]:
        return (1.0,)

    def start(self, frame: np.ndarray, center: np.ndarray, size: np.ndarray) -> Any:
        """What this estimator keeps of a new target (:attr:`TargetState.box_model`): none."""
        return None

    def estimate(
        self,
        state: TargetState,
        position: np.ndarray,
        region: Region,
        factor: float,
        feats: dict[str, Tensor],
        refine: bool,
        frame: np.ndarray,
        evidence: ClassifierEvidence | None = None,
    ) -> np.ndarray | None:
        state.center = _to_frame(region, position)
        return None


class ScaleBox(PositionBox):
    """``scale``: the size follows the scale search (the region whose peak is highest, the scale
    interpolated between the peaks), damped by ``size_update_rate``."""

    configs = (ScaleSearchConfig,)

    def __init__(self, scale: ScaleSearchConfig, head: BoxHead | None = None) -> None:
        super().__init__(head)
        self.scale = scale
        self.factors = (1.0, *scale.scale_factors)
        self.slots = len(self.factors)

    def side_factors(self, frame_index: int) -> tuple[float, ...]:
        # Frame t (the first tracked one is 2) searches scale when (t - 2) % interval == 0.
        search = (frame_index - 1) % self.scale.scale_search_interval == 0
        return self.factors if search else (1.0,)

    def resize(self, state: TargetState, factor: float, refine: bool) -> None:
        """The size follows the best-fitting region's scale."""
        if factor != 1.0 and refine:
            state.size = blend_size(state.size, state.size * factor, self.scale.size_update_rate)

    def estimate(
        self, state, position, region, factor, feats, refine, frame, evidence=None
    ) -> np.ndarray | None:
        self.resize(state, factor, refine)
        return super().estimate(state, position, region, factor, feats, refine, frame)


class _Ascent:
    """The IoU-Net's refinement, shared by the modes with a head."""

    ascent: IoUAscentConfig
    head: BoxHead

    def refine(
        self, state: TargetState, feats: dict[str, Tensor], center: np.ndarray, size: np.ndarray
    ) -> tuple[np.ndarray, float] | None:
        """The head's refinement of the box at ``center``, ``size`` (crop px): the refined box
        (xywh crop px) and the head's predicted gain (the mean head output of its best
        ``box_top_k`` boxes minus that of the start box, before the ascent: predicted IoU, or f
        with ``box_climb="ebm"``); None where no box passes
        :func:`~ebmtrack.tracking.box_refine.select_box`."""
        config, head = self.ascent, self.head
        box = torch.tensor([*(center - size / 2), *size], dtype=torch.float32)
        proposals = head.proposals(box, config.proposals, state.frame_index)
        test_features, offset = head.window(feats, proposals, 0.25 * float(size.max()))
        climb = self._climb_ebm if config.box_climb == "ebm" else self._climb_iou
        boxes, values, start = climb(state, test_features, proposals - offset)
        best = select_box(boxes + offset, values, config.box_top_k, config.max_aspect_ratio)
        if best is None:
            return None
        # The start box is proposal 0.
        top = torch.topk(values, min(config.box_top_k, values.numel())).values.mean()
        return best.double().cpu().numpy(), float(top) - start

    def _climb_iou(
        self, state: TargetState, test_features: list[Tensor], proposals: Tensor
    ) -> tuple[Tensor, Tensor, float]:
        config = self.ascent
        start_ious: list[Tensor] = []  # the start box's IoU comes from the ascent's first step
        boxes, ious = ascend_iou(
            self.head.folded,
            state.modulation,
            test_features,
            proposals,
            config.box_steps,
            config.box_step_length,
            closed_form=True,
            start_ious=start_ious,
        )
        return boxes, ious, float(start_ious[0][0])

    def _climb_ebm(
        self, state: TargetState, test_features: list[Tensor], proposals: Tensor
    ) -> tuple[Tensor, Tensor, float]:
        config, folded = self.ascent, self.head.folded
        with torch.no_grad():
            score = IoUGradient(folded, folded.modulate(state.modulation, test_features))
            start = float(score(proposals[:1], need_grad=False)[0][0])
        length = config.ebm_step_length
        boxes, values = ascend_boxes(
            FrameBoxEnergy(score),
            proposals,
            proposals[0, 2:],  # (w0, h0): the start box's size, as DiMP-NCE+'s
            config.box_steps,
            (length, length),
            "s1",
            config.box_step_decay,
        )
        return boxes, values.flatten(), start

    def take(self, state: TargetState, box_crop: np.ndarray, scale: float) -> np.ndarray:
        """The head's box becomes the state's size (damped); returns its centre in crop px."""
        state.size = blend_size(state.size, box_crop[2:] / scale, self.ascent.size_update_rate)
        return box_crop[:2] + box_crop[2:] / 2


class RefineBox(_Ascent, PositionBox):
    """``refine`` (ATOM): the IoU-Net's ascent from the classifier's box gives centre and
    size. Where ``size_update_rate`` < 1 damps the size the state carries to the next frame,
    the frame's reported box is the head's own (undamped)."""

    needs_head = True
    configs = (IoUAscentConfig,)

    def __init__(self, ascent: IoUAscentConfig, head: BoxHead) -> None:
        PositionBox.__init__(self, head)
        self.ascent = ascent

    def estimate(
        self, state, position, region, factor, feats, refine, frame, evidence=None
    ) -> np.ndarray | None:
        center_crop, reported = position, None
        if refine:
            refined = self.refine(state, feats, position, state.size * region.scale)
            if refined is not None:
                center_crop = self.take(state, refined[0], region.scale)
                if self.ascent.size_update_rate != 1.0:
                    reported = _frame_box(region, refined[0])
        state.center = _to_frame(region, center_crop)
        return reported


class GatedBox(_Ascent, ScaleBox):
    """``gated``: the scale search sizes the box; the IoU-Net's box replaces it where the head
    predicts a gain of at least ``box_accept_margin``."""

    needs_head = True
    configs = (ScaleSearchConfig, IoUAscentConfig, GateConfig)

    def __init__(
        self, scale: ScaleSearchConfig, ascent: IoUAscentConfig, gate: GateConfig, head: BoxHead
    ) -> None:
        ScaleBox.__init__(self, scale, head)
        self.ascent, self.gate = ascent, gate

    def estimate(
        self, state, position, region, factor, feats, refine, frame, evidence=None
    ) -> np.ndarray | None:
        self.resize(state, factor, refine)
        center_crop = position
        if refine:
            refined = self.refine(state, feats, position, state.size * region.scale)
            if refined is not None and refined[1] >= self.gate.box_accept_margin:
                center_crop = self.take(state, refined[0], region.scale)
        state.center = _to_frame(region, center_crop)
        return None


class PolishedBox(_Ascent, ScaleBox):
    """``polished``: the scale search moves the state; the IoU-Net's box is reported only."""

    needs_head = True
    configs = (ScaleSearchConfig, IoUAscentConfig)

    def __init__(self, scale: ScaleSearchConfig, ascent: IoUAscentConfig, head: BoxHead) -> None:
        ScaleBox.__init__(self, scale, head)
        self.ascent = ascent

    def estimate(
        self, state, position, region, factor, feats, refine, frame, evidence=None
    ) -> np.ndarray | None:
        self.resize(state, factor, refine)
        reported = None
        if refine:
            refined = self.refine(state, feats, position, state.size * region.scale)
            if refined is not None:
                reported = _frame_box(region, refined[0])
        state.center = _to_frame(region, position)
        return reported


class SiameseBox(PositionBox):
    """``siamese``: a tracking-trained box estimator (NanoTrack v2's networks,
    :mod:`ebmtrack.lite.siamese`) decodes the target's box in a crop centred on the classifier's
    position; its centre and (smoothed) size become the state. Where the classifier is uncertain
    (``refine`` False) only the position moves."""

    configs = (SiameseBoxConfig, PositionRuleConfig)

    def __init__(
        self, siamese: SiameseBoxConfig, rule: PositionRuleConfig, head: BoxHead | None = None
    ) -> None:
        super().__init__(head)
        self.siamese = shipped_siamese(siamese)
        self.rule = rule

    def start(self, frame: np.ndarray, center: np.ndarray, size: np.ndarray) -> np.ndarray:
        """The target's template features (1, 48, 8, 8)."""
        return self.siamese.template(frame, center, size)

    def estimate(
        self, state, position, region, factor, feats, refine, frame, evidence=None
    ) -> np.ndarray | None:
        state.center = _to_frame(region, position)
        if refine:
            prior = classifier_prior(evidence, self.rule.classifier_weight)
            found = self.siamese.locate(frame, state.center, state.size, state.box_model, prior)
            state.size = bounded_size(found.size, state.size, evidence, self.rule)
            state.center, state.box_score = found.center, found.score
        return None


class SiameseOnePassBox(SiameseBox):
    """``siamese`` with one backbone pass (``classifier_features="siamese"``): the region is
    the siamese estimator's own search crop (:class:`~ebmtrack.tracking.search_region.
    SiameseSearchRegion`), and its head decodes the features the classifier read
    (:meth:`~ebmtrack.lite.siamese.SiameseBoxEstimator.decode`), its window centred on the
    classifier's position instead of the crop's centre."""

    def __init__(
        self, siamese: SiameseBoxConfig, rule: PositionRuleConfig, head: BoxHead | None = None
    ) -> None:
        super().__init__(siamese, rule, head)
        self.layers = (SIAMESE_LAYER,)

    def estimate(
        self, state, position, region, factor, feats, refine, frame, evidence=None
    ) -> np.ndarray | None:
        crop_center = state.center  # the region was cropped around it
        state.center = _to_frame(region, position)
        if refine:
            found = self.siamese.decode(
                feats[SIAMESE_LAYER].detach().cpu().numpy(),
                state.box_model,
                crop_center,
                state.size,
                region.scale,
                classifier_prior(evidence, self.rule.classifier_weight),
                window_center=state.center,
            )
            state.size = bounded_size(found.size, state.size, evidence, self.rule)
            state.center, state.box_score = found.center, found.score
        return None


class SiameseScaleBox(SiameseBox):
    """``siamese-scale``: ``siamese``, and the classifier's scale search (regions cropped
    ``scale_factors`` wider) bounds the siamese box's change of scale
    (:func:`~ebmtrack.lite.position.bounded_size`)."""

    configs = (SiameseBoxConfig, PositionRuleConfig, ScaleSearchConfig)

    def __init__(
        self,
        siamese: SiameseBoxConfig,
        rule: PositionRuleConfig,
        scale: ScaleSearchConfig,
        head: BoxHead | None = None,
    ) -> None:
        super().__init__(siamese, rule, head)
        self.scale = scale
        self.factors = (1.0, *scale.scale_factors)
        self.slots = len(self.factors)

    side_factors = ScaleBox.side_factors


class SiamesePolishedBox(_Ascent, SiameseBox):
    """``siamese-polished``: ``siamese`` tracks; the box head's ascent (``box_climb``) from the
    siamese box refines the box reported for the frame only."""

    needs_head = True
    configs = (SiameseBoxConfig, PositionRuleConfig, IoUAscentConfig)

    def __init__(
        self,
        siamese: SiameseBoxConfig,
        rule: PositionRuleConfig,
        ascent: IoUAscentConfig,
        head: BoxHead,
    ) -> None:
        SiameseBox.__init__(self, siamese, rule, head)
        self.ascent = ascent

    def estimate(
        self, state, position, region, factor, feats, refine, frame, evidence=None
    ) -> np.ndarray | None:
        SiameseBox.estimate(self, state, position, region, factor, feats, refine, frame, evidence)
        if not refine:
            return None
        center = apply_matrix(region.matrix, state.center)
        refined = self.refine(state, feats, center, state.size * region.scale)
        return None if refined is None else _frame_box(region, refined[0])


BOX_ESTIMATORS: dict[str, type[PositionBox]] = {
    "refine": RefineBox,
    "scale": ScaleBox,
    "position": PositionBox,
    "gated": GatedBox,
    "polished": PolishedBox,
    "siamese": SiameseBox,
    "siamese-polished": SiamesePolishedBox,
    "siamese-scale": SiameseScaleBox,
}
"""ATOM's box estimator of each ``box_mode``."""

BOX_MODES = tuple(BOX_ESTIMATORS)
HEAD_MODES = tuple(mode for mode, kind in BOX_ESTIMATORS.items() if kind.needs_head)
"""The modes whose IoU-Net estimates (part of) the box."""
SCALE_MODES = tuple(
    mode for mode, kind in BOX_ESTIMATORS.items() if ScaleSearchConfig in kind.configs
)
"""The modes whose classifier's scale search sizes the box."""
