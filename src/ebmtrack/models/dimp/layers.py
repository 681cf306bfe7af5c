"""Pure tensor functions of DiMP's target classifier (Bhat et al., ICCV 2019).

Layout: ``N`` images per sequence (the training samples of one target) and ``B`` sequences
(targets), so features are (N, B, C, H, W), boxes (N, B, 4) and filters (B, C, k, k), one filter
per sequence.

Score-map geometry: a k x k filter is correlated with padding ``k // 2``, so the score map has
size (H + 1 - k % 2, W + 1 - k % 2): one row and column more than the features for an even k.
With feature cell ``j`` covering image pixels ``[s * j, s * (j + 1))`` (stride ``s``), score
cell ``i`` is centred at pixel ``s * i`` for an even k and ``s * (i + 0.5)`` for an odd k, so a
target centred at pixel ``c`` sits at score coordinate ``c / s - (k % 2) / 2``
(:func:`box_centers_in_cells`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "apply_filter",
    "apply_filter_transpose",
    "box_centers_in_cells",
    "distance_bins",
    "instance_l2_norm",
    "leaky_relu_par",
    "leaky_relu_par_deriv",
    "score_map_size",
]


def score_map_size(feature_size: tuple[int, int], filter_size: int) -> tuple[int, int]:
    """(H', W') of the score map of a ``filter_size`` filter on (H, W) features."""
    extra = 1 - filter_size % 2
    return feature_size[0] + extra, feature_size[1] + extra


def box_centers_in_cells(boxes: Tensor, stride: int, filter_size: int) -> Tensor:
    """Target centres (..., 2) as (x, y) in score-map cells for (..., 4) xywh boxes in pixels."""
    return (boxes[..., :2] + boxes[..., 2:] / 2) / stride - (filter_size % 2) / 2


def apply_filter(feats: Tensor, filters: Tensor) -> Tensor:
    """Correlate each sequence's images with its filter.

    Args:
        feats: (N, B, C, H, W).
        filters: (B, C, k, k).

    Returns:
        (N, B, H', W') scores, (H', W') = :func:`score_map_size`.
    """
    num_images, num_seq, channels, height, width = feats.shape
    k = filters.shape[-1]
    scores = F.conv2d(
        feats.reshape(num_images, num_seq * channels, height, width),
        filters,
        padding=k // 2,
        groups=num_seq,
    )
    return scores.reshape(num_images, num_seq, *scores.shape[-2:])


def apply_filter_transpose(feats: Tensor, maps: Tensor, filter_size: int) -> Tensor:
    """The adjoint of :func:`apply_filter` with respect to the filter.

    ``<apply_filter(feats, w), maps> = <w, apply_filter_transpose(feats, maps, k)>`` for every
    filter ``w``, so mapping the (weighted) residuals through it gives the gradient of the
    squared error with respect to the filter. Computed as one grouped convolution (features
    correlated with the maps), which autograd can differentiate again for meta-learning.

    Args:
        feats: (N, B, C, H, W).
        maps: (N, B, H', W') score-shaped maps.
        filter_size: k.

    Returns:
        (B, C, k, k), summed over the N images.
    """
    num_images, num_seq, channels, height, width = feats.shape
    groups = num_images * num_seq
    out = F.conv2d(
        feats.reshape(groups, channels, height, width).transpose(0, 1),
        maps.reshape(groups, 1, *maps.shape[-2:]),
        padding=filter_size // 2,
        groups=groups,
    )  # (C, N*B, k, k)
    out = out.reshape(channels, num_images, num_seq, filter_size, filter_size).sum(1)
    return out.transpose(0, 1)


def distance_bins(centers: Tensor, size: tuple[int, int], num_bins: int, bin_size: float) -> Tensor:
    """DiMP's distance-map basis: each cell's distance to the centre, binned with linear weights.

    A cell at distance ``d`` from the centre has ``t = d / bin_size``; it puts weight
    ``1 - frac(t)`` on bin ``floor(t)`` and ``frac(t)`` on bin ``floor(t) + 1`` (the hat
    functions ``max(0, 1 - |t - b|)``), except that the last bin is a ramp ``clamp(1 + t - (n -
    1), 0, 1)`` that stays 1 for every distance beyond it. A learned linear function of the
    basis is then a piecewise-linear function of the distance.

    Args:
        centers: (M, 2) centres (x, y) in score-map cells.
        size: (H, W) of the map.
        num_bins: n >= 2.
        bin_size: distance between bin centres, in cells.

    Returns:
        (M, n, H, W).
    """
    like = {"dtype": centers.dtype, "device": centers.device}
    ys = torch.arange(size[0], **like)
    xs = torch.arange(size[1], **like)
    dy = ys[None, :, None] - centers[:, 1, None, None]
    dx = xs[None, None, :] - centers[:, 0, None, None]
    dist = torch.sqrt(dy * dy + dx * dx)  # (M, H, W)
    t = dist[:, None] / bin_size - torch.arange(num_bins, **like)[None, :, None, None]
    hats = torch.relu(1.0 - t[:, :-1].abs())
    ramp = (1.0 + t[:, -1:]).clamp(0.0, 1.0)
    return torch.cat([hats, ramp], dim=1)


def leaky_relu_par(x: Tensor, mask: Tensor) -> Tensor:
    """DiMP's score activation: ``x`` where ``mask`` = 1 (target), ``max(0, x)`` where ``mask`` = 0
    (background, the hinge), and slope ``mask`` for negative ``x`` in between:
    ``(1 - m) / 2 * |x| + (1 + m) / 2 * x``."""
    return (1.0 - mask) / 2.0 * x.abs() + (1.0 + mask) / 2.0 * x


def leaky_relu_par_deriv(x: Tensor, mask: Tensor) -> Tensor:
    """d :func:`leaky_relu_par` / dx; the sign of ``x`` is taken without gradient (it is the
    Gauss-Newton Jacobian, piecewise constant in ``x``)."""
    return (1.0 - mask) / 2.0 * torch.sign(x.detach()) + (1.0 + mask) / 2.0


def instance_l2_norm(x: Tensor, scale: float, eps: float = 1e-5) -> Tensor:
    """Scale each sample of (M, C, H, W) so that its mean squared value is ``scale ** 2``:
    ``x * scale * sqrt(C H W / (sum x^2 + eps))``. With ``scale = sqrt(1 / (C k^2))`` a k x k
    filter whose entries are the target's features gives responses of order 1."""
    numel = x.shape[1] * x.shape[2] * x.shape[3]
    energy = (x * x).sum(dim=(1, 2, 3), keepdim=True)
    return x * (scale * torch.sqrt(numel / (energy + eps)))
