"""DiMP-NCE+'s box-estimator part: gradient ascent on the EBM head's f(x, y) from the
classifier's box (Algorithm S1, :mod:`ebmtrack.tracking.ebm_refine`), or the position alone."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor

from ebmtrack.lite.position import ClassifierEvidence
from ebmtrack.ops.crop import box_from_crop
from ebmtrack.tracking.box_head import BoxHead, ProposalConfig
from ebmtrack.tracking.box_refine import blend_size, select_box
from ebmtrack.tracking.composition import TargetState
from ebmtrack.tracking.ebm_refine import FrameBoxEnergy, ascend_boxes
from ebmtrack.tracking.iou_gradient import IoUGradient
from ebmtrack.tracking.search_region import Region

__all__ = [
    "BOX_ESTIMATORS",
    "BOX_MODES",
    "EBMAscentConfig",
    "EBMBoxEstimator",
    "KeptSizeBox",
    "SizeConfig",
]


@dataclass(frozen=True)
class SizeConfig:
    """How fast the box's size follows the estimate (``size_update_rate``)."""

    size_update_rate: float = 0.4


@dataclass(frozen=True)
class EBMAscentConfig:
    """The EBM head's ascent (fields of :class:`~ebmtrack.tracking.dimp.params.DiMPParams`):
    steps, step length, step rule and decay, boxes averaged, the aspect-ratio bound and the
    proposals it starts from."""

    box_steps: int = 5
    box_step_length: float = 2.5e-3
    box_step_rule: str = "s1"
    box_step_decay: float = 0.5
    box_top_k: int = 3
    max_aspect_ratio: float = 6.0
    proposals: ProposalConfig = field(default_factory=ProposalConfig)


class KeptSizeBox:
    """DiMP's ``position`` box estimator (:class:`~ebmtrack.tracking.composition.BoxEstimator`):
    the box at the classifier's position with the last size, the size damped by
    ``size_update_rate``."""

    needs_head: ClassVar[bool] = False
    configs: ClassVar[tuple[type, ...]] = (SizeConfig,)
    slots = 1

    def __init__(self, size: SizeConfig, head: BoxHead | None = None) -> None:
        self.size = size
        self.head = head
        self.layers: tuple[str, ...] = head.layers if head is not None else ()
        self.last_value = math.nan

    def side_factors(self, frame_index: int) -> tuple[float, ...]:
        return (1.0,)

    def start(self, frame: np.ndarray, center: np.ndarray, size: np.ndarray) -> None:
        """What it keeps of a new target: none."""
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
    ) -> None:
        scale = region.scale  # crop px per frame px
        box_crop = np.concatenate([position - state.size * scale / 2, state.size * scale])
        if refine:
            box_crop = self.refined(state, feats, box_crop)
        new_box = box_from_crop(box_crop, region.matrix)
        state.center = new_box[:2] + new_box[2:] / 2
        state.size = blend_size(state.size, new_box[2:], self.size.size_update_rate)
        return None

    def refined(self, state: TargetState, feats: dict[str, Tensor], box: np.ndarray) -> np.ndarray:
        """The box (xywh crop px) this estimator makes of the classifier's: itself."""
        return box


class EBMBoxEstimator(KeptSizeBox):
    """DiMP's ``refine`` box estimator: gradient ascent on the head's f(x, y) from the
    classifier's box at the last size (the box kept where no refined box qualifies), the new
    size damped by ``size_update_rate``."""

    needs_head = True
    configs = (SizeConfig, EBMAscentConfig)

    def __init__(self, size: SizeConfig, ascent: EBMAscentConfig, head: BoxHead) -> None:
        super().__init__(size, head)
        self.ascent = ascent

    def refined(self, state: TargetState, feats: dict[str, Tensor], box: np.ndarray) -> np.ndarray:
        refined = self.refine(state, feats, box)
        return box if refined is None else refined

    def refine(
        self, state: TargetState, feats: dict[str, Tensor], box: np.ndarray
    ) -> np.ndarray | None:
        """EBM refinement of ``box`` (xywh crop px) -> xywh crop px, None if no box qualifies;
        ``last_value`` the mean f of the ``box_top_k`` best boxes."""
        params, head = self.ascent, self.head
        start = torch.tensor(box, dtype=torch.float32)
        proposals = head.proposals(start, params.proposals, state.frame_index)
        # No margin beyond the window's two border cells (16 px at stride 8): the small EBM
        # steps stay inside (ATOM's 0.25 box sizes gave the same refinement on the training
        # sequences, at 1.2x the cost).
        test_features, offset = head.window(feats, proposals, margin=0.0)
        with torch.no_grad():
            modulated = head.folded.modulate(state.modulation, test_features)
        energy = FrameBoxEnergy(IoUGradient(head.folded, modulated))
        boxes, values = ascend_boxes(
            energy,
            proposals - offset,
            start[2:].to(head.device),
            params.box_steps,
            (params.box_step_length, params.box_step_length),
            params.box_step_rule,
            params.box_step_decay,
        )
        best = select_box(boxes + offset, values, params.box_top_k, params.max_aspect_ratio)
        if best is None:
            return None
        top = torch.topk(values.flatten(), min(params.box_top_k, values.numel())).values
        self.last_value = float(top.mean())
        return best.double().cpu().numpy()


BOX_ESTIMATORS: dict[str, type[KeptSizeBox]] = {"refine": EBMBoxEstimator, "position": KeptSizeBox}
"""DiMP's box estimator of each ``box_mode``."""

BOX_MODES = tuple(BOX_ESTIMATORS)
"""``refine``: the EBM head refines the classifier's box; ``position``: only the position moves,
the size is kept."""
