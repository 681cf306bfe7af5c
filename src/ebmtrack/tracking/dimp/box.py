"""DiMP-NCE+'s box-estimator part: gradient ascent on the EBM head's f(x, y) from the
classifier's box (Algorithm S1, :mod:`ebmtrack.tracking.dimp.refine`), or the position alone."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ebmtrack.ops.crop import box_from_crop
from ebmtrack.tracking.box_head import BoxHead
from ebmtrack.tracking.box_refine import blend_size, select_box
from ebmtrack.tracking.composition import TargetState
from ebmtrack.tracking.dimp.params import DiMPParams
from ebmtrack.tracking.dimp.refine import FrameBoxEnergy, ascend_boxes
from ebmtrack.tracking.iou_gradient import IoUGradient
from ebmtrack.tracking.search_region import Region

__all__ = ["EBMBoxEstimator"]


class EBMBoxEstimator:
    """DiMP's box estimator (:class:`~ebmtrack.tracking.composition.BoxEstimator`):
    ``box_mode="refine"`` ascends the head's f(x, y) from the classifier's box at the last
    size, ``position`` keeps the size; either way the new size is damped by
    ``size_update_rate``.

    Args:
        params: the tracker's parameters.
        head: the EBM box head, required exactly for ``refine``.
    """

    slots = 1

    def __init__(self, params: DiMPParams, head: BoxHead | None) -> None:
        if (head is not None) != (params.box_mode == "refine"):
            raise ValueError(
                "box_mode='refine' needs a box head"
                if head is None
                else "box_mode='position' reads no box head: pass none"
            )
        self.params = params
        self.head = head
        self.layers = head.layers if head is not None else ()
        self.last_value = math.nan

    def side_factors(self, frame_index: int) -> tuple[float, ...]:
        return (1.0,)

    def estimate(
        self,
        state: TargetState,
        position: np.ndarray,
        region: Region,
        factor: float,
        feats: dict[str, Tensor],
        refine: bool,
    ) -> None:
        scale = region.scale  # crop px per frame px
        box_crop = np.concatenate([position - state.size * scale / 2, state.size * scale])
        if self.head is not None and refine:
            refined = self.refine(state, feats, box_crop)
            box_crop = box_crop if refined is None else refined
        new_box = box_from_crop(box_crop, region.matrix)
        state.center = new_box[:2] + new_box[2:] / 2
        state.size = blend_size(state.size, new_box[2:], self.params.size_update_rate)
        return None

    def refine(
        self, state: TargetState, feats: dict[str, Tensor], box: np.ndarray
    ) -> np.ndarray | None:
        """EBM refinement of ``box`` (xywh crop px) -> xywh crop px, None if no box qualifies;
        ``last_value`` the mean f of the ``box_top_k`` best boxes."""
        params, head = self.params, self.head
        start = torch.tensor(box, dtype=torch.float32)
        proposals = head.proposals(start, params, state.frame_index)
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
            params.box_step_length,
            params.box_step_rule,
            params.box_step_decay,
        )
        best = select_box(boxes + offset, values, params.box_top_k, params.max_aspect_ratio)
        if best is None:
            return None
        top = torch.topk(values.flatten(), min(params.box_top_k, values.numel())).values
        self.last_value = float(top.mean())
        return best.double().cpu().numpy()
