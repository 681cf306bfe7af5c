"""ebmtrack.optim: Gauss-Newton / conjugate-gradient solver of ATOM's Algorithm 1."""

from ebmtrack.optim.gauss_newton import (
    Linearization,
    OptimResult,
    conjugate_gradient,
    direction_coefficient,
    gauss_newton_cg,
    solve_linearized,
)

__all__ = [
    "Linearization",
    "OptimResult",
    "conjugate_gradient",
    "direction_coefficient",
    "gauss_newton_cg",
    "solve_linearized",
]
