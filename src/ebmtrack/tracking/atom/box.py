"""ATOM's box-estimator part, one kind per ``box_mode`` (:class:`~ebmtrack.tracking.atom.params.
AtomParams`): the classifier's scale search, the IoU-Net's ascent (:mod:`ebmtrack.tracking.
atom.refine`), or the two combined, gated or polished."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ebmtrack.ops.crop import apply_matrix, invert_affine
from ebmtrack.tracking.atom.params import HEAD_MODES, SCALE_MODES, AtomParams
from ebmtrack.tracking.atom.refine import ascend_iou
from ebmtrack.tracking.box_head import BoxHead
from ebmtrack.tracking.box_refine import blend_size, select_box
from ebmtrack.tracking.composition import TargetState
from ebmtrack.tracking.search_region import Region

__all__ = ["IoUBoxEstimator", "invert_affine"]


class IoUBoxEstimator:
    """ATOM's box estimator (:class:`~ebmtrack.tracking.composition.BoxEstimator`).

    ``params.box_mode``:

    - ``position``: the centre moves to the classifier's position, the size is kept;
    - ``scale``: the size follows the scale search (the region whose peak is highest, the
      scale interpolated between the peaks), damped by ``size_update_rate``;
    - ``refine`` (ATOM): the IoU-Net's ascent from the classifier's box gives centre and size;
    - ``gated``: the scale search sizes the box, the IoU-Net's box replaces it where the head
      predicts a gain of at least ``box_accept_margin``;
    - ``polished``: the scale search moves the state; the IoU-Net's box is reported only.

    Args:
        params: the tracker's parameters.
        head: the box head, required exactly by the modes with one (``HEAD_MODES``).
    """

    last_value = math.nan  # the confidence reads no head value of ATOM's

    def __init__(self, params: AtomParams, head: BoxHead | None) -> None:
        mode = params.box_mode
        if (head is not None) != (mode in HEAD_MODES):
            raise ValueError(
                f"box_mode={mode!r} needs an IoU-Net (a box head)"
                if head is None
                else f"box_mode={mode!r} reads no IoU-Net: pass none"
            )
        self.params = params
        self.head = head
        self.layers = head.layers if head is not None else ()
        self.factors = (1.0, *params.scale_factors) if mode in SCALE_MODES else (1.0,)
        self.slots = len(self.factors)

    def side_factors(self, frame_index: int) -> tuple[float, ...]:
        # Frame t (the first tracked one is 2) searches scale when (t - 2) % interval == 0.
        search = (frame_index - 1) % self.params.scale_search_interval == 0
        return self.factors if search else (1.0,)

    def estimate(
        self,
        state: TargetState,
        position: np.ndarray,
        region: Region,
        factor: float,
        feats: dict[str, Tensor],
        refine: bool,
    ) -> np.ndarray | None:
        params, scale = self.params, region.scale  # scale: crop px per frame px
        center_crop = position
        reported = None
        if factor != 1.0 and refine:  # the size follows the best-fitting region's scale
            state.size = blend_size(state.size, state.size * factor, params.size_update_rate)
        inverse = invert_affine(region.matrix)
        if self.head is not None and refine:
            refined = self.refine(state, feats, center_crop, state.size * scale)
            gated = params.box_mode == "gated"
            if refined is not None and (not gated or refined[1] >= params.box_accept_margin):
                box_crop = refined[0]
                box_center = box_crop[:2] + box_crop[2:] / 2
                if params.box_mode != "polished":  # the head's box becomes the state
                    center_crop = box_center
                    state.size = blend_size(
                        state.size, box_crop[2:] / scale, params.size_update_rate
                    )
                else:  # reported only: the state keeps the scale search's box
                    size = box_crop[2:] / scale
                    reported = np.concatenate([apply_matrix(inverse, box_center) - size / 2, size])
        state.center = apply_matrix(inverse, center_crop)
        return reported

    def refine(
        self, state: TargetState, feats: dict[str, Tensor], center: np.ndarray, size: np.ndarray
    ) -> tuple[np.ndarray, float] | None:
        """IoU-Net refinement of the box at ``center``, ``size`` (crop px): the refined box
        (xywh crop px) and the head's predicted gain (the mean predicted IoU of its best
        ``box_top_k`` boxes minus that of the start box, before the ascent); None where no box
        passes :func:`~ebmtrack.tracking.box_refine.select_box`."""
        params, head = self.params, self.head
        box = torch.tensor([*(center - size / 2), *size], dtype=torch.float32)
        proposals = head.proposals(box, params, state.frame_index)
        test_features, offset = head.window(feats, proposals, 0.25 * float(size.max()))
        start_ious: list[Tensor] = []
        boxes, ious = ascend_iou(
            head.folded,
            state.modulation,
            test_features,
            proposals - offset,
            params.box_steps,
            params.box_step_length,
            closed_form=True,
            start_ious=start_ious,
        )
        best = select_box(boxes + offset, ious, params.box_top_k, params.max_aspect_ratio)
        if best is None:
            return None
        # The start box is proposal 0; its predicted IoU comes from the ascent's first step.
        top = torch.topk(ious, min(params.box_top_k, ious.numel())).values.mean()
        return best.double().cpu().numpy(), float(top) - float(start_ious[0][0])
