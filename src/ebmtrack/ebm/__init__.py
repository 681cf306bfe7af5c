"""Conditional energy-based models p(y|x) ∝ exp f(x, y) for regression.

A model is any ``nn.Module`` called as ``model(x, y)`` with candidates ``y`` of shape
``(B, M, D)`` that returns the unnormalized log-density ``f(x, y)`` of shape ``(B, M)``.
This package holds the Gaussian-mixture noise distributions, the seven training losses
(``LOSSES``), Langevin sampling and prediction by gradient ascent (Algorithm S1).
"""

from .losses import (
    LOSSES,
    dsm_loss,
    get_loss,
    kld_is_loss,
    ml_is_loss,
    ml_mcmc_loss,
    nce_loss,
    nce_plus_loss,
    sm_loss,
)
from .noise import GaussianMixtureNoise
from .sampling import gradient_ascent, langevin_sample, score_and_grad

__all__ = [
    "LOSSES",
    "GaussianMixtureNoise",
    "dsm_loss",
    "get_loss",
    "gradient_ascent",
    "kld_is_loss",
    "langevin_sample",
    "ml_is_loss",
    "ml_mcmc_loss",
    "nce_loss",
    "nce_plus_loss",
    "score_and_grad",
    "sm_loss",
]
