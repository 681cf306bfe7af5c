"""The seven EBM training losses of "How to Train Your Energy-Based Model for Regression".

Every loss has the signature ``loss(model, x, y, **hyperparameters) -> scalar tensor``:

- ``model(x, y_cand)`` maps inputs ``x`` (leading batch dimension ``B``) and candidates
  ``y_cand`` of shape ``(B, M, D)`` to the unnormalized log-density ``f(x, y)`` of shape ``(B, M)``;
- ``y`` holds the labels, shape ``(B, D)``;
- the result is the mini-batch mean of the per-example loss, to be minimized.

Every hyperparameter has a default: the paper's B.4 values for its first 1-D data set (M = 1024).
Sample-based losses accept ``generator`` for reproducible draws and ``shared_samples``: when true,
one set of ``M`` offsets is drawn per mini-batch and shared by all examples (what the reference
1-D code does); when false every example gets its own draws (the paper's equations).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from .noise import GaussianMixtureNoise, SigmaLike
from .sampling import langevin_sample

LossFn = Callable[..., Tensor]


def _check_labels(x: Tensor, y: Tensor) -> None:
    if y.ndim != 2 or y.shape[1] < 1:
        raise ValueError(f"y must have shape (B, D), got {tuple(y.shape)}")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must share the batch size, got {x.shape[0]} and {y.shape[0]}")


def _check_num_samples(num_samples: int) -> int:
    if int(num_samples) != num_samples or num_samples < 1:
        raise ValueError(f"num_samples (M) must be an integer >= 1, got {num_samples}")
    return int(num_samples)


def _evaluate(model: nn.Module, x: Tensor, y_cand: Tensor) -> Tensor:
    """``model(x, y_cand)`` with an output-shape check."""
    out = model(x, y_cand)
    if out.shape != y_cand.shape[:2]:
        raise ValueError(
            f"model(x, y) must return shape (B, M) = {tuple(y_cand.shape[:2])}, "
            f"got {tuple(out.shape)}"
        )
    return out


def _draw_offsets(
    noise: GaussianMixtureNoise,
    batch: int,
    num_samples: int,
    shared: bool,
    generator: torch.Generator | None,
    like: Tensor,
) -> tuple[Tensor, Tensor]:
    """Offsets ``(B, M, D)`` from ``noise`` and their log-density ``(B, M)``."""
    shape = (1, num_samples) if shared else (batch, num_samples)
    offsets = noise.sample(shape, generator=generator, device=like.device).to(like.dtype)
    log_q = noise.log_prob(offsets)
    return offsets.expand(batch, -1, -1), log_q.expand(batch, -1)


def _importance_log_partition(scores: Tensor, log_q: Tensor) -> Tensor:
    """IS estimate of ``log Z = log (1/M) sum_m exp(f_m) / q_m``, per example ``(B,)``."""
    return torch.logsumexp(scores - log_q, dim=1) - math.log(scores.shape[1])


def ml_is_loss(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    num_samples: int = 1024,
    proposal_sigmas: SigmaLike = (0.2, 1.6),
    shared_samples: bool = False,
    generator: torch.Generator | None = None,
) -> Tensor:
    """ML with importance sampling (eq. 5): ``log (1/M) sum exp f_m / q_m - f(x, y_i)``."""
    _check_labels(x, y)
    num_samples = _check_num_samples(num_samples)
    proposal = GaussianMixtureNoise(proposal_sigmas, y.shape[1], "proposal_sigmas")
    offsets, log_q = _draw_offsets(proposal, y.shape[0], num_samples, shared_samples, generator, y)
    y_cand = torch.cat([y[:, None, :], y[:, None, :] + offsets], dim=1)
    scores = _evaluate(model, x, y_cand)
    return (_importance_log_partition(scores[:, 1:], log_q) - scores[:, 0]).mean()


def kld_is_loss(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    num_samples: int = 1024,
    proposal_sigmas: SigmaLike = (0.2, 1.6),
    label_sigma: SigmaLike = 0.025,
    shared_samples: bool = False,
    generator: torch.Generator | None = None,
) -> Tensor:
    """KL divergence with importance sampling (eq. 7).

    ``log (1/M) sum exp f_m / q_m - (1/M) sum f_m p_m / q_m`` with the assumed label density
    ``p(y | y_i) = N(y; y_i, label_sigma^2)`` (a scalar or one value per dimension).
    """
    _check_labels(x, y)
    num_samples = _check_num_samples(num_samples)
    dim = y.shape[1]
    proposal = GaussianMixtureNoise(proposal_sigmas, dim, "proposal_sigmas")
    label_density = GaussianMixtureNoise(
        torch.as_tensor(label_sigma, dtype=torch.float32).reshape(1, -1), dim, "label_sigma"
    )
    offsets, log_q = _draw_offsets(proposal, y.shape[0], num_samples, shared_samples, generator, y)
    scores = _evaluate(model, x, y[:, None, :] + offsets)
    weights = torch.exp(label_density.log_prob(offsets) - log_q)
    return (_importance_log_partition(scores, log_q) - (scores * weights).mean(dim=1)).mean()


def ml_mcmc_loss(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    num_samples: int = 1024,
    num_steps: int = 16,
    step_length: float = 0.05,
    generator: torch.Generator | None = None,
) -> Tensor:
    """ML with MCMC (eq. 10): ``(1/M) sum f(x, y_m) - f(x, y_i)``.

    The ``M`` samples are the end points of ``num_steps`` (L) Langevin steps (eq. 9) with step
    length ``alpha = step_length``, each chain started at the label (contrastive divergence).
    """
    _check_labels(x, y)
    num_samples = _check_num_samples(num_samples)
    chains = y[:, None, :].expand(-1, num_samples, -1)
    chains = langevin_sample(model, x, chains, num_steps, step_length, generator=generator)
    scores = _evaluate(model, x, torch.cat([y[:, None, :], chains], dim=1))
    return (scores[:, 1:].mean(dim=1) - scores[:, 0]).mean()


def _ranking_nce(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    y0_offsets: Tensor | None,
    noise: GaussianMixtureNoise,
    offsets: Tensor,
    log_q: Tensor,
) -> Tensor:
    """Ranking NCE (eq. 12/16): cross-entropy of class 0 over logits ``f - log p_N``."""
    y0_offsets = torch.zeros_like(y) if y0_offsets is None else y0_offsets
    log_q0 = noise.log_prob(y0_offsets)  # (B,)
    y_cand = torch.cat([(y + y0_offsets)[:, None, :], y[:, None, :] + offsets], dim=1)
    logits = _evaluate(model, x, y_cand) - torch.cat([log_q0[:, None], log_q], dim=1)
    return -torch.log_softmax(logits, dim=1)[:, 0].mean()


def nce_loss(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    num_samples: int = 1024,
    noise_sigmas: SigmaLike = (0.1, 0.8),
    shared_samples: bool = False,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Ranking noise contrastive estimation (eq. 12), ``y^(i,0) = y_i``."""
    _check_labels(x, y)
    num_samples = _check_num_samples(num_samples)
    noise = GaussianMixtureNoise(noise_sigmas, y.shape[1], "noise_sigmas")
    offsets, log_q = _draw_offsets(noise, y.shape[0], num_samples, shared_samples, generator, y)
    return _ranking_nce(model, x, y, None, noise, offsets, log_q)


def nce_plus_loss(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    num_samples: int = 1024,
    noise_sigmas: SigmaLike = (0.1, 0.8),
    beta: float = 0.025,
    beta_is_variance: bool = False,
    shared_samples: bool = False,
    generator: torch.Generator | None = None,
) -> Tensor:
    """NCE+ (eq. 16): ranking NCE where the positive is the jittered label ``y_i + nu_i``.

    ``nu_i ~ p_beta``, the noise mixture with every component's standard deviation scaled:
    by ``beta`` (the reference code's convention, for which the paper's ``beta`` values were tuned;
    the default) or by ``sqrt(beta)`` when ``beta_is_variance`` (eq. 15 read literally: variance
    ``beta * sigma_k^2``). The logit of the positive uses ``log p_N(y_i + nu_i | y_i)``.
    Noise samples are drawn before ``nu``, so with the same generator state NCE+ with a tiny
    ``beta`` sees the same noise as NCE.
    """
    _check_labels(x, y)
    num_samples = _check_num_samples(num_samples)
    if not beta > 0:
        raise ValueError(f"beta must be positive (beta -> 0 is plain NCE), got {beta}")
    batch, dim = y.shape
    noise = GaussianMixtureNoise(noise_sigmas, dim, "noise_sigmas")
    offsets, log_q = _draw_offsets(noise, batch, num_samples, shared_samples, generator, y)
    jitter = noise.scaled(math.sqrt(beta) if beta_is_variance else beta)
    nu = jitter.sample((1,) if shared_samples else (batch,), generator=generator, device=y.device)
    nu = nu.to(y.dtype).expand(batch, -1)
    return _ranking_nce(model, x, y, nu, noise, offsets, log_q)


def sm_loss(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """Score matching (eq. 13): ``tr(∇²_y f) + ½ ||∇_y f||²`` at the labels (double backprop)."""
    _check_labels(x, y)
    y = y.detach()[:, None, :].requires_grad_(True)  # (B, 1, D)
    value = _evaluate(model, x, y)
    (grad,) = torch.autograd.grad(value.sum(), y, create_graph=True)
    trace = sum(
        torch.autograd.grad(grad[..., d].sum(), y, create_graph=True)[0][..., d]
        for d in range(y.shape[-1])
    )
    return (trace + 0.5 * grad.square().sum(-1)).mean()


def dsm_loss(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    num_samples: int = 1024,
    sigma: float = 0.2,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Denoising score matching (eq. 14): ``||∇_y f(x, ỹ) + (ỹ - y_i) / sigma²||²``.

    ``ỹ ~ N(y_i, sigma² I)``, ``M`` noisy copies per example; mean over examples and copies.
    """
    _check_labels(x, y)
    num_samples = _check_num_samples(num_samples)
    if not sigma > 0:
        raise ValueError(f"sigma must be positive, got {sigma}")
    batch, dim = y.shape
    eps = torch.randn(
        (batch, num_samples, dim), generator=generator, device=y.device, dtype=y.dtype
    )
    y_noisy = (y.detach()[:, None, :] + sigma * eps).requires_grad_(True)
    value = _evaluate(model, x, y_noisy)
    (grad,) = torch.autograd.grad(value.sum(), y_noisy, create_graph=True)
    return (grad + eps / sigma).square().sum(-1).mean()


LOSSES: dict[str, LossFn] = {
    "ml-is": ml_is_loss,
    "kld-is": kld_is_loss,
    "ml-mcmc": ml_mcmc_loss,
    "nce": nce_loss,
    "nce+": nce_plus_loss,
    "sm": sm_loss,
    "dsm": dsm_loss,
}


def get_loss(name: str) -> LossFn:
    """The loss registered under ``name``; ``ValueError`` listing the valid names otherwise."""
    try:
        return LOSSES[name]
    except KeyError:
        raise ValueError(f"unknown EBM loss {name!r}; choose from {', '.join(LOSSES)}") from None
