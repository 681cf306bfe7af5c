import math

import pytest
import torch

from ebmtrack.ebm import GaussianMixtureNoise


def test_log_prob_integrates_to_one_and_matches_closed_form():
    noise = GaussianMixtureNoise((0.2, 1.6))
    grid = torch.linspace(-12, 12, 20001, dtype=torch.float64)[:, None]
    density = noise.log_prob(grid).exp()
    assert torch.trapezoid(density, grid[:, 0]).item() == pytest.approx(1.0, abs=1e-6)
    expected = 0.5 * (1 / 0.2 + 1 / 1.6) / math.sqrt(2 * math.pi)
    assert noise.log_prob(torch.zeros(1, 1)).exp().item() == pytest.approx(expected, rel=1e-5)


def test_per_dimension_sigmas_factorize():
    noise = GaussianMixtureNoise([[0.05, 0.5]], dim=2)
    offsets = torch.tensor([[0.03, -0.7]])
    single = GaussianMixtureNoise(0.05).log_prob(offsets[:, :1]) + GaussianMixtureNoise(
        0.5
    ).log_prob(offsets[:, 1:])
    assert torch.allclose(noise.log_prob(offsets), single)


def test_samples_have_the_mixture_variance_per_dimension():
    noise = GaussianMixtureNoise([[0.1, 1.0], [0.8, 2.0]], dim=2)
    samples = noise.sample((200_000,), generator=torch.Generator().manual_seed(0))
    assert samples.shape == (200_000, 2)
    expected = torch.tensor([(0.1**2 + 0.8**2) / 2, (1.0 + 4.0) / 2])
    assert torch.allclose(samples.var(0), expected, rtol=0.02)
    assert torch.allclose(samples.mean(0), torch.zeros(2), atol=0.01)


def test_log_prob_is_exact_far_in_the_tails():
    # exp of either component's log-density underflows: the log-sum-exp must still be exact
    # (sigmas are powers of two, exact in the float32 table)
    noise = GaussianMixtureNoise((2**-6, 2**-5))
    wide = -0.5 * (8.0 / 2**-5) ** 2 - math.log(2**-5) - 0.5 * math.log(2 * math.pi)
    expected = wide - math.log(2)  # the narrow component is exp(-98304) times smaller
    got = noise.log_prob(torch.tensor([[8.0]], dtype=torch.float64)).item()
    assert got == pytest.approx(expected, rel=1e-14)


@pytest.mark.parametrize("sigmas", [(0.1, -0.2), (0.0,), [[0.1, 0.2, 0.3]], float("nan")])
def test_bad_sigmas_raise(sigmas):
    with pytest.raises(ValueError, match="sigmas"):
        GaussianMixtureNoise(sigmas, dim=2)


def test_wrong_offset_dimension_raises():
    with pytest.raises(ValueError, match="offsets"):
        GaussianMixtureNoise(0.1, dim=2).log_prob(torch.zeros(3, 1))
