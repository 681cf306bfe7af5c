"""The two synthetic 1-D regression data sets of the paper (appendix B.1).

Data set 1: for ``x < 0`` a mixture with weight 0.8 on ``N(sin x, 0.075^2)`` and 0.2 on
``N(-sin x, 0.075^2)`` (the reference code's weights and standard deviation); for ``x >= 0``,
``y + 1 ~ LogNormal(mu=0, sigma=0.25)`` (the reference code shifts the log-normal by -1).
Data set 2: ``y ~ N(sin x, sigma(x)^2)`` with ``sigma(x) = 0.15 / (1 + exp(-x))`` (eq. S1).
Inputs are ``x ~ U[-3, 3]``; each training set has 2000 pairs.
"""

from __future__ import annotations

import math

import numpy as np

DATASETS = (1, 2)
NUM_TRAIN = 2000
X_RANGE = (-3.0, 3.0)
MIXTURE_WEIGHT = 0.8
MIXTURE_STD = 0.075
LOGNORMAL_SIGMA = 0.25


def check_dataset(dataset: int) -> int:
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    return int(dataset)


def _normal_pdf(y: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * ((y - mean) / std) ** 2) / (std * math.sqrt(2.0 * math.pi))


def true_density(dataset: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The true ``p(y|x)`` at broadcastable arrays ``x`` and ``y`` (float64)."""
    check_dataset(dataset)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if dataset == 2:
        return _normal_pdf(y, np.sin(x), 0.15 / (1.0 + np.exp(-x)))
    mixture = MIXTURE_WEIGHT * _normal_pdf(y, np.sin(x), MIXTURE_STD) + (
        1.0 - MIXTURE_WEIGHT
    ) * _normal_pdf(y, -np.sin(x), MIXTURE_STD)
    z = np.maximum(y + 1.0, 1e-300)
    lognormal = np.where(
        y + 1.0 > 0,
        np.exp(-0.5 * (np.log(z) / LOGNORMAL_SIGMA) ** 2)
        / (z * LOGNORMAL_SIGMA * math.sqrt(2.0 * math.pi)),
        0.0,
    )
    return np.where(x < 0, mixture, lognormal)


def sample_dataset(
    dataset: int, num: int = NUM_TRAIN, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``num`` pairs ``(x, y)``, float32 arrays of shape ``(num,)``, reproducible from ``seed``."""
    check_dataset(dataset)
    rng = np.random.default_rng(seed)
    x = rng.uniform(*X_RANGE, size=num)
    if dataset == 2:
        y = rng.normal(np.sin(x), 0.15 / (1.0 + np.exp(-x)))
    else:
        sign = np.where(rng.uniform(size=num) < MIXTURE_WEIGHT, 1.0, -1.0)
        mixture = rng.normal(sign * np.sin(x), MIXTURE_STD)
        lognormal = rng.lognormal(0.0, LOGNORMAL_SIGMA, size=num) - 1.0
        y = np.where(x < 0, mixture, lognormal)
    return x.astype(np.float32), y.astype(np.float32)
