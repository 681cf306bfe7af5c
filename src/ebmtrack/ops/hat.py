"""The bilinear hat k(t) = max(0, 1 - |t|) and its CDF: the 1-D kernel of Precise RoI Pooling
and of the box head's closed-form gradient."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["hat", "hat_cdf"]


def hat_cdf(t: Tensor) -> Tensor:
    """Cumulative integral of the bilinear hat k(t) = max(0, 1 - |t|), elementwise.

    0 for t <= -1, (t + 1)^2 / 2 on [-1, 0], 1 - (1 - t)^2 / 2 on [0, 1] and 1 for t >= 1; on
    [-1, 1] both pieces equal 1/2 + t - t |t| / 2. Continuously differentiable, derivative k(t).
    """
    t = t.clamp(-1.0, 1.0)
    return torch.addcmul(t + 0.5, t, t.abs(), value=-0.5)


def hat(t: Tensor) -> Tensor:
    """k(t) = max(0, 1 - |t|), the derivative of :func:`hat_cdf`."""
    return (1.0 - t.abs()).clamp(min=0.0)
