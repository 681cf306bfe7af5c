import torch

from ebmtrack.ops.hat import hat, hat_cdf


def test_cdf_is_the_running_integral_of_the_hat():
    t = torch.linspace(-2.0, 2.0, 4001, dtype=torch.float64)
    running = torch.cumulative_trapezoid(hat(t), t, dim=0)
    torch.testing.assert_close(hat_cdf(t)[1:], running, atol=1e-6, rtol=0)
    assert hat_cdf(torch.tensor([-1.0, 0.0, 1.0])).tolist() == [0.0, 0.5, 1.0]


def test_derivative_of_the_cdf_is_the_hat():
    t = torch.linspace(-1.5, 1.5, 31, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(hat_cdf(t).sum(), t)
    torch.testing.assert_close(grad, hat(t.detach()))
