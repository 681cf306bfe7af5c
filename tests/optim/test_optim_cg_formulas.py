"""The conjugate-gradient update of ATOM's Algorithm 1, against its formulas by hand.

The direction coefficient (Fletcher-Reeves; Polak-Ribiere clamped at 0) is tested directly with
vectors chosen so that the Polak-Ribiere numerator is negative: on a linear least-squares problem
the CG gradients are conjugate in exact arithmetic, the numerator equals Fletcher-Reeves' and is
never negative, so no optimisation test can see the clamp. Three iterations of the whole
preconditioned CG solve are compared with the same iterations written out (float64, rtol 1e-12).

Planted errors (one at a time, each reverted; see tests/ebm/test_ebm_loss_formulas.py for the
losses' list): Polak-Ribiere without its clamp (caught by
test_polak_ribiere_coefficient_is_clamped_at_zero; test_optim_gauss_newton.py alone passed);
Fletcher-Reeves with the Polak-Ribiere numerator (caught by test_fletcher_reeves_*; not by
test_optim_gauss_newton.py, for the same reason); the step ``alpha = rho / p^T p`` ignoring the
curvature of J (caught by test_cg_steps_*).
"""

import pytest
import torch

from ebmtrack.optim import direction_coefficient, solve_linearized


def _vectors(*values):
    return [
        torch.tensor(values[:2], dtype=torch.float64),
        torch.tensor(values[2:], dtype=torch.float64),
    ]


def test_polak_ribiere_coefficient_is_clamped_at_zero():
    """Polak-Ribiere: b = max(0, g_k^T (z_k - z_(k-1)) / (g_(k-1)^T z_(k-1)))."""
    grad = _vectors(1.0, -2.0, 0.5)
    prec = [g / 2 for g in grad]  # M = 2 I
    rho = sum((g * z).sum() for g, z in zip(grad, prec))  # 2.625
    rho_prev = torch.tensor(1.5, dtype=torch.float64)
    # z_(k-1) close to z_k: g_k^T (z_k - z_(k-1)) < 0, the clamp must give 0 (FR would not)
    prec_prev = _vectors(0.6, -1.1, 0.3)
    numerator = sum((g * (z - zp)).sum() for g, z, zp in zip(grad, prec, prec_prev))
    assert numerator < 0
    got = direction_coefficient(grad, prec, prec_prev, rho, rho_prev, "polak-ribiere")
    assert got.item() == 0.0
    # a positive numerator passes unchanged
    prec_prev = _vectors(-0.2, 0.1, 0.05)
    numerator = sum((g * (z - zp)).sum() for g, z, zp in zip(grad, prec, prec_prev))
    assert numerator > 0
    got = direction_coefficient(grad, prec, prec_prev, rho, rho_prev, "polak-ribiere")
    assert got.item() == pytest.approx((numerator / rho_prev).item(), rel=1e-14)


def test_fletcher_reeves_coefficient_and_no_previous_progress():
    """Fletcher-Reeves: b = g_k^T z_k / (g_(k-1)^T z_(k-1)); both give 0 when rho_prev <= 0."""
    grad = _vectors(1.0, -2.0, 0.5)
    prec = [g / 2 for g in grad]
    prec_prev = _vectors(0.6, -1.1, 0.3)
    rho = sum((g * z).sum() for g, z in zip(grad, prec))
    rho_prev = torch.tensor(1.5, dtype=torch.float64)
    got = direction_coefficient(grad, prec, prec_prev, rho, rho_prev, "fletcher-reeves")
    assert got.item() == pytest.approx((rho / rho_prev).item(), rel=1e-14)
    for beta in ("fletcher-reeves", "polak-ribiere"):
        zero = torch.tensor(0.0, dtype=torch.float64)
        assert direction_coefficient(grad, prec, prec_prev, rho, zero, beta).item() == 0.0


class _ExplicitLinearization:
    """gradient / jvp / vjp of r(w) = A w - t at w = 0, from an explicit matrix."""

    def __init__(self, matrix, target):
        self.matrix, self.target = matrix, target

    def gradient(self):
        return [self.matrix.T @ (-self.target)]

    def jvp(self, direction):
        return [self.matrix @ direction[0]]

    def vjp(self, vector):
        return [self.matrix.T @ vector[0]]


@pytest.mark.parametrize("beta", ["fletcher-reeves", "polak-ribiere"])
def test_cg_steps_are_preconditioned_cg_by_hand(beta):
    """Three iterations of preconditioned CG on A^T A dw = -A^T r, written out: g_0 = -A^T r,
    z = M^-1 g, p_0 = z_0, alpha = g^T z / ||A p||^2, dw += alpha p, g -= alpha A^T A p,
    p = z + b p with b of the chosen rule."""
    gen = torch.Generator().manual_seed(3)
    matrix = torch.randn(8, 5, generator=gen, dtype=torch.float64)
    target = torch.randn(8, generator=gen, dtype=torch.float64)
    diag = torch.tensor([2.0, 0.5, 1.0, 3.0, 0.25], dtype=torch.float64)
    got = solve_linearized(_ExplicitLinearization(matrix, target), 3, [diag], beta)[0]

    g = matrix.T @ target  # minus the gradient of 1/2 ||A w - t||^2 at w = 0
    z = g / diag
    p, step = z.clone(), torch.zeros(5, dtype=torch.float64)
    rho = g @ z
    for _ in range(3):
        ap = matrix @ p
        alpha = rho / (ap @ ap)
        step = step + alpha * p
        g_new = g - alpha * (matrix.T @ ap)
        z_new = g_new / diag
        rho_new = g_new @ z_new
        if beta == "fletcher-reeves":
            b = rho_new / rho
        else:
            b = max(0.0, (g_new @ (z_new - z)).item() / rho.item())
        p = z_new + b * p
        g, z, rho = g_new, z_new, rho_new
    torch.testing.assert_close(got, step, rtol=1e-12, atol=1e-14)
