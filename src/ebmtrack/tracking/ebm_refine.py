"""Box refinement with an energy-based head: gradient ascent on f(x, y) over the box y.

The head is ATOM's IoU-Net trained as an EBM (:mod:`ebmtrack.training.box_regression`): its raw
output for a box is f(x, y), the unnormalised log-density of the box. Prediction maximises f from
a few starting boxes (paper section 2.2, Algorithm S1), in the coordinates the head was trained
in, ``y = (cx / w0, cy / h0, log w, log h)`` (crop pixels, ``(w0, h0)`` a fixed size: here the
size of the box the classifier proposes, as the reference tracker's ``sz_norm``). DiMP-NCE+
refines its boxes this way (:mod:`ebmtrack.tracking.dimp.box`), and so do ATOM's box modes with
``box_climb="ebm"`` (:mod:`ebmtrack.tracking.atom.box`).

The value and gradient of f come in closed form from
:class:`~ebmtrack.tracking.iou_gradient.IoUGradient` (a few matrix products per step instead
of a few hundred autograd operations) behind a custom autograd function, so that the generic
:func:`ebmtrack.ebm.sampling.gradient_ascent` runs Algorithm S1 on it unchanged: autograd only
chains d f / d box to d f / d y through :func:`~ebmtrack.ops.boxes.box_convert`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ebmtrack.ebm.sampling import check_candidates, gradient_ascent, score_and_grad
from ebmtrack.ops.boxes import box_convert
from ebmtrack.tracking.iou_gradient import IoUGradient

__all__ = ["STEP_RULES", "FrameBoxEnergy", "ascend_boxes", "fixed_step_ascent"]

STEP_RULES = ("s1", "fixed")
"""Box-refinement step rules: ``s1`` (the paper's Algorithm S1) and ``fixed`` (the reference
tracker's plain steps)."""


class _ClosedFormScore(torch.autograd.Function):
    """f of boxes (N, 4) -> (N,), whose backward is the closed-form d f / d box."""

    @staticmethod
    def forward(ctx, boxes: Tensor, score: IoUGradient) -> Tensor:
        values, grad = score(boxes.detach(), need_grad=True)
        ctx.save_for_backward(grad)
        return values

    @staticmethod
    def backward(ctx, grad_values: Tensor) -> tuple[Tensor, None]:
        (grad,) = ctx.saved_tensors
        return grad_values[:, None] * grad, None


class FrameBoxEnergy(nn.Module):
    """The head's f(x, y) for one frame, in the calling convention of :mod:`ebmtrack.ebm`.

    ``forward(size_norm, y)``: ``size_norm`` (1, 2) is ``(w0, h0)`` (the "x" that varies between
    calls; the frame's features are bound at construction), ``y`` (1, M, 4) boxes in the EBM
    parametrisation; returns f (1, M). Differentiable in ``y``.

    Args:
        score: :class:`IoUGradient` of the BatchNorm-folded head on this frame's modulated
            features (boxes in the crop pixels of those features).
    """

    def __init__(self, score: IoUGradient) -> None:
        super().__init__()
        self.score = score

    def forward(self, size_norm: Tensor, y: Tensor) -> Tensor:
        check_candidates(size_norm, y)
        if y.shape[0] != 1:
            raise ValueError(f"y must hold one frame's boxes (1, M, 4), got {tuple(y.shape)}")
        boxes = box_convert(y, "ebm", "xywh", size_norm)[0]
        return _ClosedFormScore.apply(boxes, self.score)[None]


def fixed_step_ascent(
    model: nn.Module, x: Tensor, y_init: Tensor, num_iters: int, step_length: Tensor
) -> tuple[Tensor, Tensor]:
    """The reference tracker's refinement: ``num_iters`` steps ``y <- y + lambda * grad f``, each
    taken whatever f does (pytracking ``box_refinement_step_decay = 1``).

    Same conventions as :func:`~ebmtrack.ebm.sampling.gradient_ascent` (``y_init`` (B, M, D),
    ``step_length`` scalar or (D,)); returns the final ``y`` and f there, detached. The reference
    ranks boxes by f before the last step; here f is evaluated once more, at the returned boxes.
    """
    check_candidates(x, y_init, "y_init")
    y = y_init.detach()
    for _ in range(int(num_iters)):
        _, grad = score_and_grad(model, x, y)
        y = y + step_length * grad
    with torch.no_grad():
        return y, model(x, y)


def ascend_boxes(
    energy: FrameBoxEnergy,
    boxes: Tensor,
    size_norm: Tensor,
    steps: int,
    step_length: tuple[float, float],
    rule: str = "s1",
    decay: float = 0.5,
) -> tuple[Tensor, Tensor]:
    """Refine ``boxes`` (N, 4) xywh by gradient ascent on f in the EBM coordinates.

    Args:
        energy: the frame's f.
        boxes: (N, 4) xywh starting boxes, positive sizes, in the pixels ``energy`` scores.
        size_norm: (2,) ``(w0, h0)`` of the coordinates' centre normalisation.
        steps: iterations T.
        step_length: lambda for the centre coordinates and for the log sizes.
        rule: ``"s1"`` (Algorithm S1: keep a step only where f increases, otherwise multiply that
            box's lambda by ``decay``) or ``"fixed"`` (:func:`fixed_step_ascent`).
        decay: eta of S1.

    Returns:
        ``(boxes, f)``: (N, 4) xywh refined boxes and (N,) f at them, detached. With ``"s1"``
        each box's f is >= its starting f.
    """
    if rule not in STEP_RULES:
        raise ValueError(f"rule must be one of {', '.join(STEP_RULES)}, got {rule!r}")
    norm = size_norm.reshape(1, 2).to(boxes)
    y0 = box_convert(boxes[None], "xywh", "ebm", norm)
    lam = torch.tensor([step_length[0]] * 2 + [step_length[1]] * 2, dtype=y0.dtype)
    if rule == "s1":
        y, values = gradient_ascent(energy, norm, y0, steps, lam.to(y0.device), decay)
    else:
        y, values = fixed_step_ascent(energy, norm, y0, steps, lam.to(y0.device))
    return box_convert(y, "ebm", "xywh", norm)[0], values[0]
