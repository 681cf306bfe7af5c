import math

import pytest
import torch

from ebmtrack.models.backbones import create_backbone
from ebmtrack.models.dimp import (
    DiMPClassifier,
    DiMPConfig,
    SteepestDescentGN,
    apply_filter,
    apply_filter_transpose,
    classification_loss,
    distance_bins,
    hinge_mse,
    instance_l2_norm,
    leaky_relu_par,
    leaky_relu_par_deriv,
    pool_filter,
    score_labels,
)
from ebmtrack.models.serialization import load_model, read_model_config, save_model

TINY = DiMPConfig(in_channels=6, num_blocks=1, feature_dim=8, num_iter=2)


def _model(config=TINY, seed=0):
    torch.manual_seed(seed)
    return DiMPClassifier(config)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


# ----------------------------------------------------------------------------- layers


def test_distance_bins_put_linear_weights_on_floor_and_next_bin():
    num_bins, bin_size = 7, 0.75
    center = torch.tensor([[2.3, 1.6]], dtype=torch.float64)  # (x, y)
    basis = distance_bins(center, (6, 9), num_bins, bin_size)[0]
    assert basis.shape == (num_bins, 6, 9)
    for i in range(6):
        for j in range(9):
            t = math.hypot(j - 2.3, i - 1.6) / bin_size
            expected = torch.zeros(num_bins, dtype=torch.float64)
            k = math.floor(t)
            if k >= num_bins - 1:  # beyond the last bin centre: all weight on the last bin
                expected[-1] = 1.0
            else:
                expected[k] = 1.0 - (t - k)
                expected[k + 1] = t - k
            torch.testing.assert_close(basis[:, i, j], expected)


def test_distance_bins_exact_distances():
    # A 3-4-5 triangle: the cell (y=3, x=4) is at distance 5 from (0, 0) = bin 10 for size 0.5.
    basis = distance_bins(torch.zeros(1, 2), (4, 5), num_bins=12, bin_size=0.5)[0]
    assert basis[10, 3, 4] == pytest.approx(1.0)
    assert basis[:, 3, 4].sum() == pytest.approx(1.0)
    assert basis[0, 0, 0] == 1.0


@pytest.mark.parametrize("k", [3, 4])
def test_filter_transpose_is_the_adjoint_and_the_gradient(k):
    gen = _gen(1)
    feats = torch.randn(3, 2, 5, 7, 6, generator=gen, dtype=torch.float64)
    filt = torch.randn(2, 5, k, k, generator=gen, dtype=torch.float64, requires_grad=True)
    scores = apply_filter(feats, filt)
    assert scores.shape == (3, 2, 7 + 1 - k % 2, 6 + 1 - k % 2)
    maps = torch.randn(scores.shape, generator=gen, dtype=torch.float64)
    transposed = apply_filter_transpose(feats, maps, k)
    assert transposed.shape == filt.shape
    (grad,) = torch.autograd.grad((scores * maps).sum(), filt)
    torch.testing.assert_close(transposed, grad)


def test_instance_l2_norm_sets_the_mean_square():
    x = torch.randn(3, 4, 5, 6, generator=_gen(2), dtype=torch.float64) * 7
    out = instance_l2_norm(x, scale=0.25, eps=0.0)
    torch.testing.assert_close((out**2).mean(dim=(1, 2, 3)), torch.full((3,), 0.0625).double())


def test_score_activation_is_identity_on_target_and_relu_on_background():
    x = torch.linspace(-2, 2, 9, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(leaky_relu_par(x, torch.ones_like(x)), x)
    torch.testing.assert_close(leaky_relu_par(x, torch.zeros_like(x)), torch.relu(x))
    mask = torch.full_like(x, 0.3)
    (grad,) = torch.autograd.grad(leaky_relu_par(x, mask).sum(), x)
    nonzero = x != 0
    torch.testing.assert_close(leaky_relu_par_deriv(x, mask)[nonzero], grad[nonzero])


# ----------------------------------------------------------------------------- initializer


def _ramp_features(num_images=2, size=12):
    """Channel 0 holds x (the column index), channel 1 holds y: PrRoIPool of a linear field over
    a bin inside the map is the field at the bin centre."""
    ys, xs = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    field = torch.stack([xs, ys]).double()  # (2, H, W)
    return field.expand(num_images, 1, 2, size, size).clone()


def test_pool_filter_is_the_mean_of_prroi_pooled_boxes():
    stride, k = 4, 4
    feats = _ramp_features()
    boxes = torch.tensor([[[8.0, 12.0, 24.0, 16.0]], [[16.0, 4.0, 12.0, 20.0]]]).double()
    pooled = pool_filter(feats, boxes, k, stride)
    assert pooled.shape == (1, 2, k, k)
    expected = torch.zeros(2, k, k, dtype=torch.float64)
    for x, y, w, h in boxes[:, 0].tolist():
        q = torch.arange(k, dtype=torch.float64) + 0.5
        cx = (x + q * w / k) / stride  # bin centres in feature cells
        cy = (y + q * h / k) / stride
        expected[0] += cx[None, :].expand(k, k) / 2
        expected[1] += cy[:, None].expand(k, k) / 2
    torch.testing.assert_close(pooled[0], expected)


def test_initializer_with_identity_conv_equals_pool_filter():
    config = DiMPConfig(in_channels=2, feature_dim=2, stride=4)
    model = DiMPClassifier(config).double()
    with torch.no_grad():
        torch.nn.init.dirac_(model.init_conv.weight)
        model.init_conv.bias.zero_()
    feats = _ramp_features()
    boxes = torch.tensor([[[8.0, 12.0, 24.0, 16.0]], [[16.0, 4.0, 12.0, 20.0]]]).double()
    torch.testing.assert_close(
        model.initialize_filter(feats, boxes), pool_filter(feats, boxes, 4, 4)
    )


# ----------------------------------------------------------------------------- optimizer


def _problem(seed=3, num_images=3, num_seq=2, channels=8, size=10, stride=16):
    gen = _gen(seed)
    raw = torch.randn(num_images * num_seq, channels, size, size, generator=gen)
    feats = instance_l2_norm(raw, math.sqrt(1 / (channels * 16))).reshape(
        num_images, num_seq, channels, size, size
    )
    centers = torch.rand(num_images, num_seq, 2, generator=gen) * (size - 4) * stride + 2 * stride
    boxes = torch.cat([centers - 24, torch.full_like(centers, 48)], dim=-1)
    filters = torch.randn(num_seq, channels, 4, 4, generator=gen) * 0.1
    return filters, feats, boxes


def test_optimizer_lowers_the_loss_monotonically():
    filters, feats, boxes = _problem()
    optimizer = SteepestDescentGN()
    with torch.no_grad():
        iterates, losses = optimizer(filters, feats, boxes, num_iter=8)
    assert len(iterates) == 9 and len(losses) == 9
    values = torch.stack(losses)
    assert (values[1:] < values[:-1]).all(), values
    assert values[-1] < 0.5 * values[0]


def test_gauss_newton_step_is_an_exact_line_search_on_a_quadratic():
    # Mask = 1 everywhere makes the residuals linear in the filter and the loss quadratic; with
    # step factor 1 the step minimises the loss along -g, so the new gradient is orthogonal to g.
    filters, feats, boxes = (t.double() for t in _problem(seed=4))
    optimizer = SteepestDescentGN(init_step_length=1.0).double()
    with torch.no_grad():
        optimizer.mask_weights.fill_(40.0)

    def gradient(f):
        f = f.detach().requires_grad_(True)
        _, losses = optimizer(f, feats, boxes, num_iter=0)
        return torch.autograd.grad(losses[0], f)[0]

    iterates, _ = optimizer(filters, feats, boxes, num_iter=1)
    g0, g1 = gradient(iterates[0]), gradient(iterates[1])
    inner = (g0 * g1).sum(dim=(1, 2, 3)) / (g0 * g0).sum(dim=(1, 2, 3))
    torch.testing.assert_close(inner, torch.zeros(2, dtype=torch.float64), atol=1e-9, rtol=0)


def test_initial_label_mask_and_weight_functions():
    optimizer = SteepestDescentGN(init_gauss_sigma=0.9)
    boxes = torch.tensor([[[64.0, 64.0, 32.0, 32.0]]])  # centre (80, 80) px = cell (5, 5)
    with torch.no_grad():
        label, mask, weight = optimizer.loss_functions(boxes, (11, 11), filter_size=4)
    assert label.shape == mask.shape == weight.shape == (1, 1, 11, 11)
    far_gauss = math.exp(-0.5 * (9.9 / 0.9) ** 2)
    assert label[0, 0, 5, 5] == pytest.approx(1.0 - far_gauss)
    assert label[0, 0, 5, 6] == pytest.approx(math.exp(-0.5 / 0.81) - far_gauss, abs=1e-6)
    assert mask[0, 0, 5, 5] == pytest.approx(torch.sigmoid(torch.tensor(3 * math.tanh(2))).item())
    assert mask[0, 0, 0, 0] < 0.06  # background: nearly a hinge
    torch.testing.assert_close(weight, torch.ones_like(weight))


# ----------------------------------------------------------------------------- model


def test_forward_shapes_and_gradients_reach_every_parameter():
    model = _model().train()
    gen = _gen(5)
    train = torch.randn(2, 2, 6, 9, 9, generator=gen)
    test = torch.randn(1, 2, 6, 9, 9, generator=gen)
    train_boxes = torch.tensor([[40.0, 50.0, 40.0, 32.0], [70.0, 60.0, 30.0, 36.0]]).expand(2, 2, 4)
    test_boxes = torch.tensor([[[60.0, 44.0, 40.0, 32.0], [50.0, 70.0, 30.0, 36.0]]])
    scores = model(train, test, train_boxes)
    assert len(scores) == TINY.num_iter + 1
    assert all(s.shape == (1, 2, 10, 10) for s in scores)
    labels = score_labels(test_boxes, (10, 10), sigma=0.9, stride=16, filter_size=4)
    classification_loss(scores, labels).backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_score_peak_lands_on_the_target_after_optimization():
    torch.manual_seed(0)
    config = DiMPConfig(in_channels=16, feature_dim=16, num_iter=15)
    model = DiMPClassifier(config).eval()
    gen = _gen(6)
    pattern = torch.randn(16, generator=gen)
    size, stride = 16, 16

    def frame(cx, cy):
        """Noise features with the target pattern on the 2x2 cells around pixel (cx, cy)."""
        feat = 0.3 * torch.randn(16, size, size, generator=gen)
        i, j = int(cy // stride), int(cx // stride)
        feat[:, i - 1 : i + 1, j - 1 : j + 1] += pattern[:, None, None]
        return instance_l2_norm(feat[None], model.norm_scale)[0]

    train_centers = [(64.0, 80.0), (160.0, 96.0), (112.0, 192.0)]
    train = torch.stack([frame(*c) for c in train_centers])[:, None]
    boxes = torch.tensor([[cx - 16, cy - 16, 32.0, 32.0] for cx, cy in train_centers])[:, None]
    test_center = (192.0, 160.0)
    test = frame(*test_center)[None, None]
    with torch.no_grad():
        filters = model.initialize_filter(train, boxes)
        iterates, losses = model.optimize_filter(filters, train, boxes)
        scores = model.classify(iterates[-1], test)[0, 0]
    assert losses[-1] < losses[0]
    initial = model.classify(iterates[0], test)[0, 0]
    assert divmod(int(initial.argmax()), initial.shape[1]) != (10, 12)  # random init: elsewhere
    peak = divmod(int(scores.argmax()), scores.shape[1])
    assert peak == (test_center[1] / stride, test_center[0] / stride)


def test_classification_loss_hinges_the_background():
    labels = torch.tensor([[0.0, 0.01, 0.5, 1.0]])
    # Negative scores on the background cost nothing; positive ones are squared.
    assert hinge_mse(torch.tensor([[-3.0, -1.0, 0.5, 1.0]]), labels) == 0
    assert hinge_mse(torch.tensor([[2.0, -1.0, 0.0, 1.0]]), labels).item() == pytest.approx(
        (4.0 + 0.25) / 4
    )
    iterates = [torch.tensor([[v, 0.0, 0.5, 1.0]]) for v in (1.0, 2.0, 3.0, 4.0)]
    total = classification_loss(iterates, labels, weights=(1.0, 10.0, 100.0))
    assert total.item() == pytest.approx((1 + 10 * 16 + 100 * (4 + 9) / 2) / 4)


def test_score_labels_peak_at_the_target_centre():
    boxes = torch.tensor([[[64.0, 32.0, 64.0, 32.0]]])  # centre (96, 48) px = cell (6, 3)
    labels = score_labels(boxes, (10, 10), sigma=0.9, stride=16, filter_size=4)
    assert labels.shape == (1, 1, 10, 10)
    assert divmod(int(labels.argmax()), 10) == (3, 6) and labels.max() == 1.0


def test_default_config_has_dimp50_sizes():
    model = DiMPClassifier()
    assert model.feature_projection.weight.shape == (512, 1024, 3, 3)
    assert model.init_conv.weight.shape == (512, 512, 3, 3)
    assert len(model.feature_blocks) == 0
    assert model.optimizer.label_weights.shape == (100,)
    assert torch.exp(model.optimizer.log_step_length).item() == pytest.approx(0.9)
    assert model.optimizer.regularization().item() == pytest.approx(0.01)


def test_config_for_backbones():
    config = DiMPConfig.for_backbone(create_backbone("resnet18", pretrained=False))
    assert (config.in_channels, config.num_blocks, config.feature_dim) == (256, 1, 256)
    assert config.feature_layer == "layer3" and config.stride == 16
    config = DiMPConfig.for_backbone(create_backbone("mobilenetv2", pretrained=False))
    assert config.stride == 16 and config.feature_dim == 128 and config.num_blocks == 1


@pytest.mark.parametrize(
    ("field", "value"), [("feature_dim", 0), ("num_iter", -1), ("num_dist_bins", 1)]
)
def test_bad_config_raises(field, value):
    with pytest.raises(ValueError, match=field):
        DiMPConfig(**{field: value})


def test_bad_shapes_raise():
    model = _model()
    with pytest.raises(ValueError, match="feat"):
        model.extract_features(torch.zeros(1, 5, 4, 4))
    with pytest.raises(ValueError, match="boxes"):
        model.initialize_filter(torch.zeros(2, 1, 8, 5, 5), torch.zeros(2, 4))


def test_save_load_round_trip(tmp_path):
    model = _model(seed=7).eval()
    path = save_model(model, tmp_path / "dimp.safetensors")
    name, config = read_model_config(path)
    assert name == "DiMPClassifier" and config == TINY
    loaded = load_model(path, expected="DiMPClassifier")
    for key, value in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[key], value)
    gen = _gen(8)
    train = torch.randn(2, 1, 6, 7, 7, generator=gen)
    test = torch.randn(1, 1, 6, 7, 7, generator=gen)
    boxes = torch.tensor([[[30.0, 30.0, 40.0, 40.0]], [[40.0, 36.0, 40.0, 40.0]]])
    with torch.no_grad():
        for a, b in zip(model(train, test, boxes), loaded(train, test, boxes)):
            torch.testing.assert_close(a, b)


def test_unrolled_optimizer_gradients_match_finite_differences():
    filters, feats, boxes = (t.double() for t in _problem(seed=9, channels=3, size=6))
    optimizer = SteepestDescentGN(num_dist_bins=12, bin_displacement=0.5).double()
    names = ["log_step_length", "filter_reg", "label_weights", "mask_weights", "spatial_weights"]
    params = tuple(getattr(optimizer, n).detach().clone().requires_grad_(True) for n in names)

    def final_loss(*values):
        state = dict(zip(names, values))
        iterates, _ = torch.func.functional_call(optimizer, state, (filters, feats, boxes, 3))
        return (apply_filter(feats, iterates[-1]) ** 2).sum()

    assert torch.autograd.gradcheck(final_loss, params, eps=1e-6, atol=1e-5)
