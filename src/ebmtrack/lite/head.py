"""The box head (an IoU-Net, ATOM's or one trained as an EBM) without PyTorch: its convolutions
as ONNX graphs, the pooling, the predictor and the gradient of the predicted IoU in the box in
NumPy. The torch side: :mod:`ebmtrack.tracking.box_head`, :mod:`ebmtrack.tracking.box_refine`,
:mod:`ebmtrack.tracking.atom.refine` and :mod:`ebmtrack.tracking.iou_gradient` (whose derivation
this follows).

The export writes three graphs and one array file:

- ``head-reference.onnx``: the reference branch's convolutions, (fine, coarse) first-frame
  features -> (fine, coarse) maps that Precise RoI Pooling reads inside the target box
  (3 x 3 and 1 x 1 bins, :func:`prroi_pool` here);
- ``head-modulation.onnx``: the pooled maps -> the two modulation vectors (once per target);
- ``head-test.onnx``: the test branch's convolutions on a window of the frame's features
  around the proposals (every frame);
- ``head-predictor.npz``: the predictor's two linear layers (BatchNorm folded in) and the
  output layer.

With the frame's features fixed, the predicted IoU of box ``b`` is::

    iou = w_out . [relu(W_l pool_l(b) + c_l) for l in (fine, coarse)] + c_out,
    pool_l(b)[c, p, q] = sum_ij wy[p, i] F_l[c, i, j] wx[q, j],
    wx[q, j] = (K(x1 + (q + 1) d - j) - K(x1 + q d - j)) / d,

``K`` the hat's CDF (:func:`hat_cdf`), ``d`` the bin width in cells. Its gradient: back through
the linear layers to dL/dpool, to dL/dwx and dL/dwy by the same products transposed, then to
``(x1, d)`` with ``K' = k``, the hat ``max(0, 1 - |t|)``:
``dw/dx1 = (k[e+1] - k[e]) / d`` and ``dw/dd = ((e+1) k[e+1] - e k[e]) / d - w / d``.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np

from ebmtrack.lite.files import Export
from ebmtrack.lite.onnx_session import Session
from ebmtrack.lite.torch_random import TorchGenerator

__all__ = [
    "BoxHead",
    "IoUGradient",
    "ascend_iou",
    "bin_weights",
    "blend_size",
    "feature_window",
    "hat_cdf",
    "jitter_proposals",
    "load_head",
    "refine_box",
    "prroi_pool",
    "select_box",
]


def hat_cdf(t: np.ndarray) -> np.ndarray:
    """Integral of the hat ``k(t) = max(0, 1 - |t|)`` from -inf to ``t``: 0, (t + 1)^2 / 2,
    1 - (1 - t)^2 / 2, 1 on t <= -1, [-1, 0], [0, 1], t >= 1; ``1/2 + t - t |t| / 2`` on [-1, 1]."""
    t = np.clip(t, -1.0, 1.0)
    return t + 0.5 - 0.5 * t * np.abs(t)


def _hat(t: np.ndarray) -> np.ndarray:
    return np.maximum(1.0 - np.abs(t), 0.0)


def bin_weights(start: float, size: float, bins: int, cells: int) -> np.ndarray:
    """(bins, cells) PrRoIPool weights of one axis: the integral of each cell's hat over each of
    ``bins`` equal bins of [start, start + size] (in cells), divided by the bin's width; zeros
    for an empty box."""
    size = max(size, 0.0)
    fraction = np.arange(bins + 1, dtype=np.float32) / np.float32(bins)
    t = (np.float32(start) - np.arange(cells, dtype=np.float32))[None] + (
        np.float32(size) * fraction
    )[:, None]
    width = np.float32(size) * fraction[1]
    inverse = np.float32(1.0) / width if width > 0 else np.float32(0.0)
    return np.diff(hat_cdf(t), axis=0) * inverse


def prroi_pool(feature: np.ndarray, box_xyxy: np.ndarray, bins: int) -> np.ndarray:
    """Precise RoI Pooling of one box: (C, H, W) map, (4,) (x1, y1, x2, y2) in cells ->
    (C, bins, bins), the mean of the bilinearly interpolated map over each bin
    (:func:`ebmtrack.ops.prroi_pool.prroi_pool`)."""
    _, height, width = feature.shape
    x1, y1, x2, y2 = (float(v) for v in box_xyxy)
    wx = bin_weights(x1, x2 - x1, bins, width)  # (P, W)
    wy = bin_weights(y1, y2 - y1, bins, height)  # (P, H)
    return np.einsum("ph,chw,qw->cpq", wy, feature, wx).astype(np.float32)


def jitter_proposals(
    box: np.ndarray,
    num_random: int,
    center_jitter: float,
    size_jitter: float,
    generator: TorchGenerator,
) -> np.ndarray:
    """``box`` (4,) float32 xywh and ``num_random`` boxes with uniform noise -> (1 + n, 4)
    float32, drawn as :func:`ebmtrack.tracking.box_refine.jitter_proposals` draws them."""
    box = np.asarray(box, dtype=np.float32)
    scale = np.float32(math.sqrt(float(box[2] * box[3])))
    noise = (generator.rand(num_random, 4) - np.float32(0.5)) * scale
    center = box[:2] + box[2:] / np.float32(2) + noise[:, :2] * np.float32(center_jitter)
    low = np.float32(float(box[2:].min()) / 3.0)
    size = np.maximum(box[2:] + noise[:, 2:] * np.float32(size_jitter), low)
    jittered = np.concatenate([center - size / np.float32(2), size], axis=1)
    return np.concatenate([box[None], jittered], axis=0)


def feature_window(
    boxes: np.ndarray, margin: float, stride: int, map_size: tuple[int, int], border_cells: int = 2
) -> tuple[int, int, int, int]:
    """The window (row0, row1, col0, col1) of a stride-``stride`` map that covers ``boxes``.

    ``boxes`` (N, 4) xywh crop px (an array or a tensor), each side grown by ``margin`` px (room
    for the boxes to move). Bilinear pooling over [a, b] (in cells) reads cells floor(a) ..
    ceil(b); two 3x3 layers with zero padding make the outer 2 cells of a window differ from the
    whole map's, hence ``border_cells`` = 2 more on each side for the test branch's outputs to be
    exact there. The torch trackers' window too (:mod:`ebmtrack.tracking.box_refine`).
    """
    x0 = float(boxes[:, 0].min()) - margin
    y0 = float(boxes[:, 1].min()) - margin
    x1 = float((boxes[:, 0] + boxes[:, 2]).max()) + margin
    y1 = float((boxes[:, 1] + boxes[:, 3]).max()) + margin
    height, width = map_size
    row0 = min(max(math.floor(y0 / stride) - border_cells, 0), height - 1)
    col0 = min(max(math.floor(x0 / stride) - border_cells, 0), width - 1)
    row1 = max(min(math.ceil(y1 / stride) + border_cells + 1, height), row0 + 1)
    col1 = max(min(math.ceil(x1 / stride) + border_cells + 1, width), col0 + 1)
    return row0, row1, col0, col1


def select_box(
    boxes: np.ndarray, ious: np.ndarray, top_k: int, max_aspect_ratio: float
) -> np.ndarray | None:
    """Mean of the ``top_k`` highest-IoU boxes with an aspect ratio inside (1 / max, max);
    None if none qualifies. (N, 4), (N,) -> (4,)."""
    aspect = boxes[:, 2] / boxes[:, 3]
    keep = (aspect < max_aspect_ratio) & (aspect > 1.0 / max_aspect_ratio)
    if not keep.any():
        return None
    boxes, ious = boxes[keep], ious[keep]
    top = np.argsort(-ious, kind="stable")[: min(top_k, len(ious))]
    return boxes[top].mean(axis=0, dtype=np.float32)


def blend_size(previous: np.ndarray, refined: np.ndarray, rate: float) -> np.ndarray:
    """The target size after a refinement, moved ``rate`` of the way from ``previous`` to
    ``refined`` in log space: ``previous * (refined / previous) ** rate``, per side.

    ``rate`` 1 takes the refined size (ATOM, DiMP); below 1 it damps frame-to-frame size
    changes the way Siamese trackers do (pysot's default learning rate is 0.4), so that a box
    head's per-frame bias cannot compound freely. Sizes are (2,) arrays, positive. The torch
    trackers' update too (:mod:`ebmtrack.tracking.box_refine`).
    """
    return previous * (refined / previous) ** rate


@dataclass(frozen=True)
class Predictor:
    """The predictor ``g`` with BatchNorm folded: per level a linear layer (out, C * P * P) in
    PyTorch's (c, p, q) column order and its bias, then the output layer."""

    weights: tuple[np.ndarray, np.ndarray]
    biases: tuple[np.ndarray, np.ndarray]
    out_weight: np.ndarray
    out_bias: float


class IoUGradient:
    """The predicted IoU of boxes and its gradient in the box, in closed form (the module
    docstring), on one frame's modulated test features [(C, H, W), (C, H, W)]."""

    def __init__(
        self,
        predictor: Predictor,
        modulated: list[np.ndarray],
        scales: tuple[float, float],
        pools: tuple[int, int],
    ) -> None:
        split = predictor.weights[0].shape[0]
        self.out_weights = [predictor.out_weight[:split], predictor.out_weight[split:]]
        self.out_bias = np.float32(predictor.out_bias)
        self.levels = []
        for weight, bias, feat, scale, pool in zip(
            predictor.weights, predictor.biases, modulated, scales, pools, strict=True
        ):
            channels, height, width = feat.shape
            # Columns from (c, p, q) to (p, c, q), the order pooling yields.
            reordered = weight.reshape(-1, channels, pool, pool).transpose(0, 2, 1, 3)
            self.levels.append(
                {
                    "weight": np.ascontiguousarray(reordered.reshape(weight.shape[0], -1)),
                    "bias": bias,
                    "rows": np.ascontiguousarray(feat.transpose(1, 0, 2)).reshape(
                        height, channels * width
                    ),
                    "pool": pool,
                    "scale": np.float32(scale),
                    "shape": (channels, height, width),
                }
            )

    def __call__(self, boxes: np.ndarray, need_grad: bool = True):
        """IoUs (N,) of ``boxes`` (N, 4) xywh and, with ``need_grad``, dIoU/dbox (N, 4)."""
        ious = np.full(boxes.shape[0], self.out_bias, dtype=np.float32)
        grad = np.zeros_like(boxes) if need_grad else None
        corners = np.concatenate([boxes[:, :2], boxes[:, :2] + boxes[:, 2:]], axis=1)
        for level, out_weight in zip(self.levels, self.out_weights, strict=True):
            value, level_grad = self._level(level, out_weight, corners, need_grad)
            ious = ious + value
            if need_grad:
                grad = grad + level_grad
        return ious, grad

    @staticmethod
    def _level(level: dict, out_weight: np.ndarray, corners: np.ndarray, need_grad: bool):
        num = corners.shape[0]
        pool, scale = level["pool"], level["scale"]
        channels, height, width = level["shape"]
        corners = corners * scale
        starts = corners[:, :2]
        bin_size = np.maximum(corners[:, 2:] - starts, 0) / np.float32(pool)
        nonempty = bin_size > 0
        inv_size = np.where(nonempty, np.float32(1) / np.where(nonempty, bin_size, 1), 0).astype(
            np.float32
        )
        edges = np.arange(pool + 1, dtype=np.float32)
        cells = np.arange(max(height, width), dtype=np.float32)
        # t[n, a, e, j] = edge e of axis a (x, y) minus cell j.
        t = (starts[:, :, None, None] + bin_size[:, :, None, None] * edges[:, None]) - cells
        weights = np.diff(hat_cdf(t), axis=2) * inv_size[:, :, None, None]  # (N, 2, P, L)
        wx, wy = weights[:, 0, :, :width], weights[:, 1, :, :height]
        along_y = (wy.reshape(num * pool, height) @ level["rows"]).reshape(
            num, pool * channels, width
        )
        pooled = np.matmul(along_y, wx.transpose(0, 2, 1))  # (N, P*C, Q)
        hidden = pooled.reshape(num, -1) @ level["weight"].T + level["bias"]
        active = hidden > 0
        value = np.maximum(hidden, 0) @ out_weight
        if not need_grad:
            return value, None
        grad_pooled = ((active * out_weight) @ level["weight"]).reshape(num, pool * channels, pool)
        grad_wx = np.matmul(grad_pooled.transpose(0, 2, 1), along_y)  # (N, Q, W)
        along_x = np.matmul(grad_pooled, wx).reshape(num * pool, channels * width)
        grad_wy = (along_x @ level["rows"].T).reshape(num, pool, height)
        grad_w = np.zeros_like(weights)
        grad_w[:, 0, :, :width] = grad_wx
        grad_w[:, 1, :, :height] = grad_wy
        hat = _hat(t)
        d_start = np.diff(hat, axis=2) * inv_size[:, :, None, None]
        d_size = np.diff(hat * edges[:, None], axis=2) * inv_size[:, :, None, None]
        d_size = d_size - weights * inv_size[:, :, None, None]
        grad_start = (grad_w * d_start).sum(axis=(2, 3))
        grad_size = (grad_w * d_size).sum(axis=(2, 3)) * nonempty
        return value, np.concatenate([grad_start * scale, grad_size * (scale / pool)], axis=1)


def ascend_iou(
    value_and_grad: IoUGradient, boxes: np.ndarray, steps: int, step_length: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradient ascent on the predicted IoU, all boxes at once: each step moves ``[x, y, w, h]``
    by ``length * dIoU/db * [w, h, w, h]`` and keeps the move only where the IoU does not drop
    (a rejected box halves its length). Returns (boxes, ious, the ious before the first step)."""
    boxes = np.array(boxes, dtype=np.float32, copy=True)
    ious, grad = value_and_grad(boxes, steps > 0)
    start = ious.copy()
    lengths = np.full_like(ious, step_length)
    for step in range(steps):
        scale = np.tile(boxes[:, 2:], (1, 2))
        candidate = boxes + lengths[:, None] * grad * scale
        candidate[:, 2:] = np.maximum(candidate[:, 2:], 1.0)
        new_ious, new_grad = value_and_grad(candidate, step < steps - 1)
        accept = new_ious >= ious
        boxes = np.where(accept[:, None], candidate, boxes)
        ious = np.where(accept, new_ious, ious)
        if new_grad is not None:
            grad = np.where(accept[:, None], new_grad, grad)
            lengths = np.where(accept, lengths, lengths / np.float32(2))
    return boxes, ious, start


class BoxHead:
    """An exported IoU-Net ready for per-frame use.

    Args:
        reference, modulation, test: the three sessions (:class:`~ebmtrack.lite.onnx_session.
            Session`) of the module docstring.
        predictor: the predictor's arrays.
        layers: the backbone layers it reads, fine then coarse.
        strides: their strides in crop px.
        pools: the test branch's bins per level (5, 3); the reference branch pools (3, 1).
    """

    reference_pools = (3, 1)

    def __init__(self, reference, modulation, test, predictor: Predictor, layers, strides, pools):
        self.reference, self.modulation_graph, self.test = reference, modulation, test
        self.predictor = predictor
        self.layers = tuple(layers)
        self.strides = tuple(int(s) for s in strides)
        self.pools = tuple(int(p) for p in pools)
        self.scales = tuple(1.0 / s for s in self.strides)

    def modulation(self, feats: dict[str, np.ndarray], box: np.ndarray) -> list[np.ndarray]:
        """The target's modulation vectors [(D,), (D,)] from the first frame's features (batch
        1) and its box (4,) xywh crop px."""
        fine, coarse = (feats[layer][:1] for layer in self.layers)
        maps = self.reference({self.reference.inputs[0]: fine, self.reference.inputs[1]: coarse})
        box = np.asarray(box, dtype=np.float32)
        corners = np.concatenate([box[:2], box[:2] + box[2:]])
        pooled = [
            prroi_pool(maps[name][0], corners * np.float32(scale), bins)[None]
            for name, scale, bins in zip(
                self.reference.outputs, self.scales, self.reference_pools, strict=True
            )
        ]
        graph = self.modulation_graph
        out = graph({name: value for name, value in zip(graph.inputs, pooled, strict=True)})
        return [out[name][0] for name in graph.outputs]

    def window(
        self, feats: dict[str, np.ndarray], proposals: np.ndarray, margin: float
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """The test branch's features [(D, h, w)] * 2 of the window of ``feats`` (batch 1) around
        ``proposals`` grown by ``margin`` px, and the window's offset (4,) in crop px."""
        fine, coarse = (feats[layer] for layer in self.layers)
        ratio = self.strides[1] // self.strides[0]
        r0, r1, c0, c1 = feature_window(proposals, margin, self.strides[1], coarse.shape[-2:])
        out = self.test(
            {
                self.test.inputs[0]: fine[:1, :, r0 * ratio : r1 * ratio, c0 * ratio : c1 * ratio],
                self.test.inputs[1]: coarse[:1, :, r0:r1, c0:c1],
            }
        )
        offset = np.array([c0 * self.strides[1], r0 * self.strides[1], 0, 0], dtype=np.float32)
        return [out[name][0] for name in self.test.outputs], offset

    def ascent(self, modulation: list[np.ndarray], test_features: list[np.ndarray]) -> IoUGradient:
        """The closed-form IoU and gradient on one frame's test features."""
        modulated = [
            feat * weights[:, None, None]
            for feat, weights in zip(test_features, modulation, strict=True)
        ]
        return IoUGradient(self.predictor, modulated, self.scales, self.pools)


def load_head(export: Export, threads: int) -> BoxHead:
    head = export.manifest["head"]
    files = head["files"]
    source = export.source(files["predictor"])
    source = io.BytesIO(source) if isinstance(source, bytes) else source
    with np.load(source, allow_pickle=False) as arrays:
        names = (
            "fine_weight",
            "fine_bias",
            "coarse_weight",
            "coarse_bias",
            "out_weight",
            "out_bias",
        )
        missing = [name for name in names if name not in arrays]
        if missing:
            raise ValueError(f"{files['predictor']}: lacks {', '.join(missing)}")
        a = {name: np.asarray(arrays[name], dtype=np.float32) for name in names}
    for level in ("fine", "coarse"):
        weight, bias = a[f"{level}_weight"], a[f"{level}_bias"]
        if weight.ndim != 2 or bias.shape != (weight.shape[0],):
            raise ValueError(
                f"{files['predictor']}: {level} layer shapes {weight.shape}, {bias.shape}"
            )
    if a["out_weight"].shape != (a["fine_bias"].size + a["coarse_bias"].size,) or a[
        "out_bias"
    ].shape != (1,):
        raise ValueError(f"{files['predictor']}: output layer shapes do not match")
    predictor = Predictor(
        (a["fine_weight"], a["coarse_weight"]),
        (a["fine_bias"], a["coarse_bias"]),
        a["out_weight"],
        float(a["out_bias"][0]),
    )
    return BoxHead(
        Session(export.source(files["reference"]), threads),
        Session(export.source(files["modulation"]), threads),
        Session(export.source(files["test"]), threads),
        predictor,
        head["layers"],
        head["strides"],
        head["pools"],
    )


def refine_box(
    head: BoxHead,
    modulation: list[np.ndarray],
    feats: dict[str, np.ndarray],
    center: np.ndarray,
    size: np.ndarray,
    params: dict,
    generator,
) -> tuple[np.ndarray, float] | None:
    """The box head's ascent from the box at ``center``, ``size`` (crop px) of one region's
    features ``feats``, proposals jittered by ``generator`` (a :class:`~ebmtrack.lite.
    torch_random.TorchGenerator`): the refined box (xywh crop px) and the predicted gain of its
    best boxes over the start box; None where no box keeps an allowed aspect ratio."""
    box = np.array([*(center - size / 2), *size], dtype=np.float32)
    proposals = jitter_proposals(
        box,
        params["num_random_proposals"],
        params["proposal_center_jitter"],
        params["proposal_size_jitter"],
        generator,
    )
    test_features, offset = head.window(feats, proposals, 0.25 * float(size.max()))
    boxes, ious, start = ascend_iou(
        head.ascent(modulation, test_features),
        proposals - offset,
        params["box_steps"],
        params["box_step_length"],
    )
    best = select_box(boxes + offset, ious, params["box_top_k"], params["max_aspect_ratio"])
    if best is None:
        return None
    top = np.sort(ious)[::-1][: min(params["box_top_k"], len(ious))].mean(dtype=np.float32)
    return best.astype(np.float64), float(top) - float(start[0])
