"""Gaussian-mixture noise and proposal distributions (paper eq. 4, 11 and 15).

All distributions here are over *offsets* ``y - y_i`` from a label ``y_i``: a mixture of ``K``
zero-mean Gaussians with equal weights ``1/K`` and diagonal covariance,

    q(y | y_i) = (1/K) * sum_k N(y; y_i, diag(sigma_k)^2).

``sigmas`` is either a sequence of ``K`` scalars (the same standard deviation in every dimension,
as in the paper) or a ``(K, D)`` array of per-dimension standard deviations (as used for boxes,
e.g. centre and log-size coordinates with different scales).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

SigmaLike = float | Sequence[float] | Sequence[Sequence[float]] | Tensor


def as_sigma_table(sigmas: SigmaLike, dim: int, name: str = "sigmas") -> Tensor:
    """Standard deviations as a float tensor of shape ``(K, dim)``; validates them.

    Args:
        sigmas: a scalar (K = 1), ``K`` scalars, or a ``(K, dim)`` table.
        dim: the target dimension ``D``.
        name: argument name used in error messages.
    """
    table = torch.as_tensor(sigmas, dtype=torch.float32)
    if table.ndim == 0:
        table = table.reshape(1, 1)
    if table.ndim == 1:
        table = table[:, None]
    if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] not in (1, dim):
        raise ValueError(
            f"{name} must be a scalar, K scalars or a (K, {dim}) table, got shape "
            f"{tuple(torch.as_tensor(sigmas).shape)}"
        )
    if not bool(torch.isfinite(table).all()) or bool((table <= 0).any()):
        raise ValueError(f"{name} must be positive and finite, got {table.flatten().tolist()}")
    return table.expand(table.shape[0], dim).contiguous()


class GaussianMixtureNoise:
    """Equal-weight mixture of ``K`` zero-mean diagonal Gaussians in ``D`` dimensions.

    Args:
        sigmas: standard deviations, ``K`` scalars or a ``(K, D)`` table.
        dim: the dimension ``D`` of the offsets.
        name: the argument name that error messages use for ``sigmas``.
    """

    def __init__(self, sigmas: SigmaLike, dim: int = 1, name: str = "sigmas"):
        if int(dim) < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = int(dim)
        self.sigmas = as_sigma_table(sigmas, self.dim, name)

    @property
    def num_components(self) -> int:
        return self.sigmas.shape[0]

    def sample(
        self,
        shape: Sequence[int],
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
    ) -> Tensor:
        """Draw offsets of shape ``(*shape, D)``: a uniform component, then a Gaussian."""
        shape = tuple(int(s) for s in shape)
        sigmas = self.sigmas.to(device)
        component = torch.randint(
            self.num_components, shape, generator=generator, device=sigmas.device
        )
        eps = torch.randn(shape + (self.dim,), generator=generator, device=sigmas.device)
        return eps * sigmas[component]

    def log_prob(self, offsets: Tensor) -> Tensor:
        """Log-density of offsets ``(..., D)``; returns shape ``(...)``. Stable via logsumexp."""
        if offsets.shape[-1] != self.dim:
            raise ValueError(
                f"offsets must end in dimension D={self.dim}, got {tuple(offsets.shape)}"
            )
        sigmas = self.sigmas.to(device=offsets.device, dtype=offsets.dtype)  # (K, D)
        z = offsets.unsqueeze(-2) / sigmas  # (..., K, D)
        per_component = -0.5 * z.square().sum(-1) - sigmas.log().sum(-1)  # (..., K)
        const = 0.5 * self.dim * math.log(2.0 * math.pi) + math.log(self.num_components)
        return torch.logsumexp(per_component, dim=-1) - const

    def scaled(self, factor: float) -> GaussianMixtureNoise:
        """The same mixture with every standard deviation multiplied by ``factor``."""
        return GaussianMixtureNoise(self.sigmas * float(factor), self.dim)

    def __repr__(self) -> str:
        return f"GaussianMixtureNoise(sigmas={self.sigmas.tolist()})"
