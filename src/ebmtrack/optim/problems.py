"""Test problems for the solvers, written with plain torch ops.

:class:`AtomClassifierProblem` is ATOM's online classification problem (CVPR 2019, eq. 2-3) on
synthetic features, used by the tests and benchmarks of :mod:`ebmtrack.optim`. The tracker's own
classifier lives in ``ebmtrack.models``; this copy only has to be faithful to the objective.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["AtomClassifierProblem", "first_order_losses", "pelu", "shifted_sum"]


def pelu(t: Tensor, alpha: float = 0.05) -> Tensor:
    """ATOM's output activation phi_2: t for t >= 0, alpha * (exp(t / alpha) - 1) for t < 0.

    Written as alpha * elu(t / alpha): one fused op whose first and second derivatives are
    single kernels too, where a ``torch.where`` of two branches costs several ops per backward.
    """
    return alpha * F.elu(t / alpha)


def shifted_sum(taps: Tensor) -> Tensor:
    """Sum of k x k shifted maps: the spatial part of a k x k filter, as one linear map.

    Args:
        taps: (k, k, N, H, W); ``taps[i, j]`` is the filter tap (i, j) applied to every cell.

    Returns:
        (N, H, W) ``out[n, y, x] = sum_ij taps[i, j, n, y + i - k // 2, x + j - k // 2]`` (zero
        outside the map): ``conv2d`` with padding k // 2 cropped to H x W.

    Each shift is an ``F.pad`` with a negative pad on one side (a crop), first along x for all
    rows of taps at once, then along y: 2k pads, whose backward and double backward are pads
    again. Slicing one padded tensor instead makes each slice's backward allocate and zero a
    gradient of the whole padded tensor.
    """
    size = taps.shape[0]
    pad = size // 2
    rows = sum(F.pad(col, (pad - j, j - pad)) for j, col in enumerate(taps.unbind(1)))
    return sum(F.pad(row, (0, 0, pad - i, i - pad)) for i, row in enumerate(rows.unbind(0)))


@dataclass
class AtomClassifierProblem:
    """ATOM's classification problem: min_w sum_j gamma_j ||phi2(f(x_j; w)) - y_j||^2 + reg.

    w1 is a 1x1 projection (D, C), w2 a (D, k, k) filter with one output channel applied with
    'same' padding k // 2 and the output cropped to H x W (for ATOM's even k = 4 this drops the
    last row and column), phi2 = :func:`pelu`. As a least-squares problem the
    residuals are sqrt(gamma_j) (phi2(f(x_j)) - y_j), sqrt(lambda_1) w1 and sqrt(lambda_2) w2,
    and the objective is 1/2 of their squared norm.

    Attributes:
        features: (N, C, H, W) training samples x_j.
        labels: (N, 1, H, W) Gaussian labels y_j.
        sample_weights: (N,) gamma_j.
        projection_reg, filter_reg: lambda_1 and lambda_2 (ATOM: 1e-4 and 0.1).
        alpha: PELU parameter (ATOM: 0.05).
    """

    features: Tensor
    labels: Tensor
    sample_weights: Tensor
    projection_reg: float = 1e-4
    filter_reg: float = 0.1
    alpha: float = 0.05
    _sqrt_weights: Tensor = field(init=False, repr=False)
    _flat_features: Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._sqrt_weights = self.sample_weights.sqrt().view(-1, 1, 1, 1)
        self._flat_features = self.features.transpose(0, 1).flatten(1)  # (C, N*H*W)

    @classmethod
    def synthetic(
        cls,
        num_samples: int = 30,
        channels: int = 256,
        size: int = 18,
        sigma: float = 0.9,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> AtomClassifierProblem:
        """Features with a target pattern at a random position per sample, labels centred on it.

        The features are non-negative smooth noise (like post-ReLU backbone features) plus a fixed
        random pattern of 4x4 cells at the target, each sample scaled to unit mean power as in
        ATOM; the labels are Gaussians of std ``sigma`` cells at the target centre, and every
        sample weighs 1/N.
        """
        shape = (num_samples, channels, size, size)
        noise = torch.randn(shape, generator=generator, dtype=dtype)
        features = F.avg_pool2d(noise, 3, stride=1, padding=1).clamp(min=0)
        pattern = torch.rand((channels, 4, 4), generator=generator, dtype=dtype)
        corner = torch.randint(2, size - 6, (num_samples, 2), generator=generator)
        for sample, (row, col) in enumerate(corner.tolist()):
            features[sample, :, row : row + 4, col : col + 4] += pattern
        features = features / features.pow(2).mean(dim=(1, 2, 3), keepdim=True).sqrt()
        grid = torch.arange(size, dtype=dtype)
        centre = corner.to(dtype) + 1.5  # the centre of the 4x4 pattern, in cells
        gauss_y = torch.exp(-0.5 * ((grid - centre[:, :1]) / sigma) ** 2)  # (N, size)
        gauss_x = torch.exp(-0.5 * ((grid - centre[:, 1:]) / sigma) ** 2)
        labels = (gauss_y[:, :, None] * gauss_x[:, None, :])[:, None]
        weights = torch.full((num_samples,), 1.0 / num_samples, dtype=dtype)
        return cls(features, labels, weights)

    def initial_params(
        self,
        projection_dim: int = 64,
        filter_size: int = 4,
        generator: torch.Generator | None = None,
    ) -> list[Tensor]:
        """ATOM's random initialisation: w1 with std 1/sqrt(C), w2 with std 1/(D k^2)."""
        channels, dtype = self.features.shape[1], self.features.dtype
        w1 = torch.randn((projection_dim, channels), generator=generator, dtype=dtype)
        w2 = torch.randn(
            (projection_dim, filter_size, filter_size), generator=generator, dtype=dtype
        )
        return [w1 / math.sqrt(channels), w2 / w2.numel()]

    def preconditioner(self) -> list[float]:
        """ATOM's diagonal preconditioner: each block's regularisation weight."""
        return [self.projection_reg, self.filter_reg]

    def scores(self, params: list[Tensor]) -> Tensor:
        """(N, 1, H, W) raw classifier response f(x_j; w) (no output activation).

        Written as matrix products rather than conv2d, whose double backward, which
        Gauss-Newton needs, is several times slower on a CPU. The 1x1 projection w1 and the
        filter's taps w2 are linear in the features, so they fold into one (k*k, C) matrix
        w2^T w1 applied to the raw features: a (k*k, C) x (C, N*H*W) product, 4x fewer
        multiply-adds than the projection (D, C) x (C, N*H*W) alone for ATOM's D = 64 = 4 k*k.
        Autograd differentiates through the fold, so the derivatives are those of w2 * (w1 x).
        The taps are then summed shifted (:func:`shifted_sum`); the result equals conv2d of
        the projected features with padding k // 2 cropped to H x W.
        """
        w1, w2 = params
        return self._filter(w2.flatten(1).T @ w1, w2.shape[-1])

    def _filter(self, taps_matrix: Tensor, size: int) -> Tensor:
        """(k*k, C) filter taps on the feature channels -> (N, 1, H, W) response."""
        num, _, height, width = self.features.shape
        taps = (taps_matrix @ self._flat_features).view(size, size, num, height, width)
        return shifted_sum(taps)[:, None]

    def residuals(self, params: list[Tensor]) -> list[Tensor]:
        """[data residuals (N, 1, H, W), sqrt(lambda_1) w1, sqrt(lambda_2) w2]."""
        w1, w2 = params
        data = self._sqrt_weights * (pelu(self.scores(params), self.alpha) - self.labels)
        return [data, math.sqrt(self.projection_reg) * w1, math.sqrt(self.filter_reg) * w2]

    def filter_residuals(self, params: list[Tensor]) -> list[Tensor]:
        """[data residuals, sqrt(lambda_2) w2] for params = [w2] when ``features`` are already
        projected (D channels): ATOM's per-frame updates, which optimise the filter only."""
        (w2,) = params
        response = self._filter(w2.flatten(1).T, w2.shape[-1])
        data = self._sqrt_weights * (pelu(response, self.alpha) - self.labels)
        return [data, math.sqrt(self.filter_reg) * w2]

    def loss(self, params: list[Tensor]) -> Tensor:
        """1/2 ||r(w)||^2."""
        return 0.5 * sum(r.pow(2).sum() for r in self.residuals(params))


def first_order_losses(
    loss_fn: Callable[[list[Tensor]], Tensor],
    params: list[Tensor],
    steps: int,
    optimizer: str = "adam",
    lr: float = 1e-2,
    momentum: float = 0.9,
) -> Tensor:
    """Baseline: minimise ``loss_fn`` with ``steps`` Adam or SGD (with momentum) steps.

    Each step costs one forward and one backward pass. Returns the (steps + 1,) losses, from the
    initial parameters to the final ones (the last one costs a forward pass more).
    """
    params = [p.detach().clone().requires_grad_(True) for p in params]
    if optimizer == "adam":
        opt = torch.optim.Adam(params, lr=lr)
    elif optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=lr, momentum=momentum)
    else:
        raise ValueError(f"optimizer must be 'adam' or 'sgd', got {optimizer!r}")
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(params)
        loss.backward()
        losses.append(loss.detach())
        opt.step()
    with torch.no_grad():
        losses.append(loss_fn(params))
    return torch.stack(losses)
