"""Sampling from and maximizing an EBM p(y|x) ∝ exp f(x, y) with gradients in y.

Conventions for every function here: ``model(x, y)`` takes ``x`` with leading batch dimension
``B`` and candidates ``y`` of shape ``(B, M, D)`` and returns ``f(x, y)`` of shape ``(B, M)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn


def check_candidates(x: Tensor, y: Tensor, name: str = "y") -> None:
    """Raise ``ValueError`` unless ``y`` is ``(B, M, D)`` with ``M >= 1`` and ``B == len(x)``."""
    if y.ndim != 3 or y.shape[1] < 1 or y.shape[2] < 1:
        raise ValueError(f"{name} must have shape (B, M, D) with M >= 1, got {tuple(y.shape)}")
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"x and {name} must share the batch size, got {x.shape[0]} and {y.shape[0]}"
        )


def score_and_grad(model: nn.Module, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """``f(x, y)`` of shape ``(B, M)`` and ``∇_y f`` of shape ``(B, M, D)``, both detached.

    Each output depends only on its own candidate, so the gradient of the sum is the per-candidate
    gradient. Parameter gradients are not accumulated. A model may compute both itself, faster
    (a hand-written backward pass, say), by providing a method ``score_and_grad(x, y)`` with this
    contract; it is used when present.
    """
    own = getattr(model, "score_and_grad", None)
    if callable(own):
        value, grad = own(x, y)
        return value.detach(), grad.detach()
    with torch.enable_grad():
        y = y.detach().requires_grad_(True)
        value = model(x, y)
        (grad,) = torch.autograd.grad(value.sum(), y)
    return value.detach(), grad


def langevin_sample(
    model: nn.Module,
    x: Tensor,
    y_init: Tensor,
    num_steps: int,
    step_length: float,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Run ``num_steps`` of Langevin dynamics (paper eq. 9) from ``y_init`` ``(B, M, D)``.

    ``y <- y + alpha^2 / 2 * ∇_y f(x, y) + alpha * eps``, ``eps ~ N(0, I)``; returns the detached
    final states, shape ``(B, M, D)``. ``num_steps = 0`` returns ``y_init`` unchanged.
    """
    check_candidates(x, y_init, "y_init")
    if int(num_steps) < 0:
        raise ValueError(f"num_steps must be >= 0, got {num_steps}")
    if not step_length > 0:
        raise ValueError(f"step_length must be positive, got {step_length}")
    y = y_init.detach()
    for _ in range(int(num_steps)):
        _, grad = score_and_grad(model, x, y)
        noise = torch.randn(y.shape, generator=generator, device=y.device, dtype=y.dtype)
        y = y + 0.5 * step_length**2 * grad + step_length * noise
    return y


def gradient_ascent(
    model: nn.Module,
    x: Tensor,
    y_init: Tensor,
    num_iters: int = 10,
    step_length: float | Sequence[float] | Tensor = 1e-3,
    decay: float = 0.5,
) -> tuple[Tensor, Tensor]:
    """Maximize ``f(x, ·)`` from many starting points (Algorithm S1 of the paper's appendix).

    Each candidate keeps its own step length: a step ``y + lambda * ∇_y f`` is accepted only when
    it increases ``f``; otherwise that candidate's ``lambda`` is multiplied by ``decay``.

    Args:
        model: the EBM, ``model(x, y) -> (B, M)``.
        x: inputs with leading batch dimension ``B``.
        y_init: starting points ``(B, M, D)``.
        num_iters: the number of iterations ``T``.
        step_length: ``lambda``, a scalar or one value per dimension ``(D,)``.
        decay: ``eta`` in (0, 1].

    Returns:
        ``(y, f)``: the refined candidates ``(B, M, D)`` and their values ``(B, M)``, detached.
    """
    check_candidates(x, y_init, "y_init")
    if int(num_iters) < 0:
        raise ValueError(f"num_iters must be >= 0, got {num_iters}")
    if not 0 < decay <= 1:
        raise ValueError(f"decay must be in (0, 1], got {decay}")
    dim = y_init.shape[-1]
    lam = torch.as_tensor(step_length, dtype=y_init.dtype, device=y_init.device)
    if lam.ndim > 1 or (lam.ndim == 1 and lam.shape[0] != dim) or bool((lam <= 0).any()):
        raise ValueError(
            f"step_length must be positive, a scalar or {dim} values, got {lam.tolist()}"
        )
    lam = lam.expand(dim).expand(y_init.shape).clone()  # per candidate and dimension
    y = y_init.detach()
    value, grad = score_and_grad(model, x, y)
    for _ in range(int(num_iters)):
        proposal = y + lam * grad
        new_value, new_grad = score_and_grad(model, x, proposal)
        accept = new_value > value  # (B, M)
        y = torch.where(accept[..., None], proposal, y)
        grad = torch.where(accept[..., None], new_grad, grad)
        value = torch.where(accept, new_value, value)
        lam = torch.where(accept[..., None], lam, lam * decay)
    return y, value
