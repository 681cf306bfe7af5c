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

from ebmtrack.optim import gauss_newton_cg, solve_linearized

__all__ = [
    "AtomClassifier",
    "ClassifierConfig",
    "FilterLinearization",
    "classifier_residuals",
    "filter_response",
    "filter_response_adjoint",
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
    output keeps the input size; see the module docstring for where each output cell sits:
    ``out[b, i, j] = sum_{c, dy, dx} filt[0, c, dy, dx] * x[b, c, i + dy - pad, j + dx - pad]``
    with ``x = features``, zero outside the map.

    Computed as one matrix product giving the k*k per-offset maps (B, k*k, H, W), zero-padded,
    then summed with map (dy, dx) shifted by (dy, dx). Same arithmetic as a convolution, but its
    first and second derivatives (which the Gauss-Newton solver takes by double backprop) are
    matrix products and one strided sum: several times faster on a CPU than the double backward
    of a convolution with a single output channel. When no gradient is needed the shifted maps
    are added in place into one buffer instead, which is about twice as fast as the strided sum.
    """
    batch, channels, height, width = features.shape
    k = filt.shape[-1]
    pad = k // 2
    weights = filt.reshape(channels, k * k).t()
    maps = torch.matmul(weights, features.reshape(batch, channels, height * width))
    maps = maps.reshape(batch, k * k, height, width)
    if not (torch.is_grad_enabled() and (features.requires_grad or filt.requires_grad)):
        return _sum_shifted_maps(maps.transpose(0, 1), maps.dtype)
    maps = F.pad(maps, (pad, pad, pad, pad)).contiguous()
    cols = width + 2 * pad
    plane = (height + 2 * pad) * cols
    # view[b, dy, dx, i, j] = maps[b, dy * k + dx, i + dy, j + dx]
    strides = (k * k * plane, k * plane + cols, plane + 1, cols, 1)
    return maps.as_strided((batch, k, k, height, width), strides).sum(dim=(1, 2))


def _sum_shifted_maps(maps: Tensor, dtype: torch.dtype) -> Tensor:
    """(k*k, B, H, W) per-offset maps -> (B, H, W) in ``dtype``, each map shifted by its offset:
    ``out[i, j]`` gets ``maps[dy*k+dx][i + dy - pad, j + dx - pad]``, added in place (no
    autograd; maps of a narrower dtype are widened as they are added)."""
    taps, batch, height, width = maps.shape
    k = math.isqrt(taps)
    pad = k // 2
    out = maps.new_zeros((batch, height + 2 * pad, width + 2 * pad), dtype=dtype)
    for tap in range(taps):
        dy, dx = divmod(tap, k)
        rows, cols = (
            slice(2 * pad - dy, 2 * pad - dy + height),
            slice(2 * pad - dx, 2 * pad - dx + width),
        )
        out[:, rows, cols] += maps[tap]
    return out[:, pad : pad + height, pad : pad + width]


def _flipped_windows(grad_output: Tensor, filter_size: int, dtype: torch.dtype) -> Tensor:
    """(B, H, W) -> (k*k, B*H*W) in ``dtype``, the maps that each filter tap meets in the adjoint,
    in reversed tap order: row ``(k-1-dy)*k + (k-1-dx)`` holds ``q[u - dy + pad, v - dx + pad]``
    at (b, u, v), zero outside. Reversed because then all k*k windows are one strided view of
    the zero-padded ``q`` (offsets growing with the row), copied in one pass."""
    batch, height, width = grad_output.shape
    k = filter_size
    pad = k // 2
    padded = F.pad(grad_output, (pad, pad, pad, pad))
    rows, cols = padded.shape[1:]
    first = 2 * pad - (k - 1)  # the offset of tap k-1, the first window
    view = padded.as_strided(
        (k, k, batch, height, width),
        (cols, 1, rows * cols, cols, 1),
        padded.storage_offset() + first * (cols + 1),
    )
    windows = torch.empty((k, k, batch, height, width), dtype=dtype, device=padded.device)
    return windows.copy_(view).view(k * k, -1)


def filter_response_adjoint(features: Tensor, grad_output: Tensor, filter_size: int) -> Tensor:
    """The adjoint of :func:`filter_response` in the filter: (B, C, H, W), (B, H, W) -> (1, C, k, k)

    ``<filter_response(x, w), q> = <w, filter_response_adjoint(x, q, k)>`` for every ``w``: the
    gradient of ``sum(q * filter_response(x, w))`` with respect to ``w``, without autograd.
    Tap ``(dy, dx)`` pairs feature ``(u, v)`` with ``q[u - dy + pad, v - dx + pad]``: the k*k
    shifted windows of the zero-padded ``q`` are stacked, and one matrix product per sample
    contracts them with the features.
    """
    batch, channels, height, width = features.shape
    windows = _flipped_windows(grad_output, filter_size, features.dtype)
    taps = windows.view(-1, batch, height * width).permute(1, 2, 0)  # (B, H*W, k*k)
    grad = torch.matmul(features.reshape(batch, channels, height * width), taps).sum(dim=0)
    return grad.reshape(1, channels, filter_size, filter_size).flip(2, 3)


def _channel_major(features: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    """(B, C, H, W) -> (C, B*H*W), a copy in ``dtype`` (default: the features' own)."""
    return features.transpose(0, 1).reshape(features.shape[1], -1).to(dtype or features.dtype)


def _response_channel_major(samples: Tensor, sample_shape: tuple, filt: Tensor) -> Tensor:
    """:func:`filter_response` of channel-major ``samples`` (C, B*H*W) with ``sample_shape``
    (B, H, W), as one matrix product in the samples' dtype; result in the filter's dtype."""
    taps = filt.reshape(filt.shape[1], -1).t().to(samples.dtype)  # (k*k, C)
    return _sum_shifted_maps(torch.mm(taps, samples).view(-1, *sample_shape), filt.dtype)


def _adjoint_channel_major(samples: Tensor, grad_output: Tensor, filter_size: int) -> Tensor:
    """:func:`filter_response_adjoint` of channel-major ``samples`` (C, B*H*W): one matrix
    product over all samples in their dtype, accumulated in float32 and rounded once."""
    windows = _flipped_windows(grad_output, filter_size, samples.dtype)
    grad = torch.mm(samples, windows.t()).to(grad_output.dtype)  # (C, k*k), taps reversed
    return grad.reshape(1, samples.shape[0], filter_size, filter_size).flip(2, 3)


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


class FilterLinearization:
    """The filter-only residuals of eq. 3 linearised at ``filt``, with closed-form Jacobian
    products (the interface of :class:`ebmtrack.optim.Linearization`).

    With the projection fixed the data residual is ``sqrt(gamma) * (pelu(A w) - y)`` with ``A``
    the linear map :func:`filter_response`, so ``J = diag(sqrt(gamma) pelu'(A w)) A`` stacked on
    ``sqrt(lambda2) I``: ``J p`` is one filter response and ``J^T q`` one
    :func:`filter_response_adjoint`, each a single pass over the samples, instead of the double
    backward of the generic solver. Same math, several times fewer passes (tested equal).

    With a ``product_dtype`` other than the samples' (``torch.bfloat16``), the samples are copied
    once into channel-major order (D, M*H*W) in that dtype, so that each product is one matrix
    product over all samples that accumulates in float32 and rounds once. On a CPU with native
    bfloat16 dot products (AVX512-BF16, AMX) they run about 3x faster than in float32. The copy
    is rounded to 8 significant bits; everything else (residuals, CG) stays in the filter's dtype.

    Args:
        filt: (1, D, k, k) filter ``w2`` (the linearisation point).
        projected: (M, D, H, W) projected samples; labels (M, H, W); weights (M,).
        config: the loss weights.
        product_dtype: dtype of the sample copy and the two products (default: the samples').
    """

    def __init__(
        self,
        filt: Tensor,
        projected: Tensor,
        labels: Tensor,
        weights: Tensor,
        config: ClassifierConfig,
        product_dtype: torch.dtype | None = None,
    ) -> None:
        self.samples = projected
        if product_dtype not in (None, projected.dtype):
            self.samples = _channel_major(projected, product_dtype)
        self.sample_shape = (projected.shape[0], *projected.shape[2:])
        self.filter_size = filt.shape[-1]
        self.reg_scale = math.sqrt(config.filter_reg)
        scores = self._response(filt)
        alpha = config.pelu_alpha
        sqrt_weights = weights.sqrt()[:, None, None]
        data = sqrt_weights * (pelu(scores, alpha) - labels)
        reg = self.reg_scale * filt
        # d pelu(t) / dt: 1 for t > 0, exp(t / alpha) below (both 1 at 0).
        slope = torch.exp(scores.clamp(max=0) / alpha)
        self.row_scale = sqrt_weights * slope
        self._loss = 0.5 * (data.pow(2).sum() + reg.pow(2).sum())
        self._gradient = self.vjp([data, reg])

    def _response(self, filt: Tensor) -> Tensor:
        """:func:`filter_response` of the samples: (1, D, k, k) -> (M, H, W)."""
        if self.samples.dim() == 4:
            return filter_response(self.samples, filt)
        return _response_channel_major(self.samples, self.sample_shape, filt)

    def _adjoint(self, grad_output: Tensor) -> Tensor:
        """:func:`filter_response_adjoint` of the samples: (M, H, W) -> (1, D, k, k)."""
        if self.samples.dim() == 4:
            return filter_response_adjoint(self.samples, grad_output, self.filter_size)
        return _adjoint_channel_major(self.samples, grad_output, self.filter_size)

    def loss(self) -> Tensor:
        """1/2 ||r||^2 at the linearisation point."""
        return self._loss

    def gradient(self) -> list[Tensor]:
        """J^T r, the gradient of the loss with respect to the filter."""
        return self._gradient

    def jvp(self, direction: list[Tensor]) -> list[Tensor]:
        """J p for ``[p]`` (1, D, k, k) -> [data (M, H, W), regularisation (1, D, k, k)]."""
        (step,) = direction
        return [self.row_scale * self._response(step), self.reg_scale * step]

    def vjp(self, vector: list[Tensor]) -> list[Tensor]:
        """J^T q for q = [data (M, H, W), regularisation (1, D, k, k)] -> [(1, D, k, k)]."""
        data, reg = vector
        adjoint = self._adjoint(self.row_scale * data)
        return [adjoint + self.reg_scale * reg]


def update_filter(
    classifier: AtomClassifier,
    projected: Tensor,
    labels: Tensor,
    weights: Tensor,
    cg_iters: int = 5,
    final_loss: bool = False,
    product_dtype: torch.dtype | None = None,
) -> Tensor:
    """Online update: the filter only, ``cg_iters`` Polak-Ribiere CG steps on one linearisation.

    ``projected`` (M, D, H, W) are samples already passed through the projection. The same
    iterations as :func:`ebmtrack.optim.conjugate_gradient` on :func:`classifier_residuals`
    (tested equal), with the Jacobian products of :class:`FilterLinearization` (in
    ``product_dtype``, see there). Returns the losses 1/2 ||r||^2: (1,) before the update, (2,)
    before and after with ``final_loss``.
    """
    if cg_iters < 0:
        raise ValueError(f"cg_iters must be >= 0, got {cg_iters}")
    config = classifier.config
    with torch.no_grad():
        filt = classifier.filter.detach()
        lin = FilterLinearization(filt, projected, labels, weights, config, product_dtype)
        (step,) = solve_linearized(lin, cg_iters, None, "polak-ribiere")
        classifier.filter.copy_(filt + step)
        losses = [lin.loss()]
        if final_loss:
            residuals = classifier_residuals(
                classifier.filter, None, projected, labels, weights, config
            )
            losses.append(0.5 * sum(r.pow(2).sum() for r in residuals))
    return torch.stack(losses)
