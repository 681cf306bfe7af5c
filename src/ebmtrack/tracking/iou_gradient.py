"""The predicted IoU and its gradient in the box, in closed form, for the gradient ascent.

:meth:`AtomIoUNet.predict_iou_modulated` with autograd costs a few hundred tiny tensor operations
per ascent step (PrRoIPool's checks and windowing, the graph, the backward engine), which on a CPU
cost more than the arithmetic. With the features fixed for the frame, the IoU of box ``b`` is

    iou = w_out . [relu(W_l pool_l(b) + c_l) for l in (fine, coarse)] + c_out,
    pool_l(b)[c, p, q] = sum_ij wy[p, i] F_l[c, i, j] wx[q, j],

(BatchNorm folded into the linear layers, :func:`~ebmtrack.tracking.box_refine.fold_box_head`),
where ``wx[q, j] = (K(x1 + (q + 1) d - j) - K(x1 + q d - j)) / d`` are PrRoIPool's bin weights
(:func:`ebmtrack.ops.hat.hat_cdf` ``K``, bin width ``d`` = box width / bins, coordinates in
feature cells; the same along y). Its gradient is a few matrix products: back through the linear
layers to ``dL/dpool``, to ``dL/dwx`` and ``dL/dwy``, then to ``(x1, d)`` with ``K' = `` the hat
``k(t) = max(0, 1 - |t|)``. Same values and gradients as autograd through
:func:`~ebmtrack.ops.prroi_pool.prroi_pool` (tested); boxes must have positive width and height.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.ops.hat import hat, hat_cdf

__all__ = ["IoUGradient"]


class IoUGradient:
    """Closed-form predicted IoU and box gradient of a BatchNorm-folded :class:`AtomIoUNet`.

    Args:
        iou_net: a net from :func:`~ebmtrack.tracking.box_refine.fold_box_head` (each predictor
            block Flatten, Linear, Identity, ReLU).
        modulated: :meth:`AtomIoUNet.modulate` output for one frame, [(1, C, H, W)] * 2.
    """

    def __init__(self, iou_net: AtomIoUNet, modulated: list[Tensor]) -> None:
        blocks = (iou_net.predictor_fine, iou_net.predictor_coarse)
        for block in blocks:
            if not (
                len(block) == 4
                and isinstance(block[1], nn.Linear)
                and isinstance(block[2], nn.Identity)
                and isinstance(block[3], nn.ReLU)
            ):
                raise ValueError("iou_net must be BatchNorm-folded (use fold_box_head)")
        if modulated[0].shape[0] != 1:
            raise ValueError(f"modulated features must have batch 1, got {modulated[0].shape[0]}")
        out = iou_net.iou_predictor
        split = blocks[0][1].out_features
        self.out_weights = [out.weight[0, :split], out.weight[0, split:]]
        self.out_bias = out.bias[0]
        self.levels = []
        for block, feat, scale in zip(blocks, modulated, iou_net.spatial_scales):
            _, channels, height, width = feat.shape
            linear = block[1]
            pool = math.isqrt(linear.in_features // channels)  # in_features = C * P * P
            # Weight columns reordered from (c, p, q) to (p, c, q), the order pooling yields.
            weight = linear.weight.reshape(-1, channels, pool, pool).transpose(1, 2)
            self.levels.append(
                {
                    "weight": weight.reshape(linear.out_features, -1),
                    "bias": linear.bias,
                    # rows[i] = F[:, i, :] flattened: (H, C * W).
                    "rows": feat[0].transpose(0, 1).reshape(height, channels * width),
                    "pool": pool,
                    "scale": scale,
                    "shape": (channels, height, width),
                }
            )

    def __call__(self, boxes: Tensor, need_grad: bool = True) -> tuple[Tensor, Tensor | None]:
        """IoUs (N,) of ``boxes`` (N, 4) xywh and, with ``need_grad``, d IoU_n / d box_n (N, 4)."""
        ious = self.out_bias.expand(boxes.shape[0]).clone()
        grad = torch.zeros_like(boxes) if need_grad else None
        corners = torch.cat([boxes[:, :2], boxes[:, :2] + boxes[:, 2:]], dim=1)
        for level, out_weight in zip(self.levels, self.out_weights):
            value, level_grad = self._level(level, out_weight, corners, need_grad)
            ious = ious + value
            if need_grad:
                grad = grad + level_grad
        return ious, grad

    @staticmethod
    def _level(level: dict, out_weight: Tensor, corners: Tensor, need_grad: bool):
        num = corners.shape[0]
        pool, scale = level["pool"], level["scale"]
        channels, height, width = level["shape"]
        corners = corners * scale
        starts = corners[:, :2]  # (N, 2): x1, y1 in cells
        bin_size = (corners[:, 2:] - starts).clamp(min=0) / pool
        nonempty = bin_size > 0
        inv_size = torch.where(nonempty, bin_size, 1).reciprocal() * nonempty
        edges = torch.arange(pool + 1, dtype=corners.dtype, device=corners.device)
        cells = torch.arange(max(height, width), dtype=corners.dtype, device=corners.device)
        # t[n, a, e, j] = edge e of axis a (x, y) minus cell j.
        t = (starts[:, :, None, None] + bin_size[:, :, None, None] * edges[:, None]) - cells
        cdf = hat_cdf(t)
        weights = torch.diff(cdf, dim=2) * inv_size[:, :, None, None]  # (N, 2, P, L)
        wx, wy = weights[:, 0, :, :width], weights[:, 1, :, :height]
        # Pool along y first (one 2D product), then along x per box.
        along_y = (wy.reshape(num * pool, height) @ level["rows"]).reshape(
            num, pool * channels, width
        )
        pooled = torch.bmm(along_y, wx.transpose(1, 2))  # (N, P*C, Q) in (p, c, q) order
        hidden = torch.addmm(level["bias"], pooled.reshape(num, -1), level["weight"].t())
        active = hidden > 0
        value = hidden.clamp(min=0) @ out_weight
        if not need_grad:
            return value, None
        grad_pooled = ((active * out_weight) @ level["weight"]).reshape(num, pool * channels, pool)
        grad_wx = torch.bmm(grad_pooled.transpose(1, 2), along_y)  # (N, Q, W)
        along_x = torch.bmm(grad_pooled, wx).reshape(num * pool, channels * width)
        grad_wy = (along_x @ level["rows"].t()).reshape(num, pool, height)
        grad_w = torch.zeros_like(weights)
        grad_w[:, 0, :, :width] = grad_wx
        grad_w[:, 1, :, :height] = grad_wy
        # w = (K[e + 1] - K[e]) / d with K = cdf(x1 + e d - j): d w / d x1 = (k[e+1] - k[e]) / d
        # and d w / d d = ((e + 1) k[e + 1] - e k[e]) / d - w / d.
        kernel = hat(t)
        d_start = torch.diff(kernel, dim=2) * inv_size[:, :, None, None]
        d_size = torch.diff(kernel * edges[:, None], dim=2) * inv_size[:, :, None, None]
        d_size = d_size - weights * inv_size[:, :, None, None]
        grad_start = (grad_w * d_start).sum(dim=(2, 3))  # (N, 2)
        grad_size = (grad_w * d_size).sum(dim=(2, 3)) * nonempty
        # x1 = x * scale, d = w * scale / pool.
        return value, torch.cat([grad_start * scale, grad_size * (scale / pool)], dim=1)
