"""Gauss-Newton with conjugate-gradient inner iterations (ATOM, CVPR 2019, Algorithm 1).

The problem is min_w L(w) = 1/2 ||r(w)||^2 for a residual vector r (data terms and
regularisation terms alike). Each Gauss-Newton iteration linearises r at w and minimises the
quadratic model 1/2 ||r + J dw||^2 with a few CG iterations, which only need products with
J^T J. Those come from automatic differentiation without forming J, as the paper derives:

    h = J^T u = BackProp(r^T u, w)    for a dummy vector u (h is linear in u),
    J p = BackProp(h^T p, u),         then J^T (J p) = BackProp(r^T (J p), w).

So the caller only writes r(w); any differentiable model works, nothing is derived by hand.
Since h is linear in u, u may hold any value: taking u = r makes h's value the gradient J^T r,
so one backward pass per Gauss-Newton iteration gives both; each CG iteration then costs two
(J p, then J^T J p, which the last iteration skips), 2 x N_CG backward passes per GN iteration.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor

__all__ = [
    "Linearization",
    "OptimResult",
    "conjugate_gradient",
    "direction_coefficient",
    "gauss_newton_cg",
]

Residuals = Callable[[list[Tensor]], "Tensor | Sequence[Tensor]"]
BETAS = ("fletcher-reeves", "polak-ribiere")


class OptimResult(NamedTuple):
    """Result of :func:`gauss_newton_cg` and :func:`conjugate_gradient`.

    Attributes:
        params: the optimised parameters, new tensors (detached) shaped like the inputs.
        losses: (N,) 1/2 ||r||^2 at each linearisation point, then (unless ``final_loss`` is
            False) at the returned parameters.
    """

    params: list[Tensor]
    losses: Tensor


def _dot(a: Sequence[Tensor], b: Sequence[Tensor]) -> Tensor:
    return sum((x * y).sum() for x, y in zip(a, b, strict=True))


def _as_list(residual: Tensor | Sequence[Tensor]) -> list[Tensor]:
    return [residual] if isinstance(residual, Tensor) else list(residual)


def _grads(outputs, inputs, grad_outputs, create_graph: bool = False) -> list[Tensor]:
    """autograd.grad, with zeros where there is no dependence (constant outputs included)."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs, strict=True) if o.requires_grad]
    grads = [None] * len(inputs)
    if pairs:
        grads = torch.autograd.grad(
            [o for o, _ in pairs],
            inputs,
            [g for _, g in pairs],
            retain_graph=True,
            create_graph=create_graph,
            allow_unused=True,
        )
    return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs, strict=True)]


class Linearization:
    """The residuals r(w) and products with their Jacobian J at one point w.

    ``residuals`` holds the residual tensors that depend on w, the rows of J; :meth:`jvp`
    returns and :meth:`vjp` takes one tensor per entry of it. Building it costs one forward and
    one backward pass; :meth:`jvp` and :meth:`vjp` cost one backward pass each.

    Args:
        residuals: callable mapping the parameter list to a residual tensor or list of tensors.
        params: the point w, a list of tensors (copied and detached).
    """

    def __init__(self, residuals: Residuals, params: Sequence[Tensor]) -> None:
        self.params = [p.detach().requires_grad_(True) for p in params]
        with torch.enable_grad():
            all_residuals = _as_list(residuals(self.params))
        self._loss = 0.5 * sum(r.detach().pow(2).sum() for r in all_residuals)
        # Residual tensors that do not depend on params (e.g. the regularisation of a parameter
        # held fixed) count in the loss but have a zero Jacobian: leave them out of J.
        self.residuals = [r for r in all_residuals if r.requires_grad]
        if not self.residuals:
            raise ValueError("residuals(params) must depend on params")
        with torch.enable_grad():
            # h = J^T u, kept as a graph that is linear in u, so that backprop through it gives
            # J p whatever the value of u. Taking u = r (not 0) makes the value of h the gradient
            # J^T r, which saves a separate backward pass.
            self._dummy = [r.detach().requires_grad_(True) for r in self.residuals]
            self._jt_dummy = _grads(self.residuals, self.params, self._dummy, create_graph=True)

    def gradient(self) -> list[Tensor]:
        """J^T r, the gradient of 1/2 ||r||^2 at w, one tensor per param."""
        return [h.detach() for h in self._jt_dummy]

    def loss(self) -> Tensor:
        """1/2 ||r(w)||^2, a scalar tensor (all residuals, constant ones included)."""
        return self._loss

    def jvp(self, direction: Sequence[Tensor]) -> list[Tensor]:
        """J p for p shaped like params: BackProp(h^T p, u), one tensor per residual."""
        with torch.enable_grad():
            return _grads(self._jt_dummy, self._dummy, list(direction))

    def vjp(self, vector: Sequence[Tensor]) -> list[Tensor]:
        """J^T q for q shaped like the residuals: BackProp(r^T q, w), one tensor per param."""
        with torch.enable_grad():
            return _grads(self.residuals, self.params, list(vector))


def _check_options(preconditioner, params: Sequence[Tensor], beta: str, **counts: int) -> None:
    if beta not in BETAS:
        raise ValueError(f"beta must be one of {BETAS}, got {beta!r}")
    for name, value in counts.items():
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    if preconditioner is not None and len(preconditioner) != len(params):
        raise ValueError(
            f"preconditioner must have one entry per parameter ({len(params)}), "
            f"got {len(preconditioner)}"
        )


def direction_coefficient(
    grad: Sequence[Tensor],
    prec: Sequence[Tensor],
    prec_prev: Sequence[Tensor],
    rho: Tensor,
    rho_prev: Tensor,
    beta: str,
) -> Tensor:
    """The CG coefficient b of the new search direction p_k = z_k + b p_(k-1).

    ``grad`` is the residual of the normal equations (minus the gradient) g_k, ``prec`` and
    ``prec_prev`` are z_k = M^-1 g_k and z_(k-1), ``rho`` is g_k^T z_k and ``rho_prev``
    g_(k-1)^T z_(k-1):

    - Fletcher-Reeves: b = g_k^T z_k / rho_prev;
    - Polak-Ribiere: b = max(0, g_k^T (z_k - z_(k-1)) / rho_prev) (the clamp restarts CG with
      the steepest direction when the new gradient undoes the previous one).

    0 when ``rho_prev`` is not positive (no previous progress to build on).
    """
    if beta == "fletcher-reeves":
        numerator = rho
    else:
        numerator = (rho - _dot(grad, prec_prev)).clamp(min=0)
    return torch.where(rho_prev > 0, numerator / torch.where(rho_prev > 0, rho_prev, 1), 0)


def solve_linearized(
    lin: Linearization, cg_iters: int, preconditioner: Sequence[Tensor | float] | None, beta: str
) -> list[Tensor]:
    """Minimise 1/2 ||r + J dw||^2 over dw with ``cg_iters`` (preconditioned) CG iterations.

    ``lin`` is a :class:`Linearization` or any object with the same ``gradient()``, ``jvp(v)``
    and ``vjp(q)`` methods (e.g. a problem whose Jacobian products have a closed form).
    Starts from dw = 0 with a fresh search direction. No data-dependent branches (no host
    synchronisation on GPUs): a zero curvature or residual gives a zero step instead.
    """
    grad = [-g for g in lin.gradient()]
    step = [torch.zeros_like(g) for g in grad]
    direction = None
    rho_prev = prec_prev = None
    for it in range(cg_iters):
        prec = grad if preconditioner is None else [g / m for g, m in zip(grad, preconditioner)]
        rho = _dot(grad, prec)
        if direction is None:
            direction = prec
        else:
            coef = direction_coefficient(grad, prec, prec_prev, rho, rho_prev, beta)
            direction = [z + coef * d for z, d in zip(prec, direction)]
        jac_dir = lin.jvp(direction)
        curvature = _dot(jac_dir, jac_dir)  # p^T J^T J p
        alpha = torch.where(curvature > 0, rho / torch.where(curvature > 0, curvature, 1), 0)
        step = [s + alpha * d for s, d in zip(step, direction)]
        if it + 1 < cg_iters:  # the last iteration needs no new gradient: save a backprop
            grad = [g - alpha * q for g, q in zip(grad, lin.vjp(jac_dir))]
            rho_prev, prec_prev = rho, prec
    return step


def _final_loss(residuals: Residuals, params: list[Tensor]) -> Tensor:
    with torch.no_grad():
        return 0.5 * sum(r.pow(2).sum() for r in _as_list(residuals(params)))


def conjugate_gradient(
    residuals: Residuals,
    params: Sequence[Tensor],
    cg_iters: int,
    preconditioner: Sequence[Tensor | float] | None = None,
    beta: str = "polak-ribiere",
    final_loss: bool = True,
) -> OptimResult:
    """One linearisation, ``cg_iters`` CG iterations: ATOM's per-frame classifier update.

    Args:
        residuals: ``residuals(params)`` returns the residual vector r(w) as a tensor or a list
            of tensors (any shapes), regularisation terms included. Only the parameters passed
            here are optimised; close over the others.
        params: list of tensors w (not modified).
        cg_iters: CG iterations on the Gauss-Newton model (ATOM updates: 5).
        preconditioner: optional diagonal approximation M of J^T J, one tensor (or float)
            broadcastable to each parameter; CG uses M^{-1} g.
        beta: "polak-ribiere" (clamped at 0; ATOM's updates) or "fletcher-reeves".
        final_loss: also evaluate the loss at the result (one extra forward pass).

    Returns:
        :class:`OptimResult` with the new parameters and the losses [before, after].
    """
    return gauss_newton_cg(residuals, params, 1, cg_iters, preconditioner, beta, final_loss)


def gauss_newton_cg(
    residuals: Residuals,
    params: Sequence[Tensor],
    gn_iters: int,
    cg_iters: int,
    preconditioner: Sequence[Tensor | float] | None = None,
    beta: str = "fletcher-reeves",
    final_loss: bool = True,
) -> OptimResult:
    """Minimise 1/2 ||r(w)||^2 by Gauss-Newton with conjugate gradient (ATOM Algorithm 1).

    Each of the ``gn_iters`` outer iterations linearises r at the current w and takes the step
    found by ``cg_iters`` CG iterations on the quadratic model (one forward and 2 x ``cg_iters``
    backward passes, see the module docstring). ATOM's first frame uses 6 x 10 iterations,
    Fletcher-Reeves and a preconditioner equal to each block's regularisation weight.

    Args:
        residuals: ``residuals(params)`` returns r(w) as a tensor or list of tensors.
        params: list of tensors w (not modified).
        gn_iters: Gauss-Newton iterations.
        cg_iters: CG iterations per Gauss-Newton iteration.
        preconditioner: optional diagonal M ~ J^T J, one tensor or float per parameter.
        beta: "fletcher-reeves" or "polak-ribiere" (clamped at 0).
        final_loss: also evaluate the loss at the result (one extra forward pass).

    Returns:
        :class:`OptimResult`: new parameters and (gn_iters [+ 1],) losses 1/2 ||r||^2.
    """
    params = list(params)
    _check_options(preconditioner, params, beta, gn_iters=gn_iters, cg_iters=cg_iters)
    params = [p.detach().clone() for p in params]
    losses = []
    for _ in range(gn_iters):
        lin = Linearization(residuals, params)
        losses.append(lin.loss())
        step = solve_linearized(lin, cg_iters, preconditioner, beta)
        params = [p + s.detach() for p, s in zip(params, step)]
        del lin  # free the graphs before the next linearisation
    if final_loss or not losses:
        losses.append(_final_loss(residuals, params))
    return OptimResult(params, torch.stack(losses))
