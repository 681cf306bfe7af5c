import pytest
import torch

from ebmtrack.optim import Linearization, conjugate_gradient, gauss_newton_cg
from ebmtrack.optim.problems import AtomClassifierProblem, first_order_losses, pelu, shifted_sum


def linear_problem(seed=0):
    generator = torch.Generator().manual_seed(seed)
    matrix = torch.randn(40, 9, generator=generator, dtype=torch.float64)
    target = torch.randn(40, generator=generator, dtype=torch.float64)
    solution = torch.linalg.lstsq(matrix, target[:, None]).solution[:, 0]

    def residuals(params):
        return matrix @ torch.cat([p.flatten() for p in params]) - target

    start = [torch.zeros(2, 3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)]
    return residuals, start, solution


def nonlinear_residuals(params):
    a, b = params
    return [torch.sin(a) * b.sum() + a**2, torch.stack([a.prod(), b[0] * b[1]]), 0.3 * b]


def test_jacobian_products_match_explicit_jacobian():
    generator = torch.Generator().manual_seed(1)
    params = [
        torch.randn(3, generator=generator, dtype=torch.float64),
        torch.randn(2, generator=generator, dtype=torch.float64),
    ]

    def flat_residuals(a, b):
        return torch.cat([r.flatten() for r in nonlinear_residuals([a, b])])

    jacobian = torch.cat(torch.autograd.functional.jacobian(flat_residuals, tuple(params)), dim=1)
    lin = Linearization(nonlinear_residuals, params)
    direction = [
        torch.randn(3, generator=generator, dtype=torch.float64),
        torch.randn(2, generator=generator, dtype=torch.float64),
    ]
    jvp = torch.cat([r.flatten() for r in lin.jvp(direction)])
    torch.testing.assert_close(jvp, jacobian @ torch.cat(direction))
    vector = [torch.randn_like(r) for r in lin.residuals]
    vjp = torch.cat(lin.vjp(vector))
    torch.testing.assert_close(vjp, jacobian.T @ torch.cat([v.flatten() for v in vector]))
    gradient = torch.cat(lin.gradient())
    torch.testing.assert_close(gradient, jacobian.T @ flat_residuals(*params))
    expected_loss = 0.5 * flat_residuals(*params).pow(2).sum()
    torch.testing.assert_close(lin.loss(), expected_loss)


@pytest.mark.parametrize("beta", ["fletcher-reeves", "polak-ribiere"])
@pytest.mark.parametrize("preconditioned", [False, True])
def test_linear_least_squares_reaches_closed_form(beta, preconditioned):
    residuals, start, solution = linear_problem()
    preconditioner = [torch.full((2, 3), 2.0, dtype=torch.float64), 0.5] if preconditioned else None
    # 9 unknowns: CG is exact after 9 iterations in exact arithmetic; two GN rounds polish.
    result = gauss_newton_cg(residuals, start, 2, 9, preconditioner, beta)
    found = torch.cat([p.flatten() for p in result.params])
    assert (found - solution).abs().max() < 1e-6
    optimum = 0.5 * residuals([solution[:6].view(2, 3), solution[6:]]).pow(2).sum()
    assert result.losses.shape == (3,)
    torch.testing.assert_close(result.losses[-1], optimum)
    assert result.losses[0] > result.losses[-1]


def test_nonlinear_problem_converges_to_zero_residual():
    # Rosenbrock as least squares: r = (10 (y - x^2), 1 - x), minimum 0 at (1, 1).
    def residuals(params):
        x, y = params[0]
        return torch.stack([10 * (y - x**2), 1 - x])

    result = gauss_newton_cg(residuals, [torch.tensor([-1.2, 1.0], dtype=torch.float64)], 10, 2)
    torch.testing.assert_close(result.params[0], torch.ones(2, dtype=torch.float64))
    assert result.losses[-1] < 1e-20


def test_inputs_untouched_constant_residuals_and_unused_params_allowed():
    residuals, start, _ = linear_problem()
    fixed = torch.ones(3, dtype=torch.float64)
    before = [p.clone() for p in start]

    # The second parameter block is held fixed: its regularisation is a constant residual.
    def partial(params):
        return [residuals([params[0], fixed]), 0.1 * fixed]

    result = conjugate_gradient(partial, start[:1], 6)
    assert all(torch.equal(a, b) for a, b in zip(start, before))
    # A parameter no residual depends on stays where it is.
    unused = conjugate_gradient(lambda params: partial(params[:1]), [start[0], fixed], 6)
    torch.testing.assert_close(unused.params[0], result.params[0])
    assert torch.equal(unused.params[1], fixed)
    assert result.params[0].shape == (2, 3) and not result.params[0].requires_grad
    assert result.losses.shape == (2,) and result.losses[1] < result.losses[0]
    with pytest.raises(ValueError, match="depend on params"):
        conjugate_gradient(lambda params: fixed, start[:1], 2)


def test_zero_iterations_and_exact_start_are_stable():
    residuals, _, solution = linear_problem()
    start = [solution[:6].view(2, 3), solution[6:]]
    # At the optimum the gradient vanishes: CG must return a zero step, not NaN.
    result = gauss_newton_cg(residuals, start, 2, 5)
    assert all(torch.isfinite(p).all() for p in result.params)
    torch.testing.assert_close(torch.cat([p.flatten() for p in result.params]), solution)
    none = gauss_newton_cg(residuals, start, 0, 5)
    assert none.losses.shape == (1,)  # the loss at the start only
    torch.testing.assert_close(none.losses[0], 0.5 * residuals(start).pow(2).sum())


def test_rejects_bad_options():
    residuals, start, _ = linear_problem()
    with pytest.raises(ValueError, match="beta"):
        gauss_newton_cg(residuals, start, 1, 1, beta="hestenes")
    with pytest.raises(ValueError, match="preconditioner"):
        gauss_newton_cg(residuals, start, 1, 1, preconditioner=[1.0])
    with pytest.raises(ValueError, match="cg_iters"):
        conjugate_gradient(residuals, start, -1)


def test_pelu():
    t = torch.tensor([-1.0, -0.05, 0.0, 0.5])
    expected = torch.tensor([0.05 * (torch.e**-20 - 1), 0.05 * (torch.e**-1 - 1), 0.0, 0.5])
    torch.testing.assert_close(pelu(t), expected)


def test_classifier_scores_equal_conv2d():
    generator = torch.Generator().manual_seed(0)
    problem = AtomClassifierProblem.synthetic(3, 8, 9, generator=generator, dtype=torch.float64)
    w1, w2 = problem.initial_params(projection_dim=5, generator=generator)
    projected = torch.nn.functional.conv2d(problem.features, w1[:, :, None, None])
    expected = torch.nn.functional.conv2d(projected, w2[None], padding=2)[..., :9, :9]
    torch.testing.assert_close(problem.scores([w1, w2]), expected)


@pytest.mark.slow
def test_gauss_newton_beats_adam_and_sgd_on_atom_classifier(one_thread):
    # A small version of ATOM's first-frame problem; GN-CG with 6 x 10 iterations costs
    # 6 x 2 x 10 = 120 backward passes, the first-order methods get as many steps.
    generator = torch.Generator().manual_seed(0)
    problem = AtomClassifierProblem.synthetic(8, 32, 10, generator=generator)
    start = problem.initial_params(projection_dim=8, generator=generator)
    result = gauss_newton_cg(problem.residuals, start, 6, 10, problem.preconditioner())
    assert (result.losses[1:] < result.losses[:-1]).all()
    best = {
        name: min(
            first_order_losses(problem.loss, start, 120, name, lr)[-1].nan_to_num(1e9) for lr in lrs
        )
        for name, lrs in {"adam": (1e-3, 3e-3, 1e-2), "sgd": (1e-4, 3e-4, 1e-3)}.items()
    }
    assert result.losses[-1] < 0.8 * best["adam"]
    assert result.losses[-1] < 0.8 * best["sgd"]


def test_filter_residuals_equal_joint_residuals_with_identity_projection():
    generator = torch.Generator().manual_seed(0)
    problem = AtomClassifierProblem.synthetic(3, 6, 9, generator=generator, dtype=torch.float64)
    _, w2 = problem.initial_params(projection_dim=6, generator=generator)
    identity = torch.eye(6, dtype=torch.float64)
    joint = problem.residuals([identity, w2])
    alone = problem.filter_residuals([w2])
    torch.testing.assert_close(alone[0], joint[0])
    torch.testing.assert_close(alone[1], joint[2])


@pytest.mark.parametrize("size", [3, 4])
def test_shifted_sum_equals_conv2d_with_one_hot_kernels(size):
    generator = torch.Generator().manual_seed(0)
    taps = torch.randn(size, size, 2, 5, 7, generator=generator, dtype=torch.float64)
    # conv2d of the k*k tap maps (as channels) with one-hot kernels sums them shifted.
    one_hot = torch.eye(size * size, dtype=torch.float64).view(1, size * size, size, size)
    expected = torch.nn.functional.conv2d(
        taps.flatten(0, 1).transpose(0, 1), one_hot, padding=size // 2
    )[:, 0, :5, :7]
    torch.testing.assert_close(shifted_sum(taps), expected)


def test_classifier_jacobian_products_match_explicit_jacobian():
    # The folded filter w2^T w1 and the shifted sums must leave J exactly that of w2 * (w1 x).
    generator = torch.Generator().manual_seed(2)
    problem = AtomClassifierProblem.synthetic(2, 5, 9, generator=generator, dtype=torch.float64)
    w1, w2 = problem.initial_params(projection_dim=3, generator=generator)
    w2 = w2 * 300  # a filter large enough that the PELU is in both of its pieces
    scores = problem.scores([w1, w2])
    assert (scores > 0).any() and (scores < 0).any()

    def flat_residuals(a, b):
        return torch.cat([r.flatten() for r in problem.residuals([a, b])])

    blocks = torch.autograd.functional.jacobian(flat_residuals, (w1, w2))
    jacobian = torch.cat([block.flatten(1) for block in blocks], dim=1)
    lin = Linearization(problem.residuals, [w1, w2])
    direction = [torch.randn_like(w1), torch.randn_like(w2)]
    jvp = torch.cat([r.flatten() for r in lin.jvp(direction)])
    torch.testing.assert_close(jvp, jacobian @ torch.cat([d.flatten() for d in direction]))
    vector = [torch.randn_like(r) for r in lin.residuals]
    vjp = torch.cat([g.flatten() for g in lin.vjp(vector)])
    torch.testing.assert_close(vjp, jacobian.T @ torch.cat([v.flatten() for v in vector]))
