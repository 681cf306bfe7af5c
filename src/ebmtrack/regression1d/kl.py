"""D_KL(p(y|x) || p(y|x; theta)) on a uniform grid (appendix B.3)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .data import X_RANGE, true_density

GRID_SIZE = 2048
TRUE_DENSITY_EPS = 1e-30  # added before normalizing, as the reference evaluation does


def grid_kl_divergence(p_true: np.ndarray, log_q: np.ndarray) -> float:
    """Mean over rows of the discrete ``KL(p || q)`` between row-normalized distributions.

    Args:
        p_true: non-negative (unnormalized) densities, shape ``(X, Y)``; ``eps`` is added to every
            value before normalizing so that every cell has positive mass.
        log_q: unnormalized log-densities of the model, shape ``(X, Y)``; normalized per row with a
            log-softmax (stable for any magnitude of ``f``).
    """
    p_true = np.asarray(p_true, dtype=np.float64)
    log_q = np.asarray(log_q, dtype=np.float64)
    if p_true.shape != log_q.shape or p_true.ndim != 2:
        raise ValueError(
            f"p_true and log_q must be equal (X, Y) arrays, got {p_true.shape} and {log_q.shape}"
        )
    p = p_true + TRUE_DENSITY_EPS
    p = p / p.sum(axis=1, keepdims=True)
    log_q = log_q - log_q.max(axis=1, keepdims=True)
    log_q = log_q - np.log(np.exp(log_q).sum(axis=1, keepdims=True))
    return float((p * (np.log(p) - log_q)).sum(axis=1).mean())


def evaluation_grid(size: int = GRID_SIZE) -> np.ndarray:
    """``size`` points of ``linspace(-3, 3)`` in float32, used for both x and y."""
    return np.linspace(*X_RANGE, size, dtype=np.float32)


@torch.no_grad()
def model_log_density_grid(model: nn.Module, size: int = GRID_SIZE, chunk: int = 128) -> np.ndarray:
    """``f(x, y)`` on the ``size x size`` grid, shape ``(X, Y)`` (rows: x values)."""
    grid = torch.from_numpy(evaluation_grid(size))
    y = grid.reshape(1, -1, 1)
    rows = [model(xs, y.expand(len(xs), -1, -1)) for xs in grid.split(chunk)]
    return torch.cat(rows).double().numpy()


def model_kl(model: nn.Module, dataset: int, size: int = GRID_SIZE) -> float:
    """D_KL between the true density of ``dataset`` and the model, as in appendix B.3."""
    grid = evaluation_grid(size).astype(np.float64)
    p_true = true_density(dataset, grid[:, None], grid[None, :])
    return grid_kl_divergence(p_true, model_log_density_grid(model, size))
