import inspect
import math

import pytest
import torch
from torch import nn

from ebmtrack.ebm import LOSSES, get_loss, nce_loss, nce_plus_loss

# Per-loss settings for the optimum tests: small M keeps them fast; ML-MCMC gets a longer step so
# that its short chains move measurably. The optimal variance of the Gaussian family for each
# loss: ML and SM fit the data variance, KLD-IS adds the label noise, DSM the denoising noise.
FAST = {
    "ml-is": {"num_samples": 256},
    "kld-is": {"num_samples": 256, "label_sigma": 0.1},
    "ml-mcmc": {"num_samples": 64, "num_steps": 16, "step_length": 0.1},
    "nce": {"num_samples": 256},
    "nce+": {"num_samples": 256},
    "sm": {},
    "dsm": {"num_samples": 64, "sigma": 0.2},
}
EXTRA_VARIANCE = {"kld-is": 0.1**2, "dsm": 0.2**2}


class GaussianEnergy(nn.Module):
    """f(x, y) = -|y - mu|^2 / (2 s^2), ignoring x: the EBM of N(mu, s^2 I)."""

    def __init__(self, mu: float, log_s: float):
        super().__init__()
        self.mu = nn.Parameter(torch.tensor(mu))
        self.log_s = nn.Parameter(torch.tensor(log_s))

    def forward(self, x, y):
        return -(y - self.mu).square().sum(-1) / (2 * torch.exp(2 * self.log_s))


def _labels(batch=256, dim=1):
    gen = torch.Generator().manual_seed(1)
    y = 0.3 + 0.5 * torch.randn(batch, dim, generator=gen)
    return torch.zeros(batch, 1), y


def _grad(name, model, x, y):
    kwargs = dict(FAST[name])
    if name != "sm":
        kwargs["generator"] = torch.Generator().manual_seed(2)
    loss = LOSSES[name](model, x, y, **kwargs)
    mu_grad, log_s_grad = torch.autograd.grad(loss, [model.mu, model.log_s])
    return mu_grad.item(), log_s_grad.item()


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_gradient_points_to_the_known_optimum(name):
    x, y = _labels()
    mean = y.mean().item()
    best_log_s = 0.5 * math.log(y.var(unbiased=False).item() + EXTRA_VARIANCE.get(name, 0.0))
    # mean too high/low at the right width: descent must move mu back
    assert _grad(name, GaussianEnergy(mean + 0.4, best_log_s), x, y)[0] > 0
    assert _grad(name, GaussianEnergy(mean - 0.4, best_log_s), x, y)[0] < 0
    # width too large/small at the right mean: descent must move log s back
    assert _grad(name, GaussianEnergy(mean, best_log_s + 0.5), x, y)[1] > 0
    assert _grad(name, GaussianEnergy(mean, best_log_s - 0.5), x, y)[1] < 0


def test_ml_is_matches_its_formula():
    x, y = _labels(batch=4)
    model = GaussianEnergy(0.1, -0.5)
    gen = torch.Generator().manual_seed(3)
    loss = LOSSES["ml-is"](model, x, y, num_samples=5, proposal_sigmas=(0.2,), generator=gen)
    gen = torch.Generator().manual_seed(3)
    torch.randint(1, (4, 5), generator=gen)  # the component draw (K = 1)
    offsets = 0.2 * torch.randn(4, 5, 1, generator=gen)
    samples = (y[:, None, :] + offsets).double()
    q = torch.exp(-0.5 * (offsets / 0.2).square()).double().squeeze(-1) / (
        0.2 * math.sqrt(2 * math.pi)
    )
    f = model(x, samples).double()
    expected = (torch.log((f.exp() / q).mean(1)) - model(x, y[:, None, :]).double()[:, 0]).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)


@pytest.mark.parametrize("shared", [False, True])
def test_nce_plus_with_vanishing_beta_is_nce(shared):
    x, y = _labels(batch=16, dim=2)
    model = GaussianEnergy(0.2, -0.3)
    common = {"num_samples": 32, "noise_sigmas": [[0.1, 0.3], [0.8, 1.2]], "shared_samples": shared}
    nce = nce_loss(model, x, y, generator=torch.Generator().manual_seed(5), **common)
    plus = nce_plus_loss(
        model, x, y, beta=1e-9, generator=torch.Generator().manual_seed(5), **common
    )
    assert plus.item() == pytest.approx(nce.item(), rel=1e-6)
    # (the value with a real jitter is pinned by test_ebm_loss_formulas.test_nce_plus_is_eq_16)


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("num_samples", [1, 4096])
def test_float32_losses_agree_with_float64_for_extreme_energies_and_sample_counts(
    name, num_samples
):
    """f reaches about -1e5 at the labels (exp f underflows even in float64): the float32 loss and
    its gradients must still agree with float64's (same seed; the mixture draws are the same, the
    Gaussian draws of DSM and Langevin differ with the dtype but weigh ~1e-4 here), not be nan,
    inf or garbage."""
    x, y = _labels(batch=2, dim=2)
    kwargs = {} if name == "sm" else {"num_samples": num_samples}
    if name == "ml-mcmc":
        kwargs["num_steps"] = 1
    results = []
    for dtype in (torch.float32, torch.float64):
        model = GaussianEnergy(5.0, -4.0).to(dtype)
        if name != "sm":
            kwargs["generator"] = torch.Generator().manual_seed(4)
        loss = LOSSES[name](model, x.to(dtype), y.to(dtype), **kwargs)
        grads = torch.autograd.grad(loss, [model.mu, model.log_s])
        results.append([loss.double(), *(g.double() for g in grads)])
    for single, double in zip(*results):
        assert torch.isfinite(single)
        torch.testing.assert_close(single, double, rtol=1e-3, atol=1e-3)


def test_registry_holds_the_seven_losses_with_the_papers_1d_defaults():
    """The defaults are appendix B.4's (data set 1, M = 1024)."""
    assert list(LOSSES) == ["ml-is", "kld-is", "ml-mcmc", "nce", "nce+", "sm", "dsm"]
    expected = {
        "ml-is": {"num_samples": 1024, "proposal_sigmas": (0.2, 1.6)},
        "kld-is": {"num_samples": 1024, "proposal_sigmas": (0.2, 1.6), "label_sigma": 0.025},
        "ml-mcmc": {"num_samples": 1024, "step_length": 0.05},
        "nce": {"num_samples": 1024, "noise_sigmas": (0.1, 0.8)},
        "nce+": {"num_samples": 1024, "noise_sigmas": (0.1, 0.8), "beta": 0.025},
        "sm": {},
        "dsm": {"num_samples": 1024, "sigma": 0.2},
    }
    for name, values in expected.items():
        parameters = inspect.signature(LOSSES[name]).parameters
        assert {k: parameters[k].default for k in values} == values, name


def test_bad_inputs_raise_value_errors():
    x, y = _labels(batch=3)
    model = GaussianEnergy(0.0, 0.0)
    with pytest.raises(ValueError, match="ml-is, kld-is"):
        get_loss("ml")
    with pytest.raises(ValueError, match="num_samples"):
        LOSSES["nce"](model, x, y, num_samples=0)
    with pytest.raises(ValueError, match="noise_sigmas"):
        LOSSES["nce"](model, x, y, noise_sigmas=(0.1, -0.8))
    with pytest.raises(ValueError, match="proposal_sigmas"):
        LOSSES["ml-is"](model, x, y, proposal_sigmas=(0.0,))
    with pytest.raises(ValueError, match="label_sigma"):
        LOSSES["kld-is"](model, x, y, label_sigma=(0.1, 0.2))
    with pytest.raises(ValueError, match="beta"):
        LOSSES["nce+"](model, x, y, beta=0.0)
    with pytest.raises(ValueError, match="sigma"):
        LOSSES["dsm"](model, x, y, sigma=-1.0)
    with pytest.raises(ValueError, match=r"\(B, D\)"):
        LOSSES["kld-is"](model, x, y[:, 0])
    with pytest.raises(ValueError, match="batch"):
        LOSSES["sm"](model, x[:2], y)
    with pytest.raises(ValueError, match=r"\(B, M\)"):
        LOSSES["ml-is"](lambda x, y: y.sum(), x, y, num_samples=2)
