"""Algorithm S1 (``ebmtrack.ebm.sampling.gradient_ascent``): step by step, not only at the end."""

import torch
from torch import nn

from ebmtrack.ebm import gradient_ascent


class Wavy(nn.Module):
    """A non-concave f(x, y) = sum_d cos(3 y_d) - 0.1 y_d^2 + x: many local maxima."""

    def forward(self, x, y):
        return (torch.cos(3 * y) - 0.1 * y.square()).sum(-1) + x[:, None]


class ConcaveQuadratic(nn.Module):
    """f(x, y) = -(y - c)^T A (y - c) with A symmetric positive definite, not diagonal."""

    def __init__(self, a, c):
        super().__init__()
        self.a, self.c = a, c

    def forward(self, x, y):
        d = y - self.c
        return -torch.einsum("bmi,ij,bmj->bm", d, self.a, d)


def test_s1_never_accepts_a_step_that_lowers_f():
    # Runs of t and t + 1 iterations share their first t iterations (S1 is deterministic), so
    # comparing them shows every single step: f never drops, and y moves only where f rises.
    model = Wavy()
    x = torch.tensor([0.0, 2.0])
    start = torch.randn(2, 200, 3, generator=torch.Generator().manual_seed(0)) * 2
    previous_y, previous_f = start, model(x, start)
    rejected = 0
    for iters in range(1, 16):
        y, f = gradient_ascent(model, x, start, num_iters=iters, step_length=0.8, decay=0.5)
        assert (f >= previous_f).all()
        moved = (y != previous_y).any(-1)
        assert (f[moved] > previous_f[moved]).all()
        assert torch.equal(f[~moved], previous_f[~moved])
        rejected += int((~moved).sum())
        previous_y, previous_f = y, f
    assert rejected > 0  # the long steps did overshoot, so the rule was exercised


def test_s1_rejects_an_overshoot_then_takes_the_decayed_step():
    # f = -y^2 from y = 1: the step 1.5 * f'(1) = -3 lands on -2 (f = -4 < -1): rejected, lambda
    # halves; the step 0.75 * -2 lands on -0.5 (f = -0.25): accepted.
    model = ConcaveQuadratic(torch.eye(1), torch.zeros(1))
    x, start = torch.zeros(1), torch.ones(1, 1, 1)
    y, f = gradient_ascent(model, x, start, num_iters=1, step_length=1.5, decay=0.5)
    assert y.item() == 1.0 and f.item() == -1.0
    y, f = gradient_ascent(model, x, start, num_iters=2, step_length=1.5, decay=0.5)
    assert y.item() == -0.5 and f.item() == -0.25


def test_s1_reaches_the_optimum_of_a_concave_function():
    # A 4-D coupled quadratic, as a box's (cx, cy, log w, log h), with per-coordinate steps.
    generator = torch.Generator().manual_seed(1)
    basis = torch.linalg.qr(torch.randn(4, 4, generator=generator))[0]
    a = basis @ torch.diag(torch.tensor([1.0, 2.0, 4.0, 8.0])) @ basis.T
    c = torch.tensor([0.3, -1.0, 2.0, 0.5])
    model = ConcaveQuadratic(a, c)
    start = torch.randn(1, 32, 4, generator=generator) * 3
    steps = torch.tensor([0.1, 0.1, 0.05, 0.05])
    y, f = gradient_ascent(model, torch.zeros(1), start, num_iters=400, step_length=steps)
    assert torch.allclose(y, c.expand_as(y), atol=1e-3)
    assert (f > -1e-5).all()
