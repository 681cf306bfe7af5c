"""Each of the seven losses, and the Langevin step it uses, against the paper's equations by hand.

Gustafsson et al., "How to Train Your Energy-Based Model for Regression" (BMVC 2020): ML-IS
eq. 3-5, KLD-IS eq. 6-7, ML-MCMC eq. 9-10, NCE eq. 11-12, SM eq. 13, DSM eq. 14, NCE+ eq. 15-16.

Every test evaluates the library's loss on a tiny case (B = 3 examples, D = 2, M = 5 samples,
float64, a model with a non-quadratic, coupled f so that no term vanishes by symmetry) and the same
loss written out from the equation with plain tensor operations, and compares the values and the
gradients with respect to every model parameter (rtol 1e-9). The samples are fixed: the test
reseeds a generator with the library's seed and redraws them itself in the order the library
documents (mixture noise: component indices, then standard normals, float32, scaled by the
component's sigma; NCE+: the M noise samples before nu; Langevin and DSM: standard normals in the
labels' dtype). The model's derivatives in y (for SM, DSM and Langevin) are written out
analytically, not taken from autograd. The hyper-parameters are powers of two or exact in float32,
so that the library's float32 sigma tables are exact.

Planted errors. Each of the following one-line errors was put into the library, one at a time,
and this module run; every one made at least the listed tests fail, and all passed again after
each revert ("underflow" is test_sample_losses_match_their_formulas_where_exp_f_underflows):

| # | planted error (where) | failing tests |
|---|---|---|
| 1 | NCE / NCE+ logits without ``- log p_N`` (``_ranking_nce``) | nce, nce_plus, underflow |
| 2 | NCE+ positive scored with ``p_N(y_i)``, not ``p_N(y_i + nu)`` | nce_plus, underflow |
| 3 | NCE+ ``nu`` ten times too wide (``noise.scaled(10 * beta)``) | nce_plus, underflow |
| 4 | SM with factor 1 instead of 1/2 on ``||grad_y f||^2`` | sm |
| 5 | ML-IS importance weights without ``- log q`` | ml_is, underflow |
| 6 | IS log Z without ``- log M`` (value only, same gradients) | ml_is, kld_is, underflow |
| 7 | KLD-IS weights ``p`` instead of ``p / q`` | kld_is, underflow |
| 8 | KLD-IS label density replaced by the proposal | kld_is, underflow |
| 9 | Langevin: ``alpha grad`` for ``alpha^2 / 2 grad`` (``sampling.py``) | langevin, ml_mcmc |
| 10 | ML-MCMC positive and negatives swapped (sign of the loss) | ml_mcmc |
| 11 | DSM target ``(y~ - y_i) / sigma`` instead of ``/ sigma^2`` | dsm |
| 12 | DSM target with its sign flipped | dsm |
| 13 | mixture log-density without ``- log sigma_k`` (``noise.py``) | ml_is, kld_is, nce, nce_plus |

Run the same way against the tests that existed before this module (tests/ebm and
tests/optim/test_optim_gauss_newton.py), errors 1, 2, 3, 4 and 7 passed unnoticed.
The conjugate-gradient update has its own list in tests/optim/test_optim_cg_formulas.py.
"""

import math

import pytest
import torch
from torch import nn

from ebmtrack.ebm import (
    dsm_loss,
    kld_is_loss,
    langevin_sample,
    ml_is_loss,
    ml_mcmc_loss,
    nce_loss,
    nce_plus_loss,
    sm_loss,
)

B, D, M, SEED = 3, 2, 5, 7
RTOL = 1e-9


class CoupledEnergy(nn.Module):
    """f(x, y) = sum_d [-a_d (y_d - mu_d(x))^2 / 2 + w_d sin y_d] + c y_0 y_1, mu = x W + b.

    ``grad_y`` and ``laplacian_y`` are its derivatives in y written out by hand.
    """

    def __init__(self, scale: float = 1.0):
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.weight = nn.Parameter(0.5 * torch.randn(2, D, generator=gen, dtype=torch.float64))
        self.bias = nn.Parameter(torch.tensor([0.2, -0.1], dtype=torch.float64))
        self.log_a = nn.Parameter(torch.tensor([0.3, -0.4], dtype=torch.float64) + math.log(scale))
        self.w = nn.Parameter(torch.tensor([0.7, -0.5], dtype=torch.float64))
        self.c = nn.Parameter(torch.tensor(0.3, dtype=torch.float64))

    def _mu(self, x):
        return (x @ self.weight + self.bias)[:, None, :]  # (B, 1, D)

    def forward(self, x, y):
        a = self.log_a.exp()
        quadratic = -0.5 * (a * (y - self._mu(x)).square()).sum(-1)
        return quadratic + (self.w * torch.sin(y)).sum(-1) + self.c * y[..., 0] * y[..., 1]

    def grad_y(self, x, y):
        a = self.log_a.exp()
        coupling = self.c * torch.stack([y[..., 1], y[..., 0]], dim=-1)
        return -a * (y - self._mu(x)) + self.w * torch.cos(y) + coupling

    def laplacian_y(self, x, y):
        return (-self.log_a.exp() - self.w * torch.sin(y)).sum(-1)


def _case(scale: float = 1.0):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(B, 2, generator=gen, dtype=torch.float64)
    y = torch.randn(B, D, generator=gen, dtype=torch.float64)
    return CoupledEnergy(scale), x, y


def _gen():
    return torch.Generator().manual_seed(SEED)


def _mixture_draw(gen, shape, sigmas, scale=1.0):
    """Offsets from (1/K) sum_k N(0, (scale sigma_k)^2 I) (eq. 4, 11, 15) as the library draws
    them: component indices, then float32 standard normals."""
    table = torch.tensor(sigmas, dtype=torch.float32)[:, None].expand(len(sigmas), D) * scale
    component = torch.randint(len(sigmas), tuple(shape), generator=gen)
    eps = torch.randn(tuple(shape) + (D,), generator=gen)
    return (eps * table[component]).double()


def _log_normal(v, sigma):
    """log N(v; 0, sigma^2 I) summed over the last dimension."""
    return (-0.5 * (v / sigma) ** 2 - math.log(sigma) - 0.5 * math.log(2 * math.pi)).sum(-1)


def _log_mixture(v, sigmas):
    """log q(y | y_i) of eq. 4 / p_N of eq. 11 at offsets v = y - y_i."""
    per_k = torch.stack([_log_normal(v, s) for s in sigmas])
    return torch.logsumexp(per_k, 0) - math.log(len(sigmas))


def _offsets(shared, sigmas, gen):
    shape = (1, M) if shared else (B, M)
    return _mixture_draw(gen, shape, sigmas).expand(B, M, D)


def _assert_same(library_loss, hand_loss, model):
    params = list(model.parameters())
    torch.testing.assert_close(library_loss, hand_loss, rtol=RTOL, atol=1e-12)
    got = torch.autograd.grad(library_loss, params)
    want = torch.autograd.grad(hand_loss, params)
    for name, g, w in zip([n for n, _ in model.named_parameters()], got, want):
        torch.testing.assert_close(g, w, rtol=RTOL, atol=1e-12, msg=f"gradient of {name}")


PROPOSAL = (0.25, 1.5)
NOISE = (0.125, 0.75)


def _ml_is_by_hand(model, x, y, v):
    """Eq. 5 with y^(i,m) = y_i + v_m; (1/M) sum exp(.) taken as logsumexp(.) - log M."""
    f_samples = model(x, y[:, None, :] + v)
    log_z = torch.logsumexp(f_samples - _log_mixture(v, PROPOSAL), 1) - math.log(M)
    return (log_z - model(x, y[:, None, :])[:, 0]).mean()


def _kld_is_by_hand(model, x, y, v, sigma):
    """Eq. 7 with y^(i,m) = y_i + v_m and p(y | y_i) = N(y; y_i, sigma^2 I)."""
    f_samples = model(x, y[:, None, :] + v)
    log_q = _log_mixture(v, PROPOSAL)
    log_z = torch.logsumexp(f_samples - log_q, 1) - math.log(M)
    weights = torch.exp(_log_normal(v, sigma) - log_q)  # p / q
    return (log_z - (f_samples * weights).sum(1) / M).mean()


@pytest.mark.parametrize("shared", [False, True])
def test_ml_is_is_eq_5(shared):
    """Eq. 5: (1/n) sum_i log((1/M) sum_m exp f(x_i, y^(i,m)) / q(y^(i,m) | y_i)) - f(x_i, y_i),
    y^(i,m) ~ q of eq. 4."""
    model, x, y = _case()
    loss = ml_is_loss(
        model,
        x,
        y,
        num_samples=M,
        proposal_sigmas=PROPOSAL,
        shared_samples=shared,
        generator=_gen(),
    )
    v = _offsets(shared, PROPOSAL, _gen())
    _assert_same(loss, _ml_is_by_hand(model, x, y, v), model)


@pytest.mark.parametrize("shared", [False, True])
def test_kld_is_is_eq_7(shared):
    """Eq. 7: (1/n) sum_i log((1/M) sum_m exp f_m / q_m) - (1/M) sum_m f_m p(y^(i,m) | y_i) / q_m
    with p(y | y_i) = N(y; y_i, sigma^2 I) (eq. 6) and q of eq. 4."""
    model, x, y = _case()
    sigma = 0.5
    loss = kld_is_loss(
        model,
        x,
        y,
        num_samples=M,
        proposal_sigmas=PROPOSAL,
        label_sigma=sigma,
        shared_samples=shared,
        generator=_gen(),
    )
    v = _offsets(shared, PROPOSAL, _gen())
    _assert_same(loss, _kld_is_by_hand(model, x, y, v, sigma), model)


def _langevin_by_hand(model, x, y, steps, alpha, gen):
    """Eq. 9 from y_(0) = y_i, M chains: y <- y + alpha^2 / 2 grad_y f + alpha eps."""
    chains = y[:, None, :].expand(B, M, D).detach()
    for _ in range(steps):
        eps = torch.randn((B, M, D), generator=gen, dtype=torch.float64)
        chains = chains + alpha**2 / 2 * model.grad_y(x, chains).detach() + alpha * eps
    return chains


def test_langevin_is_eq_9():
    """Eq. 9: y_(l+1) = y_(l) + alpha^2 / 2 grad_y f(x, y_(l)) + alpha eps_l, eps_l ~ N(0, I)."""
    model, x, y = _case()
    start = y[:, None, :].expand(B, M, D)
    got = langevin_sample(model, x, start, 3, 0.25, generator=_gen())
    torch.testing.assert_close(got, _langevin_by_hand(model, x, y, 3, 0.25, _gen()), rtol=RTOL,
                               atol=1e-12)  # fmt: skip


def test_ml_mcmc_is_eq_10():
    """Eq. 10: (1/n) sum_i (1/M) sum_m f(x_i, y^(i,m)) - f(x_i, y_i), y^(i,m) the end points of L
    Langevin steps (eq. 9) started at y_i (contrastive divergence), not differentiated."""
    model, x, y = _case()
    loss = ml_mcmc_loss(model, x, y, num_samples=M, num_steps=3, step_length=0.25, generator=_gen())
    samples = _langevin_by_hand(model, x, y, 3, 0.25, _gen())
    hand = (model(x, samples).mean(1) - model(x, y[:, None, :])[:, 0]).mean()
    _assert_same(loss, hand, model)


def _ranking_nce_by_hand(model, x, y, positive, v, sigmas):
    """Eq. 12 / 16: -(1/n) sum_i log softmax_0 of f(x_i, y^(i,m)) - log p_N(y^(i,m) | y_i),
    m = 0 .. M, with y^(i,0) = ``positive`` and y^(i,m) = y_i + v_m."""
    candidates = torch.cat([positive[:, None, :], y[:, None, :] + v], dim=1)
    logits = model(x, candidates) - _log_mixture(candidates - y[:, None, :], sigmas)
    return -(logits[:, 0] - torch.logsumexp(logits, 1)).mean()


@pytest.mark.parametrize("shared", [False, True])
def test_nce_is_eq_12(shared):
    """Eq. 12 with y^(i,0) = y_i and y^(i,m) ~ p_N of eq. 11."""
    model, x, y = _case()
    loss = nce_loss(
        model, x, y, num_samples=M, noise_sigmas=NOISE, shared_samples=shared, generator=_gen()
    )
    v = _offsets(shared, NOISE, _gen())
    _assert_same(loss, _ranking_nce_by_hand(model, x, y, y, v, NOISE), model)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("beta_is_variance", [False, True])
def test_nce_plus_is_eq_16(shared, beta_is_variance):
    """Eq. 16: eq. 12 with y^(i,0) = y_i + nu_i, nu_i ~ p_beta of eq. 15, the positive's logit
    using log p_N(y_i + nu_i | y_i). p_beta has variances beta sigma_k^2 (eq. 15 as printed,
    ``beta_is_variance``) or standard deviations beta sigma_k (the reference code's convention,
    the library's default)."""
    model, x, y = _case()
    beta = 0.25
    loss = nce_plus_loss(
        model,
        x,
        y,
        num_samples=M,
        noise_sigmas=NOISE,
        beta=beta,
        beta_is_variance=beta_is_variance,
        shared_samples=shared,
        generator=_gen(),
    )
    gen = _gen()
    v = _offsets(shared, NOISE, gen)
    scale = math.sqrt(beta) if beta_is_variance else beta
    nu = _mixture_draw(gen, (1,) if shared else (B,), NOISE, scale).expand(B, D)
    assert nu.abs().max() > 1e-3  # the positive really is jittered
    _assert_same(loss, _ranking_nce_by_hand(model, x, y, y + nu, v, NOISE), model)


def test_sm_is_eq_13():
    """Eq. 13: (1/n) sum_i tr(grad_y^2 f(x_i, y_i)) + 1/2 ||grad_y f(x_i, y_i)||^2."""
    model, x, y = _case()
    labels = y[:, None, :]
    hand = (model.laplacian_y(x, labels) + 0.5 * model.grad_y(x, labels).square().sum(-1)).mean()
    _assert_same(sm_loss(model, x, y), hand, model)


def test_dsm_is_eq_14():
    """Eq. 14: (1/n) sum_i (1/M) sum_m ||grad_y f(x_i, y~) + (y~ - y_i) / sigma^2||^2,
    y~ = y_i + sigma eps ~ N(y_i, sigma^2 I)."""
    model, x, y = _case()
    sigma = 0.25
    loss = dsm_loss(model, x, y, num_samples=M, sigma=sigma, generator=_gen())
    eps = torch.randn((B, M, D), generator=_gen(), dtype=torch.float64)
    noisy = y[:, None, :] + sigma * eps
    target = (noisy - y[:, None, :]) / sigma**2
    hand = (model.grad_y(x, noisy) + target).square().sum(-1).mean()
    _assert_same(loss, hand, model)


@pytest.mark.parametrize("name", ["ml-is", "kld-is", "nce", "nce+"])
def test_sample_losses_match_their_formulas_where_exp_f_underflows(name):
    """With f about -1e4 at every candidate, exp(f) is 0 in float64, so a loss computed with
    exp(f) instead of in log space would be nan or inf; the library's value and gradients must
    still be the equation's (evaluated in log space by hand)."""
    model, x, y = _case(scale=4e4)
    gen = _gen()
    nce = name.startswith("nce")
    v = _offsets(False, NOISE if nce else PROPOSAL, gen)
    assert model(x, torch.cat([y[:, None, :], y[:, None, :] + v], 1)).max() < -800
    common = {"num_samples": M, "generator": _gen()}
    if name == "ml-is":
        loss = ml_is_loss(model, x, y, proposal_sigmas=PROPOSAL, **common)
        hand = _ml_is_by_hand(model, x, y, v)
    elif name == "kld-is":
        loss = kld_is_loss(model, x, y, proposal_sigmas=PROPOSAL, label_sigma=0.5, **common)
        hand = _kld_is_by_hand(model, x, y, v, 0.5)
    elif name == "nce":
        loss = nce_loss(model, x, y, noise_sigmas=NOISE, **common)
        hand = _ranking_nce_by_hand(model, x, y, y, v, NOISE)
    else:
        loss = nce_plus_loss(model, x, y, noise_sigmas=NOISE, beta=0.25, **common)
        nu = _mixture_draw(gen, (B,), NOISE, 0.25)
        hand = _ranking_nce_by_hand(model, x, y, y + nu, v, NOISE)
    assert torch.isfinite(hand)
    _assert_same(loss, hand, model)
