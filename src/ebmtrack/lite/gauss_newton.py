"""Gauss-Newton with conjugate-gradient inner iterations in NumPy (ATOM's Algorithm 1), for
problems whose Jacobian products have a closed form.

The problem is min_w 1/2 ||r(w)||^2. A *linearisation* at w gives the loss, the gradient
``J^T r`` and the products ``J p`` and ``J^T q`` (:class:`Linearization`); each Gauss-Newton step
minimises 1/2 ||r + J dw||^2 with a few CG iterations on the normal equations. The iterations
are those of :func:`ebmtrack.optim.gauss_newton.solve_linearized` (PyTorch's, where the products
come from double backprop): the same algebra, tested equal on random problems. Parameters are
lists of arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

__all__ = ["BETAS", "Linearization", "direction_coefficient", "gauss_newton_cg", "solve_linearized"]

BETAS = ("fletcher-reeves", "polak-ribiere")

Arrays = list[np.ndarray]


class Linearization(Protocol):
    """Residuals r linearised at a point w (one array per parameter, one per residual block)."""

    def loss(self) -> float:
        """1/2 ||r(w)||^2."""

    def gradient(self) -> Arrays:
        """J^T r, one array per parameter."""

    def jvp(self, direction: Arrays) -> Arrays:
        """J p, one array per residual block."""

    def vjp(self, vector: Arrays) -> Arrays:
        """J^T q, one array per parameter."""


def _dot(a: Sequence[np.ndarray], b: Sequence[np.ndarray]):
    """sum_i <a_i, b_i>, a 0-d array of the inputs' dtype."""
    total = None
    for x, y in zip(a, b, strict=True):
        term = np.vdot(x, y)
        total = term if total is None else total + term
    return total


def direction_coefficient(grad, prec, prec_prev, rho, rho_prev, beta: str):
    """The CG coefficient b of p_k = z_k + b p_(k-1) (Fletcher-Reeves: ``rho / rho_prev``;
    Polak-Ribiere: ``max(0, (rho - g^T z_(k-1)) / rho_prev)``); 0 when ``rho_prev`` <= 0."""
    numerator = rho if beta == "fletcher-reeves" else np.maximum(rho - _dot(grad, prec_prev), 0)
    return numerator / rho_prev if rho_prev > 0 else rho * 0


def solve_linearized(
    lin: Linearization,
    cg_iters: int,
    preconditioner: Sequence[float] | None,
    beta: str,
) -> Arrays:
    """Minimise 1/2 ||r + J dw||^2 over dw with ``cg_iters`` (preconditioned) CG iterations from
    dw = 0; a zero curvature gives a zero step. ``preconditioner``: one number per parameter
    (CG uses g / m)."""
    if beta not in BETAS:
        raise ValueError(f"beta must be one of {BETAS}, got {beta!r}")
    grad = [-g for g in lin.gradient()]
    step = [np.zeros_like(g) for g in grad]
    direction = None
    rho_prev = prec_prev = None
    for it in range(cg_iters):
        prec = (
            grad
            if preconditioner is None
            else [g / np.asarray(m, g.dtype) for g, m in zip(grad, preconditioner, strict=True)]
        )
        rho = _dot(grad, prec)
        if direction is None:
            direction = prec
        else:
            coef = direction_coefficient(grad, prec, prec_prev, rho, rho_prev, beta)
            direction = [z + coef * d for z, d in zip(prec, direction, strict=True)]
        jac_dir = lin.jvp(direction)
        curvature = _dot(jac_dir, jac_dir)
        alpha = rho / curvature if curvature > 0 else rho * 0
        step = [s + alpha * d for s, d in zip(step, direction, strict=True)]
        if it + 1 < cg_iters:  # the last iteration needs no new gradient
            grad = [g - alpha * q for g, q in zip(grad, lin.vjp(jac_dir), strict=True)]
            rho_prev, prec_prev = rho, prec
    return step


def gauss_newton_cg(
    linearize: Callable[[Arrays], Linearization],
    params: Sequence[np.ndarray],
    gn_iters: int,
    cg_iters: int,
    preconditioner: Sequence[float] | None = None,
    beta: str = "fletcher-reeves",
) -> tuple[Arrays, list[float]]:
    """``gn_iters`` Gauss-Newton steps of ``cg_iters`` CG iterations each.

    Args:
        linearize: the problem: parameters -> its :class:`Linearization` there.
        params: the start (not modified).
        gn_iters, cg_iters, preconditioner, beta: as :func:`solve_linearized`.

    Returns:
        ``(params, losses)``: the new parameters and the loss at each linearisation point.
    """
    if gn_iters < 0 or cg_iters < 0:
        raise ValueError(f"gn_iters and cg_iters must be >= 0, got {gn_iters}, {cg_iters}")
    params = [np.array(p, copy=True) for p in params]
    losses = []
    for _ in range(gn_iters):
        lin = linearize(params)
        losses.append(float(lin.loss()))
        step = solve_linearized(lin, cg_iters, preconditioner, beta)
        params = [p + s for p, s in zip(params, step, strict=True)]
    return params, losses
