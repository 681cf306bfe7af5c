"""ATOM's box estimation by IoU maximisation (paper 3.3 "Target estimation").

Starting from the classifier's position and the previous size, a few jittered boxes
(:func:`~ebmtrack.tracking.box_refine.jitter_proposals`) climb the predicted IoU by gradient
ascent; the best three are averaged. Boxes are (x, y, w, h) in crop pixels. One difference from
the reference: a step that lowers a box's predicted IoU is rejected (the box keeps its previous
value and halves its step), so refinement never makes a box worse by the network's own measure;
the reference takes fixed steps and ranks the boxes by the IoU predicted before the last one
(docs/atom.md).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.tracking.iou_gradient import IoUGradient

__all__ = ["ascend_iou"]


def ascend_iou(
    head: AtomIoUNet,
    modulation: list[Tensor],
    test_features: list[Tensor],
    boxes: Tensor,
    steps: int = 5,
    step_length: float = 1.0,
    closed_form: bool = False,
    start_ious: list[Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """Gradient ascent on the predicted IoU, all boxes at once.

    Each step moves ``[x, y, w, h]`` by ``step_length * dIoU/db * [w, h, w, h]`` and keeps the move
    only where the predicted IoU does not drop; a rejected box halves its step length.

    Args:
        head: the IoU predictor (its BatchNorm layers in eval mode).
        modulation, test_features: as for :meth:`AtomIoUNet.predict_iou`, batch 1.
        boxes: (N, 4) xywh crop px.
        steps: number of ascent steps.
        step_length: initial step length.
        closed_form: compute IoUs and gradients with :class:`IoUGradient` (same values, a few
            matrix products instead of autograd; needs a net from :func:`fold_box_head`).
        start_ious: if a list, the (N,) IoUs predicted for the boxes before the first step are
            appended to it (what a caller compares the result with, at no extra pass).

    Returns:
        ``(boxes, ious)``: (N, 4) and (N,), detached; each IoU is >= the initial one of its box.
    """

    modulated = head.modulate(modulation, test_features)

    def autograd_value_and_grad(b: Tensor, need_grad: bool = True) -> tuple[Tensor, Tensor | None]:
        if not need_grad:  # the last evaluation only decides acceptance
            with torch.no_grad():
                return head.predict_iou_modulated(modulated, b[None])[0], None
        b = b.detach().requires_grad_(True)
        iou = head.predict_iou_modulated(modulated, b[None])[0]
        (grad,) = torch.autograd.grad(iou.sum(), b)
        return iou.detach(), grad

    if closed_form:
        value_and_grad, grad_mode = IoUGradient(head, modulated), torch.no_grad()
    else:
        value_and_grad, grad_mode = autograd_value_and_grad, torch.enable_grad()
    with grad_mode:
        boxes = boxes.detach().clone()
        ious, grad = value_and_grad(boxes, steps > 0)
        if start_ious is not None:
            start_ious.append(ious)
        lengths = torch.full_like(ious, step_length)
        for step in range(steps):
            scale = boxes[:, 2:].repeat(1, 2)
            candidate = boxes + lengths[:, None] * grad * scale
            candidate[:, 2:] = candidate[:, 2:].clamp(min=1.0)
            new_ious, new_grad = value_and_grad(candidate, step < steps - 1)
            accept = new_ious >= ious
            boxes = torch.where(accept[:, None], candidate, boxes)
            ious = torch.where(accept, new_ious, ious)
            if new_grad is not None:
                grad = torch.where(accept[:, None], new_grad, grad)
                lengths = torch.where(accept, lengths, lengths / 2)
    return boxes, ious
