"""The D_KL that a perfect model of a smoothed training target scores (floors of Table 1).

Three losses do not fit p(y|x) itself but p(y|x) convolved with a noise kernel k:

- KLD-IS (eq. 6-7) fits p(y|y_i) = N(y; y_i, sigma^2) around each label: its optimum is p * N(0,
  sigma^2), sigma = 0.025;
- NCE+ (eq. 15-16) scores jittered positives y_i + nu, nu ~ p_beta: its target is p * p_beta, the
  mixture of N(0, (beta sigma_k)^2) with beta = 0.025, sigma_k = 0.1, 0.8 (the study's convention:
  standard deviations scaled by beta);
- DSM (eq. 14) matches the score of the data smoothed by N(0, sigma^2), sigma = 0.2 (Vincent,
  2011): its optimum is p * N(0, sigma^2).

Even a model that reached that optimum exactly scores D_KL(p || p * k) > 0 on the evaluation grid
(appendix B.3): :func:`smoothed_target_kl` computes it with the true density, the Gaussian parts
convolved in closed form and the log-normal part of data set 1 numerically.

Run ``python -m ebmtrack.regression1d.floors`` to print the floors of both data sets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .data import (
    LOGNORMAL_SIGMA,
    MIXTURE_STD,
    MIXTURE_WEIGHT,
    _normal_pdf,
    check_dataset,
    true_density,
)
from .kl import GRID_SIZE, TRUE_DENSITY_EPS, evaluation_grid, grid_kl_divergence

SMOOTHING_STDS: dict[str, tuple[float, ...]] = {
    "kld-is": (0.025,),
    "nce+": (0.025 * 0.1, 0.025 * 0.8),
    "dsm": (0.2,),
}
"""Standard deviations of the equal-weight Gaussian mixture k each method's target is smoothed
with, from the B.4 hyper-parameters of :data:`~ebmtrack.regression1d.methods.METHODS`."""

_QUADRATURE_POINTS = 801
_QUADRATURE_HALF_WIDTH = 8.0  # in kernel standard deviations


def _lognormal_pdf(y: np.ndarray) -> np.ndarray:
    z = np.maximum(y + 1.0, 1e-300)
    density = np.exp(-0.5 * (np.log(z) / LOGNORMAL_SIGMA) ** 2) / (
        z * LOGNORMAL_SIGMA * math.sqrt(2.0 * math.pi)
    )
    return np.where(y + 1.0 > 0, density, 0.0)


def _smoothed_lognormal(y: np.ndarray, std: float) -> np.ndarray:
    """(LogNormal - 1) * N(0, std^2) at ``y`` (1-D) by the trapezoid rule over +-8 std."""
    t = np.linspace(-_QUADRATURE_HALF_WIDTH * std, _QUADRATURE_HALF_WIDTH * std,
                    _QUADRATURE_POINTS)  # fmt: skip
    kernel = _normal_pdf(t, 0.0, std)
    return np.trapezoid(_lognormal_pdf(y[:, None] - t[None, :]) * kernel, t, axis=1)


def smoothed_true_density(
    dataset: int, x: np.ndarray, y: np.ndarray, stds: Sequence[float]
) -> np.ndarray:
    """The true p(y|x) convolved in y with the equal-weight mixture of N(0, s^2), s in ``stds``,
    on the grid ``x`` (1-D) by ``y`` (1-D): shape ``(len(x), len(y))``."""
    check_dataset(dataset)
    if not stds or any(not s > 0 for s in stds):
        raise ValueError(f"stds must be positive, got {tuple(stds)}")
    x = np.asarray(x, dtype=np.float64)[:, None]
    y = np.asarray(y, dtype=np.float64)[None, :]
    total = np.zeros((x.shape[0], y.shape[1]))
    for s in stds:
        if dataset == 2:
            total += _normal_pdf(y, np.sin(x), np.hypot(0.15 / (1.0 + np.exp(-x)), s))
            continue
        width = math.hypot(MIXTURE_STD, s)
        mixture = MIXTURE_WEIGHT * _normal_pdf(y, np.sin(x), width) + (
            1.0 - MIXTURE_WEIGHT
        ) * _normal_pdf(y, -np.sin(x), width)
        total += np.where(x < 0, mixture, _smoothed_lognormal(y[0], s)[None, :])
    return total / len(stds)


def smoothed_target_kl(dataset: int, stds: Sequence[float], size: int = GRID_SIZE) -> float:
    """D_KL(p || p * k) on the ``size x size`` evaluation grid (appendix B.3): the score of a
    model equal to the smoothed target."""
    grid = evaluation_grid(size).astype(np.float64)
    p_true = true_density(dataset, grid[:, None], grid[None, :])
    smoothed = smoothed_true_density(dataset, grid, grid, stds)
    return grid_kl_divergence(p_true, np.log(smoothed + TRUE_DENSITY_EPS))


def target_floors(size: int = GRID_SIZE) -> dict[str, dict[int, float]]:
    """:func:`smoothed_target_kl` of every method of :data:`SMOOTHING_STDS` on both data sets."""
    return {
        method: {d: smoothed_target_kl(d, stds, size) for d in (1, 2)}
        for method, stds in SMOOTHING_STDS.items()
    }


def main() -> int:
    print("| method | kernel stds | floor set 1 | floor set 2 | floor mean |")
    print("|---|---|---|---|---|")
    for method, floors in target_floors().items():
        stds = ", ".join(f"{s:g}" for s in SMOOTHING_STDS[method])
        mean = (floors[1] + floors[2]) / 2
        print(f"| {method} | {stds} | {floors[1]:.4f} | {floors[2]:.4f} | {mean:.4f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
