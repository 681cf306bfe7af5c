"""The NumPy classifier: its Jacobian products are the adjoints they claim to be, and its
Gauss-Newton / CG training gives PyTorch's (double-backprop) result on random problems."""

import numpy as np
import pytest
import torch

from ebmtrack.lite import classifier as lite
from ebmtrack.models import atom_classifier as ref
from ebmtrack.optim import gauss_newton_cg

SETTINGS = lite.ClassifierSettings(pelu_alpha=0.05, filter_reg=0.1, projection_reg=1e-4)


def problem(seed: int, dtype=np.float64, batch=5, channels=12, dim=6, k=4, size=(9, 7)):
    rng = np.random.default_rng(seed)
    height, width = size
    x = rng.normal(size=(batch, channels, height, width)).astype(dtype)
    labels = rng.uniform(size=(batch, height, width)).astype(dtype)
    weights = rng.uniform(0.1, 1.0, size=batch).astype(dtype)
    weights /= weights.sum()
    filt = (rng.normal(size=(dim, k, k)) * 0.1).astype(dtype)
    projection = (rng.normal(size=(dim, channels)) / np.sqrt(channels)).astype(dtype)
    return x, labels, weights, filt, projection


def torch_config(channels, dim, k):
    return ref.ClassifierConfig(
        in_channels=channels,
        projection_dim=dim,
        filter_size=k,
        pelu_alpha=SETTINGS.pelu_alpha,
        filter_reg=SETTINGS.filter_reg,
        projection_reg=SETTINGS.projection_reg,
    )


@pytest.mark.parametrize("k", [3, 4, 5])
def test_filter_response_is_torchs_and_both_adjoints_are_adjoint(k):
    rng = np.random.default_rng(k)
    z = rng.normal(size=(3, 5, 8, 6))
    w = rng.normal(size=(5, k, k))
    q = rng.normal(size=(3, 8, 6))
    out = lite.filter_response(z, w)
    expected = ref.filter_response(torch.from_numpy(z), torch.from_numpy(w)[None]).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    inner = np.vdot(out, q)
    assert np.vdot(w, lite.filter_adjoint(z, q, k)) == pytest.approx(inner, rel=1e-12)
    assert np.vdot(z, lite.input_adjoint(w, q)) == pytest.approx(inner, rel=1e-12)


def test_joint_jacobian_products_match_autograd():
    x, labels, weights, filt, projection = problem(1)
    config = torch_config(x.shape[1], filt.shape[0], filt.shape[-1])
    ours = lite.JointProblem(
        filt,
        projection,
        lite.channel_major(x),
        (x.shape[0], *x.shape[2:]),
        labels,
        weights,
        SETTINGS,
    )

    def residuals(params):
        return ref.classifier_residuals(
            params[0],
            params[1],
            torch.from_numpy(x),
            torch.from_numpy(labels),
            torch.from_numpy(weights),
            config,
        )

    from ebmtrack.optim import Linearization

    theirs = Linearization(
        residuals, [torch.from_numpy(filt)[None], torch.from_numpy(projection)[:, :, None, None]]
    )
    assert ours.loss() == pytest.approx(float(theirs.loss()), rel=1e-12)
    rng = np.random.default_rng(2)
    direction = [rng.normal(size=filt.shape), rng.normal(size=projection.shape)]
    jvp = ours.jvp(direction)
    expected = theirs.jvp(
        [torch.from_numpy(direction[0])[None], torch.from_numpy(direction[1])[:, :, None, None]]
    )
    for a, b in zip(jvp, expected, strict=True):
        np.testing.assert_allclose(a, b.numpy().reshape(a.shape), rtol=1e-10, atol=1e-12)
    vector = [rng.normal(size=r.shape) for r in ours.residuals]
    vjp = ours.vjp(vector)
    shaped = [torch.from_numpy(v.reshape(r.shape)) for v, r in zip(vector, theirs.residuals)]
    for a, b in zip(vjp, theirs.vjp(shaped), strict=True):
        np.testing.assert_allclose(a, b.numpy().reshape(a.shape), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_first_frame_gauss_newton_equals_torchs(seed):
    x, labels, weights, filt, projection = problem(seed)
    config = torch_config(x.shape[1], filt.shape[0], filt.shape[-1])
    got_filter, got_projection, losses = lite.fit_classifier(
        filt, projection, x, labels, weights, SETTINGS, gn_iters=4, cg_iters=8
    )

    def residuals(params):
        return ref.classifier_residuals(
            params[0],
            params[1],
            torch.from_numpy(x),
            torch.from_numpy(labels),
            torch.from_numpy(weights),
            config,
        )

    result = gauss_newton_cg(
        residuals,
        [torch.from_numpy(filt)[None], torch.from_numpy(projection)[:, :, None, None]],
        gn_iters=4,
        cg_iters=8,
        preconditioner=[config.filter_reg, config.projection_reg],
        beta="fletcher-reeves",
    )
    want_filter, want_projection = (p.numpy() for p in result.params)
    np.testing.assert_allclose(got_filter, want_filter[0], rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(got_projection, want_projection[:, :, 0, 0], rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(losses, result.losses.numpy()[:-1], rtol=1e-5)
    assert losses[-1] < losses[0]  # a real fit, not a no-op


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_filter_update_equals_torchs(seed):
    x, labels, weights, filt, projection = problem(seed)
    z = lite.project(x, projection)
    got, loss = lite.update_filter(filt, z, labels, weights, SETTINGS, cg_iters=5)
    classifier = ref.AtomClassifier(torch_config(x.shape[1], filt.shape[0], filt.shape[-1]))
    classifier = classifier.double()
    with torch.no_grad():
        classifier.filter.copy_(torch.from_numpy(filt)[None])
    losses = ref.update_filter(
        classifier,
        torch.from_numpy(z),
        torch.from_numpy(labels),
        torch.from_numpy(weights),
        cg_iters=5,
    )
    np.testing.assert_allclose(got, classifier.filter.detach().numpy()[0], rtol=1e-5, atol=1e-8)
    assert loss == pytest.approx(float(losses[0]), rel=1e-10)
    assert not np.allclose(got, filt)


def test_float32_training_stays_close_to_torchs_float32():
    x, labels, weights, filt, projection = problem(5, dtype=np.float32, batch=8, channels=24)
    config = torch_config(x.shape[1], filt.shape[0], filt.shape[-1])
    got_filter, got_projection, _ = lite.fit_classifier(
        filt, projection, x, labels, weights, SETTINGS, gn_iters=6, cg_iters=10
    )
    assert got_filter.dtype == np.float32 and got_projection.dtype == np.float32
    classifier = ref.AtomClassifier(config)
    with torch.no_grad():
        classifier.filter.copy_(torch.from_numpy(filt)[None])
        classifier.projection.copy_(torch.from_numpy(projection)[:, :, None, None])
    ref.fit_classifier(
        classifier,
        torch.from_numpy(x),
        torch.from_numpy(labels),
        torch.from_numpy(weights),
        gn_iters=6,
        cg_iters=10,
    )
    want = classifier.filter.detach().numpy()[0]
    assert np.abs(got_filter - want).max() <= 1e-4 * np.abs(want).max()


def test_labels_and_normalisation_are_torchs():
    rng = np.random.default_rng(0)
    centers = rng.uniform(0, 18, size=(4, 2)).astype(np.float32)
    got = lite.gaussian_labels(centers, 1.3, (18, 17))
    want = ref.gaussian_labels(torch.from_numpy(centers), 1.3, (18, 17)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    from ebmtrack.tracking.atom.classifier import normalize_features

    x = rng.normal(size=(3, 5, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(
        lite.normalize_features(x),
        normalize_features(torch.from_numpy(x)).numpy(),
        rtol=1e-6,
    )
