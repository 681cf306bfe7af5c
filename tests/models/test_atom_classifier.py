import math

import pytest
import torch
import torch.nn.functional as F

from ebmtrack.models.atom_classifier import (
    AtomClassifier,
    ClassifierConfig,
    FilterLinearization,
    classifier_residuals,
    filter_response,
    filter_response_adjoint,
    fit_classifier,
    gaussian_labels,
    pelu,
    project,
    update_filter,
)
from ebmtrack.models.serialization import load_model, save_model
from ebmtrack.optim import conjugate_gradient


def test_pelu_matches_the_paper_formula():
    t = torch.tensor([-1.0, -0.05, 0.0, 0.3, 2.0])
    alpha = 0.05
    expected = torch.where(t >= 0, t, alpha * (torch.exp(t / alpha) - 1))
    torch.testing.assert_close(pelu(t, alpha), expected)
    # Saturates at -alpha: easy negatives cost at most alpha.
    assert pelu(torch.tensor(-100.0), alpha).item() == pytest.approx(-alpha)


def test_filter_response_is_the_cropped_padded_convolution():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 7, 9, generator=gen)
    filt = torch.randn(1, 5, 4, 4, generator=gen)
    expected = F.conv2d(x, filt, padding=2)[:, 0, :7, :9]
    torch.testing.assert_close(filter_response(x, filt), expected, rtol=1e-5, atol=1e-5)
    odd = torch.randn(1, 5, 3, 3, generator=gen)
    torch.testing.assert_close(
        filter_response(x, odd), F.conv2d(x, odd, padding=1)[:, 0], rtol=1e-5, atol=1e-5
    )


def test_project_is_a_1x1_convolution():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 6, 4, 5, generator=gen)
    w = torch.randn(3, 6, 1, 1, generator=gen)
    torch.testing.assert_close(project(x, w), F.conv2d(x, w), rtol=1e-5, atol=1e-5)


def test_output_cell_i_sits_at_feature_coordinate_i_minus_half():
    # A single feature impulse at cell j and a filter that is one at kernel offset (1, 1) and
    # (2, 2) ... : with a constant 4x4 filter, the response to an impulse at j covers outputs
    # j-1 .. j+2, whose centre is j + 0.5: output i is centred on feature i - 0.5.
    x = torch.zeros(1, 1, 12, 12)
    x[0, 0, 5, 5] = 1.0
    out = filter_response(x, torch.ones(1, 1, 4, 4))[0]
    rows = torch.nonzero(out.sum(1)).flatten().tolist()
    assert rows == [4, 5, 6, 7]
    assert sum(rows) / len(rows) == 5.5


def test_gaussian_labels_peak_and_width():
    labels = gaussian_labels(torch.tensor([[3.0, 5.0], [2.5, 2.5]]), 0.9, (10, 8))
    assert labels.shape == (2, 10, 8)
    assert labels[0, 5, 3].item() == pytest.approx(1.0)
    assert labels[0, 5, 4].item() == pytest.approx(math.exp(-0.5 / 0.81))
    # A half-cell centre gives four equal maxima around it.
    top = labels[1, 2:4, 2:4]
    torch.testing.assert_close(top, torch.full_like(top, top[0, 0].item()))


def test_residuals_give_the_weighted_loss_of_eq3():
    config = ClassifierConfig(in_channels=4, projection_dim=3)
    clf = AtomClassifier(config, generator=torch.Generator().manual_seed(0))
    x = torch.randn(2, 4, 6, 6)
    y = torch.rand(2, 6, 6)
    w = torch.tensor([0.3, 0.7])
    res = classifier_residuals(clf.filter, clf.projection, x, y, w, config)
    loss = sum(r.pow(2).sum() for r in res)
    scores = pelu(clf(x), config.pelu_alpha)
    expected = (w[:, None, None] * (scores - y) ** 2).sum()
    expected = expected + 0.1 * clf.filter.pow(2).sum() + 1e-4 * clf.projection.pow(2).sum()
    torch.testing.assert_close(loss, expected)


def _toy_problem(seed=0, samples=12, channels=16, size=9):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, channels, size, size, generator=gen)
    # The target: a fixed random pattern at varying positions, the labels centred on it.
    pattern = torch.randn(channels, 3, 3, generator=gen) * 3
    centers = torch.randint(2, size - 3, (samples, 2), generator=gen)
    for i, (cx, cy) in enumerate(centers.tolist()):
        x[i, :, cy - 1 : cy + 2, cx - 1 : cx + 2] += pattern
    labels = gaussian_labels(centers.float() + 0.5, 0.9, (size, size))
    weights = torch.full((samples,), 1.0 / samples)
    return x, labels, weights


def test_joint_gauss_newton_training_lowers_the_loss_and_finds_the_target():
    x, labels, weights = _toy_problem()
    clf = AtomClassifier(ClassifierConfig(in_channels=16, projection_dim=8), torch.Generator())
    losses = fit_classifier(clf, x, labels, weights, gn_iters=6, cg_iters=10)
    assert losses.shape == (7,)
    assert losses[-1] < 0.5 * losses[0]
    assert torch.all(losses[1:] <= losses[:-1] + 1e-6)
    with torch.no_grad():
        scores = clf(x)
    peak, true = scores.flatten(1).argmax(1), labels.flatten(1).argmax(1)
    peaks = torch.stack([peak // 9, peak % 9], 1)
    truth = torch.stack([true // 9, true % 9], 1)
    # The labels peak between two cells (half-cell centre), so one cell is exact enough.
    assert ((peaks - truth).abs().max(1).values <= 1).all()


def test_filter_update_lowers_the_loss_and_keeps_the_projection():
    x, labels, weights = _toy_problem(seed=1)
    clf = AtomClassifier(ClassifierConfig(in_channels=16, projection_dim=8), torch.Generator())
    projection = clf.projection.detach().clone()
    with torch.no_grad():
        z = clf.project(x)
    losses = update_filter(clf, z, labels, weights, cg_iters=5, final_loss=True)
    assert losses.shape == (2,)
    assert losses[1] < losses[0]
    torch.testing.assert_close(clf.projection.detach(), projection)


def test_filter_response_without_autograd_equals_the_differentiable_path():
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(3, 5, 7, 6, generator=gen)
    for k in (3, 4):
        filt = torch.randn(1, 5, k, k, generator=gen)
        with torch.no_grad():
            fast = filter_response(x, filt)
        differentiable = filter_response(x, filt.clone().requires_grad_(True))
        torch.testing.assert_close(fast, differentiable.detach(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k", [3, 4])
def test_filter_response_adjoint_is_the_transpose(k):
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(3, 5, 7, 6, generator=gen, dtype=torch.float64)
    filt = torch.randn(1, 5, k, k, generator=gen, dtype=torch.float64)
    q = torch.randn(3, 7, 6, generator=gen, dtype=torch.float64)
    adjoint = filter_response_adjoint(x, q, k)
    # <A w, q> = <w, A^T q>, and A^T q is the gradient of <A w, q> in w.
    torch.testing.assert_close((filter_response(x, filt) * q).sum(), (filt * adjoint).sum())
    leaf = filt.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad((filter_response(x, leaf) * q).sum(), leaf)
    torch.testing.assert_close(adjoint, grad)


def test_closed_form_filter_update_equals_the_generic_solver():
    # Scores on both sides of 0, so that the PELU's slope varies across the samples.
    x, labels, weights = _toy_problem(seed=2)
    config = ClassifierConfig(in_channels=16, projection_dim=8)
    clf = AtomClassifier(config, torch.Generator().manual_seed(3))
    with torch.no_grad():
        clf.filter.mul_(50.0)
        z = clf.project(x)
    scores = filter_response(z, clf.filter.detach())
    assert (scores > 0).any() and (scores < -0.05).any()
    generic = conjugate_gradient(
        lambda p: classifier_residuals(p[0], None, z, labels, weights, config),
        [clf.filter.detach()],
        5,
        beta="polak-ribiere",
    )
    losses = update_filter(clf, z, labels, weights, cg_iters=5, final_loss=True)
    torch.testing.assert_close(clf.filter.detach(), generic.params[0], rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(losses, generic.losses, rtol=1e-4, atol=1e-6)


def test_classifier_round_trip(tmp_path):
    clf = AtomClassifier(ClassifierConfig(in_channels=10, projection_dim=5))
    path = save_model(clf, tmp_path / "clf.safetensors")
    loaded = load_model(path)
    assert loaded.config == clf.config
    torch.testing.assert_close(loaded.filter, clf.filter)
    torch.testing.assert_close(loaded.projection, clf.projection)


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="projection_dim"):
        ClassifierConfig(projection_dim=0)
    with pytest.raises(ValueError, match="filter_reg"):
        ClassifierConfig(filter_reg=-1.0)


def test_bfloat16_products_are_the_float32_ones_to_bfloat16_precision():
    # A rounded copy of the samples, float32 accumulation: each Jacobian product agrees with the
    # float32 one to about bfloat16's 8 significant bits.
    x, labels, weights = _toy_problem(seed=6)
    config = ClassifierConfig(in_channels=16, projection_dim=16)
    filt = torch.randn(1, 16, 4, 4, generator=torch.Generator().manual_seed(7))
    exact = FilterLinearization(filt, x, labels, weights, config)
    rounded = FilterLinearization(filt, x, labels, weights, config, torch.bfloat16)
    assert rounded.samples.dtype == torch.bfloat16 and exact.samples.dtype == torch.float32
    step = [torch.randn(filt.shape, generator=torch.Generator().manual_seed(8))]
    data = torch.randn(labels.shape, generator=torch.Generator().manual_seed(9))
    reg = torch.randn(filt.shape, generator=torch.Generator().manual_seed(10))
    for got, want in [
        (rounded.jvp(step)[0], exact.jvp(step)[0]),
        (rounded.vjp([data, reg])[0], exact.vjp([data, reg])[0]),
        (rounded.gradient()[0], exact.gradient()[0]),
    ]:
        assert got.dtype == torch.float32
        relative = (got - want).norm() / want.norm()
        assert 1e-6 < relative < 1e-2  # rounded, and only by the rounding
    # Adjoint up to the rounding: |<J p, q> - <p, J^T q>| small against ||J p|| ||q||.
    jac_step = rounded.jvp(step)[0]
    gap = (jac_step * data).sum() - (step[0] * rounded.vjp([data, 0 * reg])[0]).sum()
    assert gap.abs() < 1e-2 * jac_step.norm() * data.norm()


def test_bfloat16_update_lowers_the_loss_like_the_float32_one():
    x, labels, weights = _toy_problem(seed=1)
    config = ClassifierConfig(in_channels=16, projection_dim=8)
    losses = {}
    for dtype in (None, torch.bfloat16):
        clf = AtomClassifier(config, torch.Generator().manual_seed(0))
        with torch.no_grad():
            z = clf.project(x)
        losses[dtype] = update_filter(clf, z, labels, weights, 5, True, product_dtype=dtype)
    before, after = losses[torch.bfloat16]
    assert after < 0.5 * before
    torch.testing.assert_close(losses[torch.bfloat16], losses[None], rtol=2e-2, atol=0.0)
