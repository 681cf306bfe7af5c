"""Precise RoI Pooling (PrRoIPool, Jiang et al. ECCV 2018) in pure PyTorch.

The feature map is read as a continuous field by bilinear interpolation: the value F[i, j] sits at
the continuous point (y=i, x=j), with no half-pixel offset, and

    f(y, x) = sum_ij F[i, j] * k(y - i) * k(x - j),    k(t) = max(0, 1 - |t|),

with F = 0 outside the map, so f fades linearly to zero within one cell of the border. A bin's
output is the exact integral of f over the bin divided by the bin's area. Because k is separable,
the integral over [xs, xe] x [ys, ye] factorises into per-axis weight vectors

    w_x[j] = K(xe - j) - K(xs - j),    K(t) = integral of k from -inf to t (the hat's CDF),

and the bin is w_y^T F w_x. The whole op is therefore two batched matrix products over the
window of the map under the RoIs, or, for small windows, one product with each RoI's dense
kernel w_y w_x^T (:func:`_pool`). Its backward is written out (:class:`_PrRoIPoolFunction`): the
same products transposed for the weights and the features, then the chain rule through the
weights with K' = k, the hat itself. It gives the same gradients as autograd through the closed
form (``torch.autograd.gradcheck`` in the tests, on both paths) with 6 autograd nodes instead of
about 50 and products laid out for MKL: per-op overhead, not arithmetic, dominates the cost of
the tracker's small workload.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ebmtrack.ops.hat import hat, hat_cdf

__all__ = ["PrRoIPool2D", "prroi_pool"]


def _pair(output_size: int | tuple[int, int]) -> tuple[int, int]:
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    if len(size) != 2 or not all(isinstance(s, int) and not isinstance(s, bool) for s in size):
        raise ValueError(f"output_size must be an int or a pair of ints, got {output_size!r}")
    if min(size) < 1:
        raise ValueError(f"output_size must be positive, got {output_size!r}")
    return size


class _BinGeometry(NamedTuple):
    """The integration weights of all bins along x and y, padded to a common shape.

    Axis a = 0 is x, a = 1 is y; P and L are the larger of the two bin and cell counts.

    Attributes:
        fraction: (2, P + 1) ``e / P_a``: where edge e of the bins sits between the RoI's start
            (0) and end (1) along axis a.
        t: (K, 2, P + 1, L) the hat's arguments ``edge e of the bins - cell j``.
        inv_size: (K, 2) 1 / bin size, 0 for empty bins (``x2 <= x1``).
        weights: (K, 2, P, L) ``(K(t[e + 1]) - K(t[e])) * inv_size``: the integral of the hat
            of cell j over bin e divided by the bin's size; all zeros for empty bins.
    """

    fraction: Tensor
    t: Tensor
    inv_size: Tensor
    weights: Tensor


def _bin_geometry(
    corners: Tensor, bins: tuple[int, int], first_cells: tuple[int, int], num_cells: tuple[int, int]
) -> _BinGeometry:
    """Integration weights of the bins of K RoIs along x and y, in one batch of tensor ops.

    Args:
        corners: (K, 4) RoIs (x1, y1, x2, y2) in feature-map coordinates.
        bins: (PW, PH).
        first_cells, num_cells: along (x, y), the weights cover the cells
            ``first_cells[a] + arange(num_cells[a])``.
    """
    like = {"device": corners.device, "dtype": corners.dtype}
    edges = torch.arange(max(bins) + 1, **like)
    fraction = edges / torch.tensor([[bins[0]], [bins[1]]], **like)
    cells = torch.tensor(
        [[first + j for j in range(max(num_cells))] for first in first_cells], **like
    )
    size = (corners[:, 2:] - corners[:, :2]).clamp(min=0)  # (K, 2)
    t = (corners[:, :2, None] - cells)[:, :, None, :] + (size[:, :, None] * fraction)[..., None]
    # Empty bins give 0 and, as in the reference, no gradient: the mean over a bin is
    # discontinuous at zero width (the value of f there, then 0 for reversed corners).
    bin_size = size * fraction[:, 1]
    inv_size = torch.where(bin_size > 0, bin_size.reciprocal(), 0)
    weights = torch.diff(hat_cdf(t), dim=2) * inv_size[:, :, None, None]
    return _BinGeometry(fraction, t, inv_size, weights)


def _corner_gradient(geometry: _BinGeometry, grad_weights: Tensor) -> Tensor:
    """(K, 2, P, L) gradient of the loss in the weights -> (K, 4) gradient in (x1, y1, x2, y2).

    Per axis, with start s, end e, P bins of size b = (e - s) / P and t[q] = s + q b - cell:
    d t[q] / ds = 1 - q / P, d t[q] / de = q / P, K' = k and d(1 / b) / ds = -d(1 / b) / de =
    1 / (P b^2). With A = dL/dW / b, the chain rule collects, for every edge q,
    Z[q] = sum_j k(t[q, j]) (A[q - 1, j] - A[q, j]) (A = 0 outside 0 .. P - 1), and
    dL/ds = sum_q Z[q] (1 - q / P) + E,  dL/de = sum_q Z[q] q / P - E,  E = sum A W / P.
    Empty bins have A = 0, hence zero gradient.
    """
    fraction, t, inv_size, weights = geometry
    scaled = grad_weights * inv_size[:, :, None, None]  # A
    padded = F.pad(scaled, (0, 0, 1, 1))
    edges = (hat(t) * (padded[:, :, :-1] - padded[:, :, 1:])).sum(-1)  # Z, (K, 2, P + 1)
    area = (scaled * weights).sum((-2, -1)) * fraction[:, 1]  # E, (K, 2)
    at_end = (edges * fraction).sum(-1)
    return torch.cat([edges.sum(-1) - at_end + area, at_end - area], dim=1)


class _Layout(NamedTuple):
    """How the K RoIs sit in (G, S) groups: group g holds the RoIs of one image in S slots.

    ``group`` and ``slot`` are (K,) indices, or None when the RoIs already come sorted by image
    with the same count per image (tracking: one image; training: ATOM's sampler), so that the
    layout is a reshape.
    """

    num_groups: int
    num_slots: int
    group: Tensor | None
    slot: Tensor | None


def _to_groups(values: Tensor, layout: _Layout) -> Tensor:
    """(K, ...) -> (G, S, ...), zeros in the slots no RoI fills."""
    shape = (layout.num_groups, layout.num_slots, *values.shape[1:])
    if layout.group is None:
        return values.reshape(shape)
    return values.new_zeros(shape).index_put_((layout.group, layout.slot), values)


def _from_groups(values: Tensor, layout: _Layout) -> Tensor:
    """(G, S, ...) -> (K, ...)."""
    if layout.group is None:
        return values.flatten(0, 1)
    return values[layout.group, layout.slot]


# Windows of at most this many cells are pooled through the dense per-RoI kernel (below).
DENSE_MAX_CELLS = 256


def _per_bin_row(weights_x: Tensor, out_h: int) -> Tensor:
    """(G, S, PW, W) weights along x -> (G*S*PH, PW, W), repeated for each of the PH bin rows."""
    num_groups, num_slots, out_w, width = weights_x.shape
    repeated = weights_x[:, :, None].expand(num_groups, num_slots, out_h, out_w, width)
    return repeated.reshape(-1, out_w, width)


def _pool(
    window: Tensor,
    corners: Tensor,
    bins: tuple[int, int],
    first_cells: tuple[int, int],
    layout: _Layout,
) -> tuple[Tensor, tuple[Tensor, ...], _BinGeometry]:
    """The forward pass, without autograd: (G, C, H, W) window of the map (its top-left cell
    at ``first_cells`` = (x, y)), (K, 4) corners on the map, ``bins`` = (PW, PH).

    Returns:
        (K, C, PH, PW) pooled, the tensors the backward pass needs (see there) and the bins'
        geometry.

    Two ways to the same numbers. Large windows (training): separably, along y for all RoIs of
    an image at once on the window laid out channels-last, (G, S*PH, H) @ (G, H, W*C), then
    along x per RoI and bin row, (G*S*PH, PW, W) @ (G*S*PH, W, C), where the first product's
    output already has the second's layout: no copy of the large intermediate either way, which
    is what the pooling of many RoIs (an EBM loss's samples) spends its time on otherwise.
    Small windows (tracking, at most ``DENSE_MAX_CELLS`` cells): each RoI's bins as one dense
    (PH*PW, H*W) kernel, the outer product of its two weight vectors, and a single product
    (G, S*PH*PW, H*W) @ (G, H*W, C): more multiply-adds, but one well-shaped product instead of
    several tiny ones with transposed operands, which cost far more here than their arithmetic.
    """
    num_groups, channels, height, width = window.shape
    out_w, out_h = bins
    geometry = _bin_geometry(corners, bins, first_cells, (width, height))
    weights_x = _to_groups(geometry.weights[:, 0, :out_w, :width], layout)  # (G, S, PW, W)
    weights_y = _to_groups(geometry.weights[:, 1, :out_h, :height], layout)  # (G, S, PH, H)
    if height * width <= DENSE_MAX_CELLS:
        kernel = weights_y[:, :, :, None, :, None] * weights_x[:, :, None, :, None, :]
        kernel = kernel.reshape(num_groups, -1, height * width)  # (G, S*PH*PW, H*W)
        flat = window.reshape(num_groups, channels, height * width)
        pooled = torch.matmul(kernel, flat.transpose(1, 2))  # (G, S*PH*PW, C)
        pooled = _from_groups(pooled.view(num_groups, -1, out_h, out_w, channels), layout)
        saved = (kernel, flat, weights_x, weights_y)
    else:
        lines = window.permute(0, 2, 3, 1).reshape(num_groups, height, width * channels)
        along_y = torch.matmul(weights_y.reshape(num_groups, -1, height), lines)  # (G, S*PH, W*C)
        along_y = along_y.view(-1, width, channels)  # (G*S*PH, W, C)
        pooled = torch.bmm(_per_bin_row(weights_x, out_h), along_y)  # (G*S*PH, PW, C)
        pooled = _from_groups(pooled.view(num_groups, -1, out_h, out_w, channels), layout)
        saved = (lines, along_y)
    return pooled.permute(0, 3, 1, 2).contiguous(), saved, geometry


class _PrRoIPoolFunction(torch.autograd.Function):
    """:func:`_pool` with its backward pass written out.

    The written-out backward is not itself differentiable. When a second derivative is asked for
    (``create_graph=True``, e.g. score matching through a box head), the backward recomputes the
    forward with autograd instead, so derivatives of any order stay exact.
    """

    @staticmethod
    def forward(ctx, window, corners, bins, first_cells, layout):
        pooled, saved, geometry = _pool(window, corners, bins, first_cells, layout)
        if len(saved) == 2 and not ctx.needs_input_grad[1]:
            saved = (None, None)  # the separable path's products serve the corners' gradient only
        ctx.save_for_backward(window, corners, *geometry, *saved)
        ctx.bins, ctx.first_cells, ctx.layout = bins, first_cells, layout
        ctx.window_shape = window.shape
        return pooled

    @staticmethod
    def backward(ctx, grad):
        window, corners, *rest = ctx.saved_tensors
        if torch.is_grad_enabled():
            return (*_recomputed_backward(ctx, window, corners, grad), None, None, None)
        geometry, saved = _BinGeometry(*rest[:4]), rest[4:]
        bins, layout = ctx.bins, ctx.layout
        need_window, need_corners = ctx.needs_input_grad[:2]
        num_groups, channels, height, width = ctx.window_shape
        out_w, out_h = bins
        grad = _to_groups(grad.permute(0, 2, 3, 1), layout)  # (G, S, PH, PW, C)
        if len(saved) == 4:
            grad_window, grad_x, grad_y = _dense_backward(grad, saved, need_window, need_corners)
        else:
            grad_window, grad_x, grad_y = _separable_backward(
                grad, saved, geometry, ctx, need_window, need_corners
            )
        if grad_window is not None:
            grad_window = grad_window.view(num_groups, channels, height, width)
        grad_corners = None
        if need_corners:
            grad_weights = torch.zeros_like(geometry.weights)
            grad_weights[:, 0, :out_w, :width] = _from_groups(grad_x, layout)
            grad_weights[:, 1, :out_h, :height] = _from_groups(grad_y, layout)
            grad_corners = _corner_gradient(geometry, grad_weights)
        return grad_window, grad_corners, None, None, None


def _dense_backward(grad, saved, need_window, need_corners):
    """Backward of the dense path: ``grad`` (G, S, PH, PW, C) -> the window's gradient (G, C,
    H*W) and those of the weights along x (G, S, PW, W) and y (G, S, PH, H), or None."""
    kernel, flat, weights_x, weights_y = saved
    num_groups, _, out_h, out_w, channels = grad.shape
    grad = grad.reshape(num_groups, -1, channels)  # (G, S*PH*PW, C)
    grad_window = grad_x = grad_y = None
    if need_window:
        grad_window = torch.matmul(grad.transpose(1, 2), kernel)  # (G, C, H*W)
    if need_corners:
        width, height = weights_x.shape[-1], weights_y.shape[-1]
        grad_kernel = torch.matmul(grad, flat)  # (G, S*PH*PW, H*W)
        grad_kernel = grad_kernel.view(num_groups, -1, out_h, out_w, height, width)
        grad_x = torch.einsum("gspqhw,gsph->gsqw", grad_kernel, weights_y)
        grad_y = torch.einsum("gspqhw,gsqw->gsph", grad_kernel, weights_x)
    return grad_window, grad_x, grad_y


def _separable_backward(grad, saved, geometry, ctx, need_window, need_corners):
    """Backward of the separable path, the same outputs as :func:`_dense_backward`."""
    lines, along_y = saved
    num_groups, channels, height, width = ctx.window_shape
    out_w, out_h = ctx.bins
    weights = geometry.weights
    grad = grad.reshape(-1, out_w, channels)  # (G*S*PH, PW, C)
    weights_x = _to_groups(weights[:, 0, :out_w, :width], ctx.layout)  # (G, S, PW, W)
    weights_y = _to_groups(weights[:, 1, :out_h, :height], ctx.layout)
    weights_y = weights_y.reshape(num_groups, -1, height)  # (G, S*PH, H)
    # Back through the x products to along_y, laid out as (G, S*PH, W*C) again.
    grad_along_y = torch.bmm(_per_bin_row(weights_x, out_h).transpose(1, 2), grad)
    grad_along_y = grad_along_y.view(num_groups, -1, width * channels)
    grad_window = grad_x = grad_y = None
    if need_window:
        grad_lines = torch.matmul(weights_y.transpose(1, 2), grad_along_y)  # (G, H, W*C)
        grad_window = grad_lines.view(num_groups, height, width, channels).permute(0, 3, 1, 2)
        grad_window = grad_window.contiguous()
    if need_corners:
        grad_x = torch.bmm(grad, along_y.transpose(1, 2))  # (G*S*PH, PW, W)
        grad_x = grad_x.view(num_groups, -1, out_h, out_w, width).sum(2)
        grad_y = torch.matmul(grad_along_y, lines.transpose(1, 2))  # (G, S*PH, H)
        grad_y = grad_y.view(num_groups, -1, out_h, height)
    return grad_window, grad_x, grad_y


def _recomputed_backward(
    ctx, window: Tensor, corners: Tensor, grad: Tensor
) -> tuple[Tensor | None, Tensor | None]:
    """The gradients of :func:`_pool` by autograd through its forward, with ``create_graph``."""
    with torch.enable_grad():
        pooled = _pool(window, corners, ctx.bins, ctx.first_cells, ctx.layout)[0]
    wanted = [t for t, need in zip((window, corners), ctx.needs_input_grad[:2]) if need]
    grads = iter(torch.autograd.grad(pooled, wanted, grad, create_graph=True, allow_unused=True))
    return tuple(next(grads) if need else None for need in ctx.needs_input_grad[:2])


def _check_scale(spatial_scale: float) -> None:
    if not 0 < spatial_scale < float("inf"):
        raise ValueError(f"spatial_scale must be a positive finite number, got {spatial_scale!r}")


def _check_inputs(features: Tensor, rois: Tensor, spatial_scale: float) -> None:
    if features.dim() != 4:
        raise ValueError(f"features must have shape (B, C, H, W), got {tuple(features.shape)}")
    if not features.is_floating_point():
        raise ValueError(f"features must be a floating-point tensor, got {features.dtype}")
    if rois.dim() != 2 or rois.shape[1] != 5:
        raise ValueError(
            f"rois must have shape (K, 5) = (b, x1, y1, x2, y2), got {tuple(rois.shape)}"
        )
    if rois.device != features.device:
        raise ValueError(f"rois are on {rois.device} but features on {features.device}")
    _check_scale(spatial_scale)


def _check_values_and_window(
    rois: Tensor, corners: Tensor, num_batches: int, sizes: tuple[int, int]
) -> list[tuple[int, int]]:
    """Validate the RoI values and return, along (x, y), the cells [first, last) under them.

    A cell matters if its hat overlaps some RoI, i.e. if it lies within one cell of
    [x1, max(x1, x2)] (resp. y). One host synchronisation for the checks and the window.
    """
    # The checks run in numpy on a host copy: a few small arrays, where a dozen tensor ops cost
    # more than the pooling's own arithmetic in the tracking workload.
    if rois.device.type == "cpu":
        values, corner_values = rois.detach().numpy(), corners.detach().numpy()
    else:
        both = torch.cat([rois.detach(), corners.detach()], dim=1).cpu().numpy()
        values, corner_values = both[:, :5], both[:, 5:]
    if not np.isfinite(values).all():
        raise ValueError("rois must be finite, got NaN or inf coordinates")
    batch = values[:, 0]
    lowest, highest = float(batch.min()), float(batch.max())
    if not ((batch == np.round(batch)).all() and lowest >= 0 and highest < num_batches):
        raise ValueError(
            f"rois[:, 0] must be integer batch indices in [0, {num_batches - 1}], "
            f"got values in [{lowest:g}, {highest:g}]"
        )
    low = corner_values[:, :2].min(0)  # the lowest x1, y1
    high = corner_values.reshape(-1, 2, 2).max((0, 1))  # the highest x1 or x2, y1 or y2
    bounds = []
    for lo, hi, size in zip(low.tolist(), high.tolist(), sizes):
        lo = min(max(math.floor(lo), 0), size)
        bounds.append((lo, min(max(math.floor(hi) + 2, lo), size)))
    return bounds


def _layout(batch_index: Tensor, num_batches: int) -> tuple[_Layout, Tensor | None]:
    """The (G, S) grouping of the RoIs and the images it uses (None: all, in order)."""
    num_rois = batch_index.numel()
    per_image = num_rois // num_batches
    if num_batches == 1 or (
        num_rois % num_batches == 0
        and torch.equal(
            batch_index,
            torch.arange(num_batches, device=batch_index.device).repeat_interleave(per_image),
        )
    ):
        return _Layout(num_batches, per_image, None, None), None
    images, group = torch.unique(batch_index, return_inverse=True)
    one_hot = F.one_hot(group, images.numel())
    slot = (one_hot.cumsum(0) * one_hot).sum(1) - 1  # rank of each RoI within its image
    return _Layout(images.numel(), int(slot.max().item()) + 1, group, slot), images


def prroi_pool(
    features: Tensor,
    rois: Tensor,
    output_size: int | tuple[int, int],
    spatial_scale: float,
) -> Tensor:
    """Precise RoI Pooling: the mean of the bilinearly interpolated feature map over each bin.

    Args:
        features: (B, C, H, W) float32 or float64 feature map, on CPU or CUDA; float16 and
            bfloat16 maps (autocast) are pooled in float32, the boxes too, and the result is
            returned in the map's dtype.
        rois: (K, 5) rows (batch index, x1, y1, x2, y2) in image coordinates; K may be 0. The
            RoI covers [x1 * s, x2 * s] x [y1 * s, y2 * s] on the feature map (s =
            ``spatial_scale``, no rounding, no half-pixel offset): at s = 1, (0, 0, 0, 4, 4) is
            the 4 x 4 region [0, 4] x [0, 4], over which rows and columns 1..3 of the map have
            full weight and 0 and 4 half weight. Cast to the dtype of ``features``.
        output_size: PH = PW = int, or (PH, PW).
        spatial_scale: feature-map cells per image pixel, e.g. 1/16.

    Returns:
        (K, C, PH, PW): bin (p, q) of RoI k is the exact integral of the interpolated field over
        [x1 + q * bw, x1 + (q + 1) * bw] x [y1 + p * bh, y1 + (p + 1) * bh] (coordinates times s,
        bw = (x2 - x1) / PW, bh = (y2 - y1) / PH) divided by bw * bh. Differentiable with respect
        to ``features`` and the four coordinates of ``rois`` (the batch index gets zero
        gradient): first derivatives by a written-out backward, higher ones (``create_graph``)
        by autograd through the forward.

    Edge cases (the reference implementation's behaviour):
        - The field is zero outside the map, so a box partly outside averages in zeros and a box
          wholly outside (more than one cell beyond the border) gives 0.
        - A zero-width or zero-height box, or reversed corners (x2 < x1 or y2 < y1), has empty
          bins: the output is 0 and so are all its gradients.

    Raises:
        ValueError: on wrong shapes, NaN or inf coordinates, batch indices that are not
            integers in [0, B), a non-positive ``spatial_scale`` or a bad ``output_size``.
    """
    out_h, out_w = _pair(output_size)
    _check_inputs(features, rois, spatial_scale)
    if features.dtype in (torch.float16, torch.bfloat16):  # e.g. under autocast
        with torch.autocast(features.device.type, enabled=False):
            pooled = prroi_pool(features.float(), rois.float(), output_size, spatial_scale)
        return pooled.to(features.dtype)
    num_batches, channels, height, width = features.shape
    if rois.shape[0] == 0:
        # Keep the result attached to the graph so that a backward pass through it is valid.
        return (features.sum() * 0).expand(0, channels, out_h, out_w)
    rois = rois.to(features.dtype)
    corners = rois[:, 1:] * spatial_scale  # (K, 4) = x1, y1, x2, y2 on the map
    (col0, col1), (row0, row1) = _check_values_and_window(
        rois, corners, num_batches, (width, height)
    )
    # Only the cells under some RoI contribute: restrict the map to their bounding window.
    window = features[:, :, row0:row1, col0:col1]
    layout, images = _layout(rois[:, 0].detach().long(), num_batches)
    if images is not None:
        window = window[images]
    args = (window, corners, (out_w, out_h), (col0, row0), layout)
    if torch.is_grad_enabled() and (window.requires_grad or corners.requires_grad):
        return _PrRoIPoolFunction.apply(*args)
    return _pool(*args)[0]


class PrRoIPool2D(nn.Module):
    """Module wrapper of :func:`prroi_pool` with fixed ``output_size`` and ``spatial_scale``."""

    def __init__(self, output_size: int | tuple[int, int], spatial_scale: float) -> None:
        super().__init__()
        self.output_size = _pair(output_size)
        _check_scale(spatial_scale)
        self.spatial_scale = float(spatial_scale)

    def forward(self, features: Tensor, rois: Tensor) -> Tensor:
        """(B, C, H, W) features, (K, 5) rois -> (K, C, PH, PW); see :func:`prroi_pool`."""
        return prroi_pool(features, rois, self.output_size, self.spatial_scale)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}, spatial_scale={self.spatial_scale}"
