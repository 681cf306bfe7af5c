import importlib

import pytest
import torch

from ebmtrack.ops import PrRoIPool2D, prroi_pool

# The module (its name is shadowed by the function in ebmtrack.ops).
MODULE = importlib.import_module("ebmtrack.ops.prroi_pool")


@pytest.fixture(autouse=True, params=["dense", "separable"])
def pooling_path(request, monkeypatch):
    """Every test runs through both ways of pooling: the dense per-RoI kernel (small windows)
    and the separable products (large windows)."""
    limit = 10**9 if request.param == "dense" else 0
    monkeypatch.setattr(MODULE, "DENSE_MAX_CELLS", limit)
    return request.param


def field(features: torch.Tensor, ys: torch.Tensor, xs: torch.Tensor) -> torch.Tensor:
    """Bilinearly interpolated (C, H, W) map at the grid ys x xs, zero outside: (C, Y, X)."""
    height, width = features.shape[-2:]
    rows = torch.arange(height, dtype=features.dtype)
    cols = torch.arange(width, dtype=features.dtype)
    ky = (1 - (ys[:, None] - rows).abs()).clamp(min=0)
    kx = (1 - (xs[:, None] - cols).abs()).clamp(min=0)
    return torch.einsum("yi,cij,xj->cyx", ky, features, kx)


def brute_force(features, roi, out_h, out_w, scale, samples=1000):
    """Midpoint-rule average of the interpolated field over each bin."""
    batch = int(roi[0])
    x1, y1, x2, y2 = (float(v) * scale for v in roi[1:])
    bin_w, bin_h = max(x2 - x1, 0) / out_w, max(y2 - y1, 0) / out_h
    out = torch.zeros(features.shape[1], out_h, out_w, dtype=features.dtype)
    if bin_w * bin_h == 0:
        return out
    offsets = (torch.arange(samples, dtype=features.dtype) + 0.5) / samples
    for p in range(out_h):
        for q in range(out_w):
            ys = y1 + (p + offsets) * bin_h
            xs = x1 + (q + offsets) * bin_w
            out[:, p, q] = field(features[batch], ys, xs).mean(dim=(1, 2))
    return out


@pytest.fixture
def features():
    generator = torch.Generator().manual_seed(0)
    return torch.randn(2, 3, 7, 9, generator=generator, dtype=torch.float64)


ROIS = torch.tensor(
    [
        [0, 2.6, 1.4, 10.4, 9.8],  # inside
        [1, -4.2, -3.1, 6.3, 5.3],  # crosses the top-left border
        [0, 13.1, 6.2, 22.5, 17.9],  # crosses the bottom-right border
        [1, 5.0, 5.5, 5.9, 13.7],  # thin
    ],
    dtype=torch.float64,
)


def test_matches_brute_force_integration(features):
    out = prroi_pool(features, ROIS, (2, 3), spatial_scale=0.5)
    assert out.shape == (4, 3, 2, 3)
    for roi, pooled in zip(ROIS, out):
        expected = brute_force(features, roi, 2, 3, 0.5)
        rel_err = (pooled - expected).abs().max() / expected.abs().max()
        assert rel_err <= 1e-4


def test_reproduces_constant_and_linear_maps_inside():
    # Bilinear interpolation reproduces affine functions, so away from the border a bin's
    # mean of F[i, j] = 1 is 1 and of F[i, j] = j is the bin's centre x.
    height, width = 10, 12
    cols = torch.arange(width, dtype=torch.float64).expand(height, width)
    maps = torch.stack([torch.ones(height, width, dtype=torch.float64), cols])[None]
    roi = torch.tensor([[0, 1.3, 2.2, 9.7, 7.1]], dtype=torch.float64)
    out = prroi_pool(maps, roi, (3, 4), spatial_scale=1.0)
    torch.testing.assert_close(out[0, 0], torch.ones(3, 4, dtype=torch.float64))
    bin_w = (9.7 - 1.3) / 4
    centres = 1.3 + (torch.arange(4, dtype=torch.float64) + 0.5) * bin_w
    torch.testing.assert_close(out[0, 1], centres.expand(3, 4))


def test_coordinate_convention():
    # F[i, j] sits at the point (i, j): over [0, 4] x [0, 4] the corner cell's hat integrates to
    # 1/2 x 1/2 and an interior cell's to 1 x 1; the mean divides by the area 16.
    maps = torch.zeros(1, 3, 6, 6, dtype=torch.float64)
    maps[0, 0, 0, 0] = maps[0, 1, 2, 3] = maps[0, 2, 5, 5] = 1
    out = prroi_pool(maps, torch.tensor([[0, 0, 0, 4, 4]], dtype=torch.float64), 1, 1.0)
    torch.testing.assert_close(
        out.flatten(), torch.tensor([1 / 64, 1 / 16, 0], dtype=torch.float64)
    )


def test_spatial_scale_equals_scaled_coordinates(features):
    scaled = ROIS.clone()
    scaled[:, 1:] *= 0.25
    torch.testing.assert_close(
        prroi_pool(features, ROIS, 3, 0.25), prroi_pool(features, scaled, 3, 1.0)
    )


def test_gradcheck_features_and_coordinates(features):
    features = features.clone().requires_grad_(True)
    batch = ROIS[:, :1]
    coords = ROIS[:, 1:].clone().requires_grad_(True)

    def pool(feats, xyxy):
        return prroi_pool(feats, torch.cat([batch, xyxy], dim=1), (2, 3), 0.5)

    # Fast mode (random projections) for both inputs, full Jacobian for the coordinates.
    assert torch.autograd.gradcheck(pool, (features, coords), fast_mode=True)
    assert torch.autograd.gradcheck(lambda xyxy: pool(features.detach(), xyxy), (coords,))


def test_gradcheck_features_alone(features):
    # Training with drawn boxes: no gradient in the boxes, so the backward skips their products.
    features = features.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda feats: prroi_pool(feats, ROIS, (3, 2), 0.5), (features,))


@pytest.mark.parametrize("batch", [[0, 0, 0, 0], [0, 0, 1, 1]])
def test_gradcheck_sorted_layouts(features, batch):
    # One image, and images in order with the same RoI count: the layouts without padding.
    rois = torch.cat([torch.tensor(batch, dtype=torch.float64)[:, None], ROIS[:, 1:]], dim=1)
    features = features.clone().requires_grad_(True)
    coords = rois[:, 1:].clone().requires_grad_(True)

    def pool(feats, xyxy):
        return prroi_pool(feats, torch.cat([rois[:, :1], xyxy], dim=1), (3, 2), 0.5)

    assert torch.autograd.gradcheck(pool, (features, coords), fast_mode=True)
    assert torch.autograd.gradcheck(lambda xyxy: pool(features.detach(), xyxy), (coords,))


def test_without_autograd_equals_with_autograd(features):
    coords = ROIS[:, 1:].clone().requires_grad_(True)
    tracked = prroi_pool(features, torch.cat([ROIS[:, :1], coords], dim=1), 3, 0.5)
    with torch.no_grad():
        plain = prroi_pool(features, ROIS, 3, 0.5)
    assert torch.equal(tracked.detach(), plain)


@pytest.mark.slow
def test_second_derivatives_are_exact(features):
    # Score matching differentiates the box gradient again: the fast written-out backward then
    # hands over to autograd, so second derivatives (in features and coordinates) stay exact.
    features = features.clone().requires_grad_(True)
    coords = ROIS[:, 1:].clone().requires_grad_(True)

    def pool(feats, xyxy):
        return prroi_pool(feats, torch.cat([ROIS[:, :1], xyxy], dim=1), (2, 3), 0.5)

    assert torch.autograd.gradgradcheck(pool, (features, coords), fast_mode=True)
    assert torch.autograd.gradgradcheck(lambda xyxy: pool(features.detach(), xyxy), (coords,))


def test_empty_reversed_and_outside_boxes_give_zero(features):
    rois = torch.tensor(
        [
            [0, 3.0, 2.0, 3.0, 6.0],  # zero width
            [0, 6.0, 5.0, 2.0, 1.0],  # reversed corners
            [1, 20.0, 2.0, 25.0, 6.0],  # wholly outside (x > W)
        ],
        dtype=torch.float64,
        requires_grad=True,
    )
    features = features.clone().requires_grad_(True)
    out = prroi_pool(features, rois, 2, 1.0)
    assert torch.equal(out, torch.zeros_like(out))
    out.sum().backward()
    assert torch.equal(rois.grad, torch.zeros_like(rois))
    assert torch.equal(features.grad, torch.zeros_like(features))


def test_roi_order_and_grouping_do_not_matter(features):
    # Mixed batch order takes the padded, grouped path; every row must equal its own pooling.
    rois = ROIS[[1, 0, 3, 2, 0]]
    together = prroi_pool(features, rois, 3, 0.5)
    for k in range(len(rois)):
        torch.testing.assert_close(together[k], prroi_pool(features, rois[k : k + 1], 3, 0.5)[0])


def test_unused_image_is_ignored(features):
    rois = ROIS[ROIS[:, 0] == 1]
    out = prroi_pool(features, rois, 2, 0.5)
    only = prroi_pool(features[1:], torch.cat([torch.zeros(len(rois), 1), rois[:, 1:]], 1), 2, 0.5)
    torch.testing.assert_close(out, only)


def test_no_rois(features):
    features = features.clone().requires_grad_(True)
    out = prroi_pool(features, torch.zeros(0, 5, dtype=torch.float64), (2, 4), 1.0)
    assert out.shape == (0, 3, 2, 4)
    out.sum().backward()
    assert torch.equal(features.grad, torch.zeros_like(features))


def test_float32_agrees_with_float64(features):
    out64 = prroi_pool(features, ROIS, 4, 0.5)
    out32 = prroi_pool(features.float(), ROIS.float(), 4, 0.5)
    assert out32.dtype == torch.float32
    torch.testing.assert_close(out32.double(), out64, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_maps_are_pooled_in_float32(features, dtype):
    """A half-precision map (a head under autocast) is pooled as its float32 values would be,
    the boxes at full precision, and its gradient reaches the map in its own dtype."""
    half = features.to(dtype).requires_grad_()
    out = prroi_pool(half, ROIS, 4, 0.5)
    assert out.dtype == dtype
    expected = prroi_pool(half.detach().float(), ROIS.float(), 4, 0.5).to(dtype)
    torch.testing.assert_close(out, expected, atol=0, rtol=0)
    out.float().sum().backward()
    assert half.grad.dtype == dtype and half.grad.abs().sum() > 0
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the pooling's products stay float32
        again = prroi_pool(half, ROIS, 4, 0.5)
    torch.testing.assert_close(again, expected, atol=0, rtol=0)
    again.float().sum().backward()  # its backward too


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_rejects_non_finite_coordinates(features, bad):
    rois = ROIS.clone()
    rois[1, 3] = bad
    with pytest.raises(ValueError, match="finite"):
        prroi_pool(features, rois, 2, 1.0)


@pytest.mark.parametrize("index", [-1.0, 2.0, 0.5])
def test_rejects_bad_batch_index(features, index):
    rois = ROIS.clone()
    rois[0, 0] = index
    with pytest.raises(ValueError, match="batch indices"):
        prroi_pool(features, rois, 2, 1.0)


def test_rejects_bad_arguments(features):
    with pytest.raises(ValueError, match="rois"):
        prroi_pool(features, ROIS[:, 1:], 2, 1.0)
    with pytest.raises(ValueError, match="features"):
        prroi_pool(features[0], ROIS, 2, 1.0)
    with pytest.raises(ValueError, match="output_size"):
        prroi_pool(features, ROIS, (0, 2), 1.0)
    with pytest.raises(ValueError, match="spatial_scale"):
        prroi_pool(features, ROIS, 2, 0.0)


def test_module_wrapper(features):
    pool = PrRoIPool2D((2, 3), 0.5)
    torch.testing.assert_close(pool(features, ROIS), prroi_pool(features, ROIS, (2, 3), 0.5))
    assert "spatial_scale=0.5" in repr(pool)


def test_float32_on_every_device_matches_float64_on_the_cpu(features, device):
    out = prroi_pool(features.to(device).float(), ROIS.to(device).float(), 3, 0.5)
    torch.testing.assert_close(
        out.cpu().double(), prroi_pool(features, ROIS, 3, 0.5), atol=1e-5, rtol=1e-4
    )


def test_dense_and_separable_paths_agree_on_a_large_map():
    generator = torch.Generator().manual_seed(3)
    features = torch.randn(2, 4, 30, 26, generator=generator, dtype=torch.float64)
    rois = torch.tensor(
        [[0, 3.0, 2.0, 40.0, 50.0], [1, -6.0, 10.0, 20.0, 33.0], [1, 30.0, 30.0, 55.0, 48.0]],
        dtype=torch.float64,
    )
    results = []
    for limit in (10**9, 0):
        MODULE.DENSE_MAX_CELLS = limit
        feats = features.clone().requires_grad_(True)
        coords = rois[:, 1:].clone().requires_grad_(True)
        pooled = prroi_pool(feats, torch.cat([rois[:, :1], coords], dim=1), (4, 3), 0.5)
        weights = torch.randn(pooled.shape, generator=torch.Generator().manual_seed(4))
        grads = torch.autograd.grad((pooled * weights.double()).sum(), (feats, coords))
        results.append((pooled.detach(), *grads))
    for dense, separable in zip(*results, strict=True):
        torch.testing.assert_close(dense, separable, rtol=1e-12, atol=1e-12)
