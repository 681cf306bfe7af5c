"""Precise RoI Pooling (PrRoIPool, Jiang et al. ECCV 2018) in pure PyTorch.

The feature map is read as a continuous field by bilinear interpolation: the value F[i, j] sits at
the continuous point (y=i, x=j), with no half-pixel offset, and

    f(y, x) = sum_ij F[i, j] * k(y - i) * k(x - j),    k(t) = max(0, 1 - |t|),

with F = 0 outside the map, so f fades linearly to zero within one cell of the border. A bin's
output is the exact integral of f over the bin divided by the bin's area. Because k is separable,
the integral over [xs, xe] x [ys, ye] factorises into per-axis weight vectors

    w_x[j] = K(xe - j) - K(xs - j),    K(t) = integral of k from -inf to t (the hat's CDF),

and the bin is w_y^T F w_x. The whole op is therefore two batched matrix products, and plain
autograd through this closed form gives the exact gradients with respect to the features and
to the four box coordinates.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["PrRoIPool2D", "hat_cdf", "prroi_pool"]


def _pair(output_size: int | tuple[int, int]) -> tuple[int, int]:
    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    if len(size) != 2 or not all(isinstance(s, int) and not isinstance(s, bool) for s in size):
        raise ValueError(f"output_size must be an int or a pair of ints, got {output_size!r}")
    if min(size) < 1:
        raise ValueError(f"output_size must be positive, got {output_size!r}")
    return size


def hat_cdf(t: Tensor) -> Tensor:
    """Cumulative integral of the bilinear hat k(t) = max(0, 1 - |t|), elementwise.

    0 for t <= -1, (t + 1)^2 / 2 on [-1, 0], 1 - (1 - t)^2 / 2 on [0, 1] and 1 for t >= 1; on
    [-1, 1] both pieces equal 1/2 + t - t |t| / 2. Continuously differentiable, derivative k(t).
    """
    t = t.clamp(-1.0, 1.0)
    return torch.addcmul(t + 0.5, t, t.abs(), value=-0.5)


def _bin_weights(
    corners: Tensor, bins: tuple[int, int], first_cells: tuple[int, int], num_cells: tuple[int, int]
) -> tuple[Tensor, Tensor]:
    """Area-normalised integration weights of the bins along x and along y.

    Both axes go through one batch of tensor ops (padded to the larger bin and cell counts, then
    cropped), which halves the number of small ops.

    Args:
        corners: (K, 4) RoIs (x1, y1, x2, y2) in feature-map coordinates.
        bins: (PW, PH).
        first_cells, num_cells: along (x, y), the weights cover the cells
            ``first_cells[a] + arange(num_cells[a])``.

    Returns:
        (K, PW, Wc) and (K, PH, Hc) weights: ``w[k, q, j]`` is the integral of the hat
        k(x - first_cell - j) over bin q of RoI k divided by the bin's width; all zeros for bins
        of zero width (``x2 <= x1``).
    """
    like = {"device": corners.device, "dtype": corners.dtype}
    starts, ends = corners[:, :2], corners[:, 2:]  # (K, 2): axes x, y
    bin_size = (ends - starts).clamp(min=0) / torch.tensor(bins, **like)
    steps = torch.arange(max(bins) + 1, **like)
    cells = torch.tensor(first_cells, **like)[:, None] + torch.arange(max(num_cells), **like)
    # t[k, a, e, j] = (edge e along axis a of RoI k) - (cell j): the hat's argument.
    t = (starts[:, :, None] - cells)[:, :, None, :] + (bin_size[:, :, None] * steps)[..., None]
    integrals = torch.diff(hat_cdf(t), dim=2)  # (K, 2, P, L)
    # Empty bins give 0 and, as in the reference, no gradient: the mean over a bin is
    # discontinuous at zero width (the value of f there, then 0 for reversed corners).
    nonempty = bin_size > 0
    inv_size = torch.where(nonempty, bin_size, 1).reciprocal() * nonempty
    weights = integrals * inv_size[:, :, None, None]
    return (
        weights[:, 0, : bins[0], : num_cells[0]],
        weights[:, 1, : bins[1], : num_cells[1]],
    )


def _support(starts: Tensor, ends: Tensor, sizes: tuple[int, int]) -> list[tuple[int, int]]:
    """Per axis, the cells [first, last) whose hat overlaps some interval [start, max(start, end)].

    Args:
        starts, ends: (K, 2) interval bounds for the axes (x, y), in feature-map coordinates.
        sizes: the number of cells along (x, y).
    """
    first = starts.amin(0).floor()
    last = torch.maximum(starts, ends).amax(0).floor() + 2
    bounds = []
    for lo, hi, size in zip(*torch.stack([first, last]).tolist(), sizes):
        lo = min(max(int(lo), 0), size)
        bounds.append((lo, min(max(int(hi), lo), size)))
    return bounds


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
    if rois.numel() == 0:
        return
    batch = rois[:, 0]
    finite = torch.isfinite(rois).all()
    valid_batch = ((batch == batch.round()) & (batch >= 0) & (batch < features.shape[0])).all()
    if bool(finite & valid_batch):  # one host synchronisation for both checks
        return
    if not finite:
        raise ValueError("rois must be finite, got NaN or inf coordinates")
    raise ValueError(
        f"rois[:, 0] must be integer batch indices in [0, {features.shape[0] - 1}], "
        f"got values in [{batch.min().item():g}, {batch.max().item():g}]"
    )


def prroi_pool(
    features: Tensor,
    rois: Tensor,
    output_size: int | tuple[int, int],
    spatial_scale: float,
) -> Tensor:
    """Precise RoI Pooling: the mean of the bilinearly interpolated feature map over each bin.

    Args:
        features: (B, C, H, W) float32 or float64 feature map, on CPU or CUDA.
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
        gradient).

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
    num_batches, channels, height, width = features.shape
    num_rois = rois.shape[0]
    if num_rois == 0:
        # Keep the result attached to the graph so that a backward pass through it is valid.
        return (features.sum() * 0).expand(0, channels, out_h, out_w)
    rois = rois.to(features.dtype)
    batch_index = rois[:, 0].detach().long()
    corners = rois[:, 1:] * spatial_scale  # (K, 4) = x1, y1, x2, y2 on the map

    # Only the cells under some RoI contribute: restrict the map to their bounding window.
    detached = corners.detach()
    (col0, col1), (row0, row1) = _support(detached[:, :2], detached[:, 2:], (width, height))
    features = features[:, :, row0:row1, col0:col1]
    height, width = row1 - row0, col1 - col0
    weights_x, weights_y = _bin_weights(corners, (out_w, out_h), (col0, row0), (width, height))

    # Lay the RoIs out as (G, S, ...): group g holds the RoIs of one image in S slots, so that
    # each image's RoIs share one matrix product with that image's features.
    per_image = num_rois // num_batches
    if num_batches == 1 or (
        num_rois % num_batches == 0
        and torch.equal(
            batch_index, torch.arange(num_batches, device=rois.device).repeat_interleave(per_image)
        )
    ):
        # The common layout (tracking: one image; training: sorted, same count per image).
        num_groups, num_slots = num_batches, per_image
        grouped_x = weights_x.reshape(num_groups, num_slots, out_w, width)
        grouped_y = weights_y.reshape(num_groups, num_slots, out_h, height)
        group = slot = None
    else:
        images, group = torch.unique(batch_index, return_inverse=True)
        num_groups = images.numel()
        one_hot = torch.nn.functional.one_hot(group, num_groups)
        slot = (one_hot.cumsum(0) * one_hot).sum(1) - 1  # rank of each RoI within its image
        num_slots = int(slot.max().item()) + 1
        grouped_x = weights_x.new_zeros(num_groups, num_slots, out_w, width)
        grouped_y = weights_y.new_zeros(num_groups, num_slots, out_h, height)
        grouped_x = grouped_x.index_put((group, slot), weights_x)
        grouped_y = grouped_y.index_put((group, slot), weights_y)
        features = features[images]

    # Integrate along x, all RoIs of an image at once: (G, S*PW, W) @ (G, W, C*H) -> (G, S*PW, C*H).
    columns = features.reshape(num_groups, channels * height, width).transpose(1, 2)
    along_x = torch.matmul(grouped_x.reshape(num_groups, num_slots * out_w, width), columns)
    # Integrate along y per RoI: (G*S, PH, H) @ (G*S, H, PW*C) -> (G*S, PH, PW*C).
    along_x = along_x.reshape(num_groups * num_slots, out_w * channels, height).transpose(1, 2)
    pooled = torch.matmul(grouped_y.reshape(-1, out_h, height), along_x)
    pooled = pooled.reshape(num_groups, num_slots, out_h, out_w, channels)
    if group is None:
        pooled = pooled.reshape(num_rois, out_h, out_w, channels)
    else:
        pooled = pooled[group, slot]
    return pooled.permute(0, 3, 1, 2).contiguous()


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
