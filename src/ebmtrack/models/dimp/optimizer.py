"""DiMP's model optimizer: unrolled steepest descent with the Gauss-Newton-optimal step length.

The discriminative loss of a filter ``f`` on the training samples is (DiMP eq. 1-4)

    L(f) = sum_n || v_n * (a(s_n, m_n) - y_n) ||^2 / N + lambda ||f||^2,   s_n = x_n * f,

summed over cells and averaged over sequences, with the score activation
``a(s, m) = (1 - m) / 2 |s| + (1 + m) / 2 s`` (:func:`~ebmtrack.models.dimp.layers.leaky_relu_par`:
a plain residual on the target, a hinge on the background). The label ``y``, target mask ``m``
(through a sigmoid) and spatial weight ``v`` are learned linear functions of the distance-bin
basis (:func:`~ebmtrack.models.dimp.layers.distance_bins`), so learned functions of the distance
to the target centre. ``N`` images share the total weight (``v / sqrt(N)`` by default).

One step, with ``r`` the weighted residuals and ``J`` the Jacobian of ``v * a`` (the sign of the
scores held fixed, as Gauss-Newton does):

    g = J^T r + lambda f,     alpha = |g|^2 / (|J g|^2 + lambda |g|^2),     f <- f - beta alpha g,

where ``alpha`` minimises the quadratic (Gauss-Newton) model of ``L`` along ``-g`` and the step
factor ``beta`` = exp(log_step_length) and ``lambda`` = max(filter_reg^2, min_filter_reg^2) are
learned. ``g`` is half the gradient of ``L`` as written (the reference's convention).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ebmtrack.models.dimp.layers import (
    apply_filter,
    apply_filter_transpose,
    box_centers_in_cells,
    distance_bins,
    leaky_relu_par,
    leaky_relu_par_deriv,
    score_map_size,
)

__all__ = ["SteepestDescentGN"]


class SteepestDescentGN(nn.Module):
    """The learned filter optimizer (DiMP's ``DiMPSteepestDescentGN`` with ``score_act='relu'``
    and ``mask_act='sigmoid'``).

    Args:
        num_iter: default number of steps.
        stride: feature stride in pixels.
        init_step_length: initial ``beta``.
        init_filter_reg: initial ``filter_reg`` (lambda = filter_reg ** 2).
        min_filter_reg: lower bound of ``filter_reg`` (keeps lambda >= min_filter_reg ** 2).
        init_gauss_sigma: standard deviation (cells) of the Gaussian the label starts from.
        num_dist_bins: number of distance bins.
        bin_displacement: distance between bins, in cells.
        mask_init_factor: the target mask starts as ``sigmoid(factor * tanh(2 - d))``.

    Parameters (learned): ``log_step_length`` (1,), ``filter_reg`` (1,), and the per-bin weights
    ``label_weights``, ``mask_weights``, ``spatial_weights`` (num_dist_bins,).
    """

    def __init__(
        self,
        num_iter: int = 5,
        stride: int = 16,
        init_step_length: float = 0.9,
        init_filter_reg: float = 0.1,
        min_filter_reg: float = 1e-3,
        init_gauss_sigma: float = 0.9,
        num_dist_bins: int = 100,
        bin_displacement: float = 0.1,
        mask_init_factor: float = 3.0,
    ) -> None:
        super().__init__()
        self.num_iter = num_iter
        self.stride = stride
        self.min_filter_reg = min_filter_reg
        self.num_dist_bins = num_dist_bins
        self.bin_displacement = bin_displacement
        self.log_step_length = nn.Parameter(torch.full((1,), math.log(init_step_length)))
        self.filter_reg = nn.Parameter(torch.full((1,), float(init_filter_reg)))
        d = torch.arange(num_dist_bins, dtype=torch.float32) * bin_displacement
        gauss = torch.exp(-0.5 * (d / init_gauss_sigma) ** 2)
        # Shifted so that the label is 0 far from the target (the last bin covers the far field).
        self.label_weights = nn.Parameter(gauss - gauss.min())
        self.mask_weights = nn.Parameter(mask_init_factor * torch.tanh(2.0 - d))
        self.spatial_weights = nn.Parameter(torch.ones(num_dist_bins))

    def loss_functions(self, boxes: Tensor, size: tuple[int, int], filter_size: int):
        """Label ``y``, target mask ``m`` and spatial weight ``v``, each (N, B, H', W'), for the
        target boxes (N, B, 4) (xywh, pixels) on a score map of size ``size``."""
        centers = box_centers_in_cells(boxes, self.stride, filter_size).reshape(-1, 2)
        basis = distance_bins(centers, size, self.num_dist_bins, self.bin_displacement)
        shape = (*boxes.shape[:2], *size)

        def project(weights: Tensor) -> Tensor:
            return torch.einsum("mnhw,n->mhw", basis, weights).reshape(shape)

        label = project(self.label_weights)
        mask = torch.sigmoid(project(self.mask_weights))
        return label, mask, project(self.spatial_weights)

    def regularization(self) -> Tensor:
        """lambda = max(filter_reg^2, min_filter_reg^2), shape (1,)."""
        return (self.filter_reg * self.filter_reg).clamp(min=self.min_filter_reg**2)

    def forward(
        self,
        filters: Tensor,
        feats: Tensor,
        boxes: Tensor,
        num_iter: int | None = None,
        sample_weight: Tensor | None = None,
    ) -> tuple[list[Tensor], list[Tensor]]:
        """Run ``num_iter`` steps (default ``self.num_iter``) from ``filters``.

        Args:
            filters: (B, C, k, k) initial filters.
            feats: (N, B, C, H, W) training features.
            boxes: (N, B, 4) xywh target boxes in pixels of the images the features come from.
            num_iter: number of steps, >= 0.
            sample_weight: optional (N, B) non-negative weights of the images (each sequence's
                summing to 1); default 1 / N each.

        Returns:
            ``iterates``: num_iter + 1 filters (B, C, k, k), the input first; ``losses``: the
            loss L (scalar tensor, mean over sequences) of each iterate.
        """
        num_iter = self.num_iter if num_iter is None else num_iter
        if num_iter < 0:
            raise ValueError(f"num_iter must be >= 0, got {num_iter}")
        num_images, num_seq = feats.shape[:2]
        filter_size = filters.shape[-1]
        size = score_map_size(feats.shape[-2:], filter_size)
        label, mask, spatial = self.loss_functions(boxes, size, filter_size)
        if sample_weight is None:
            weight = spatial / math.sqrt(num_images)
        else:
            weight = sample_weight.sqrt().reshape(num_images, num_seq, 1, 1) * spatial
        step_factor = torch.exp(self.log_step_length)
        reg = self.regularization()

        def residuals(f: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            scores = apply_filter(feats, f)
            res = weight * (leaky_relu_par(scores, mask) - label)
            loss = ((res * res).sum() + reg * (f * f).sum()) / num_seq
            return res, scores, loss.squeeze(0)

        iterates, losses = [filters], []
        for _ in range(num_iter):
            res, scores, loss = residuals(filters)
            losses.append(loss)
            jac = weight * leaky_relu_par_deriv(scores, mask)  # diagonal of dr/ds
            grad = apply_filter_transpose(feats, jac * res, filter_size) + reg * filters
            jac_grad = jac * apply_filter(feats, grad)
            grad_sq = (grad * grad).sum(dim=(1, 2, 3))
            curvature = (jac_grad * jac_grad).sum(dim=(0, 2, 3)) + reg * grad_sq
            alpha = grad_sq / curvature.clamp(min=1e-8)
            filters = filters - (step_factor * alpha).reshape(-1, 1, 1, 1) * grad
            iterates.append(filters)
        losses.append(residuals(filters)[2])
        return iterates, losses
