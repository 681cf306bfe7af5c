"""ATOM's online target classifier (eq. 2-3): a 1x1 projection and a 4x4 filter, learned online.

``f(x; w) = phi2(w2 * phi1(w1 * x))`` with ``phi1`` the identity, ``w1`` a 1x1 convolution that
reduces the backbone features to 64 channels and ``w2`` a 4x4 filter with one output channel. The
loss is the weighted L2 error to Gaussian labels plus Tikhonov terms (eq. 3); its residuals are
minimised with Gauss-Newton and conjugate gradient (:mod:`ebmtrack.optim`).

``phi2`` is the PELU ``t if t >= 0 else alpha * (exp(t / alpha) - 1)`` with alpha = 0.05: it is used
in the loss only, where it flattens negative responses so that easy negatives cost nothing. At
inference the score is the raw linear response, as in the reference implementation.

Score-map geometry: the 4x4 filter is applied with padding 2 and the last row and column dropped,
so the output has the input's size H x W, and output cell ``i`` is centred on feature coordinate
``i - 0.5`` (the kernel covers inputs ``i - 2 .. i + 1``). With feature cell ``j`` covering image
pixels ``[s * j, s * (j + 1))`` (stride ``s``), output cell ``i`` sits at pixel ``s * i``: the label
of a target centred at pixel ``c`` peaks at ``c / s``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ebmtrack.optim import conjugate_gradient, gauss_newton_cg

__all__ = [
    "AtomClassifier",
    "ClassifierConfig",
    "classifier_residuals",
    "filter_response",
    "fit_classifier",
    "gaussian_labels",
    "pelu",
    "project",
    "update_filter",
]


@dataclass(frozen=True)
class ClassifierConfig:
    """Sizes and loss weights of :class:`AtomClassifier` (ATOM's defaults).

    Attributes:
        in_channels: channels of the backbone layer (256 for ResNet-18 ``layer3``).
        projection_dim: output channels of the 1x1 projection ``w1``.
        filter_size: side of the filter ``w2``.
        pelu_alpha: alpha of the PELU output activation used in the loss.
        filter_reg: lambda of ``w2``.
        projection_reg: lambda of ``w1``.
    """

    in_channels: int = 256
    projection_dim: int = 64
    filter_size: int = 4
    pelu_alpha: float = 0.05
    filter_reg: float = 0.1
    projection_reg: float = 1e-4

    def __post_init__(self) -> None:
        for name in ("in_channels", "projection_dim", "filter_size"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value > 0):
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        for name in ("pelu_alpha", "filter_reg", "projection_reg"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")


def pelu(t: Tensor, alpha: float) -> Tensor:
    """The PELU ``t`` for ``t >= 0``, ``alpha * (exp(t / alpha) - 1)`` below; continuously
    differentiable. Equal to ``alpha * elu(t / alpha)``."""
    return alpha * F.elu(t / alpha)


def filter_response(features: Tensor, filt: Tensor) -> Tensor:
    """Correlate ``features`` (B, C, H, W) with ``filt`` (1, C, k, k) -> (B, H, W).

    Padding ``k // 2`` and, for even ``k``, the trailing row and column dropped, so that the
    output keeps the input size; see the module docstring for where each output cell sits.

    Computed as one matrix product giving the k*k per-offset maps (B, k*k, H, W), zero-padded,
    then summed over a strided view that shifts map (dy, dx) by (dy, dx). Same arithmetic as a
    convolution, but its first and second derivatives (which the Gauss-Newton solver takes by
    double backprop) are matrix products and one strided sum: several times faster on a CPU
    than the double backward of a convolution with a single output channel.
    """
    batch, channels, height, width = features.shape
    k = filt.shape[-1]
    pad = k // 2
    weights = filt.reshape(channels, k * k).t()
    maps = torch.matmul(weights, features.reshape(batch, channels, height * width))
    maps = F.pad(maps.reshape(batch, k * k, height, width), (pad, pad, pad, pad)).contiguous()
    cols = width + 2 * pad
    plane = (height + 2 * pad) * cols
    # view[b, dy, dx, i, j] = maps[b, dy * k + dx, i + dy, j + dx]
    strides = (k * k * plane, k * plane + cols, plane + 1, cols, 1)
    return maps.as_strided((batch, k, k, height, width), strides).sum(dim=(1, 2))


def project(features: Tensor, projection: Tensor) -> Tensor:
    """The 1x1 convolution ``w1 * x``: (B, C, H, W), (D, C, 1, 1) -> (B, D, H, W), as a matrix
    product (cheaper to differentiate twice than a convolution)."""
    batch, channels, height, width = features.shape
    weight = projection.reshape(projection.shape[0], channels)
    out = torch.matmul(weight, features.reshape(batch, channels, height * width))
    return out.reshape(batch, -1, height, width)


def gaussian_labels(centers: Tensor, sigma: float, size: tuple[int, int]) -> Tensor:
    """Gaussian label maps with peak 1.

    Args:
        centers: (N, 2) peak positions (x, y) in score-map cells (see the module docstring).
        sigma: standard deviation in cells.
        size: (H, W) of the map.

    Returns:
        (N, H, W) with ``exp(-((i - cy)^2 + (j - cx)^2) / (2 sigma^2))`` at cell (i, j).
    """
    height, width = size
    ys = torch.arange(height, dtype=centers.dtype, device=centers.device)
    xs = torch.arange(width, dtype=centers.dtype, device=centers.device)
    gy = torch.exp(-0.5 * ((ys[None] - centers[:, 1:2]) / sigma) ** 2)  # (N, H)
    gx = torch.exp(-0.5 * ((xs[None] - centers[:, 0:1]) / sigma) ** 2)  # (N, W)
    return gy[:, :, None] * gx[:, None, :]


class AtomClassifier(nn.Module):
    """The two-layer classifier of eq. 2. ``forward`` gives the raw scores (B, H, W).

    Initialisation as the reference: ``w1 ~ N(0, 1 / in_channels)`` and ``w2 ~ N(0, (1 /
    numel(w2))^2)``; pass a ``generator`` for reproducible draws.
    """

    def __init__(self, config: ClassifierConfig | None = None, generator=None) -> None:
        super().__init__()
        self.config = config = config or ClassifierConfig()
        proj = torch.randn(config.projection_dim, config.in_channels, 1, 1, generator=generator)
        filt = torch.randn(
            1, config.projection_dim, config.filter_size, config.filter_size, generator=generator
        )
        self.projection = nn.Parameter(proj / math.sqrt(config.in_channels))
        self.filter = nn.Parameter(filt / filt.numel())

    def project(self, features: Tensor) -> Tensor:
        """(B, in_channels, H, W) -> (B, projection_dim, H, W)."""
        return project(features, self.projection)

    def score(self, projected: Tensor) -> Tensor:
        """Raw linear scores (B, H, W) of projected features."""
        return filter_response(projected, self.filter)

    def forward(self, features: Tensor) -> Tensor:
        return self.score(self.project(features))


def classifier_residuals(
    filt: Tensor,
    projection: Tensor | None,
    samples: Tensor,
    labels: Tensor,
    weights: Tensor,
    config: ClassifierConfig,
) -> list[Tensor]:
    """Residuals of eq. 3, whose squared norm is the loss.

    Args:
        filt: (1, D, k, k) filter ``w2``.
        projection: (D, C, 1, 1) projection ``w1``, or None when ``samples`` are already projected
            (filter-only updates; the projection's regularisation term is then left out).
        samples: (M, C, H, W) backbone features, or (M, D, H, W) projected ones.
        labels: (M, H, W) Gaussian labels.
        weights: (M,) non-negative sample weights ``gamma_j``.
        config: the loss weights.

    Returns:
        ``[sqrt(gamma) * (pelu(w2 * w1 x) - y), sqrt(lambda2) * w2(, sqrt(lambda1) * w1)]``.
    """
    projected = samples if projection is None else project(samples, projection)
    scores = pelu(filter_response(projected, filt), config.pelu_alpha)
    residuals = [
        weights.sqrt()[:, None, None] * (scores - labels),
        math.sqrt(config.filter_reg) * filt,
    ]
    if projection is not None:
        residuals.append(math.sqrt(config.projection_reg) * projection)
    return residuals


def fit_classifier(
    classifier: AtomClassifier,
    samples: Tensor,
    labels: Tensor,
    weights: Tensor,
    gn_iters: int = 6,
    cg_iters: int = 10,
) -> Tensor:
    """First-frame training: filter and projection jointly by Gauss-Newton + CG (in place).

    Fletcher-Reeves CG preconditioned by the inverse regularisation weights, as the reference.
    ``samples`` (M, C, H, W) are raw backbone features. Returns the losses 1/2 ||r||^2
    (gn_iters + 1,), the first before any step.
    """
    config = classifier.config

    def residuals(params: list[Tensor]) -> list[Tensor]:
        return classifier_residuals(params[0], params[1], samples, labels, weights, config)

    params, losses = gauss_newton_cg(
        residuals,
        [classifier.filter.detach(), classifier.projection.detach()],
        gn_iters=gn_iters,
        cg_iters=cg_iters,
        preconditioner=[config.filter_reg, config.projection_reg],
        beta="fletcher-reeves",
    )
    with torch.no_grad():
        classifier.filter.copy_(params[0])
        classifier.projection.copy_(params[1])
    return losses


def update_filter(
    classifier: AtomClassifier,
    projected: Tensor,
    labels: Tensor,
    weights: Tensor,
    cg_iters: int = 5,
    final_loss: bool = False,
) -> Tensor:
    """Online update: the filter only, ``cg_iters`` Polak-Ribiere CG steps on one linearisation.

    ``projected`` (M, D, H, W) are samples already passed through the projection. Returns the
    losses 1/2 ||r||^2: (1,) before the update, (2,) before and after with ``final_loss``.
    """
    config = classifier.config

    def residuals(params: list[Tensor]) -> list[Tensor]:
        return classifier_residuals(params[0], None, projected, labels, weights, config)

    params, losses = conjugate_gradient(
        residuals,
        [classifier.filter.detach()],
        cg_iters,
        beta="polak-ribiere",
        final_loss=final_loss,
    )
    with torch.no_grad():
        classifier.filter.copy_(params[0])
    return losses
