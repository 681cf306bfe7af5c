import pytest
import torch
from torch import nn

from ebmtrack.ebm import gradient_ascent, langevin_sample, score_and_grad


class Quadratic(nn.Module):
    """Concave f(x, y) = -sum_d a_d (y_d - c_d - x)^2, maximized at y = c + x."""

    def __init__(self, a, c):
        super().__init__()
        self.a = torch.tensor(a)
        self.c = torch.tensor(c)

    def forward(self, x, y):
        return -(self.a * (y - self.c - x[:, None, None]).square()).sum(-1)


def test_gradient_ascent_reaches_the_maximum_from_many_starts():
    model = Quadratic([1.0, 25.0], [0.5, -2.0])
    x = torch.tensor([0.0, 1.0])
    start = torch.randn(2, 64, 2, generator=torch.Generator().manual_seed(0)) * 3
    y, value = gradient_ascent(model, x, start, num_iters=200, step_length=(0.3, 0.012), decay=0.5)
    target = model.c + x[:, None, None]
    assert torch.allclose(y, target.expand_as(y), atol=1e-3)
    assert torch.allclose(value, model(x, y))


def test_gradient_ascent_never_accepts_a_worse_point():
    model = Quadratic([1.0], [0.0])
    x = torch.zeros(1)
    start = torch.linspace(-3, 3, 50).reshape(1, 50, 1)
    y, value = gradient_ascent(model, x, start, num_iters=30, step_length=10.0, decay=0.5)
    assert (value >= model(x, start) - 1e-6).all()
    assert value.max() > -1e-3  # the decay eventually makes the too-long steps work


def test_langevin_samples_a_gaussian():
    sigma = 0.5
    model = Quadratic([0.5 / sigma**2], [1.0])  # p(y) = N(1, sigma^2)
    y0 = torch.full((1, 8192, 1), 1.0)
    y = langevin_sample(
        model, torch.zeros(1), y0, 400, step_length=0.05, generator=torch.Generator().manual_seed(0)
    )
    assert y.mean().item() == pytest.approx(1.0, abs=0.02)
    assert y.std().item() == pytest.approx(sigma, rel=0.05)


def test_zero_steps_returns_start_and_bad_inputs_raise():
    model = Quadratic([1.0], [0.0])
    x, y0 = torch.zeros(2), torch.randn(2, 3, 1)
    assert torch.equal(langevin_sample(model, x, y0, 0, 0.1), y0)
    with pytest.raises(ValueError, match="step_length"):
        gradient_ascent(model, x, y0, step_length=(0.1, 0.2))
    with pytest.raises(ValueError, match="step_length"):
        langevin_sample(model, x, y0, 3, -0.1)
    with pytest.raises(ValueError, match="y_init"):
        gradient_ascent(model, x, torch.randn(2, 3))
    with pytest.raises(ValueError, match="batch"):
        gradient_ascent(model, torch.zeros(3), y0)
    with pytest.raises(ValueError, match="decay"):
        gradient_ascent(model, x, y0, decay=0.0)


class QuadraticWithOwnGradient(Quadratic):
    """The same f, with an analytic ``score_and_grad`` the samplers must use instead of autograd."""

    def __init__(self, a, c):
        super().__init__(a, c)
        self.own_calls = 0

    def score_and_grad(self, x, y):
        self.own_calls += 1
        offset = y - self.c - x[:, None, None]
        return self(x, y), -2 * self.a * offset


def test_a_models_own_score_and_grad_is_used_and_agrees_with_autograd():
    own, plain = (
        QuadraticWithOwnGradient([1.0, 4.0], [0.5, -2.0]),
        Quadratic([1.0, 4.0], [0.5, -2.0]),
    )
    x = torch.tensor([0.0, 1.0])
    start = torch.randn(2, 16, 2, generator=torch.Generator().manual_seed(0))
    y_own, _ = gradient_ascent(own, x, start, num_iters=20, step_length=0.1)
    y_plain, _ = gradient_ascent(plain, x, start, num_iters=20, step_length=0.1)
    assert own.own_calls == 21  # one evaluation of the start, one per iteration
    assert torch.allclose(y_own, y_plain, atol=1e-6)
    grad_own = score_and_grad(own, x, start)[1]
    assert torch.allclose(grad_own, score_and_grad(plain, x, start)[1], atol=1e-6)
    assert not grad_own.requires_grad
