"""Box formats, IoU, clipping and ATOM's random box perturbation, in torch.

Formats (all in pixels, last dimension of size 4, any leading dimensions):

- ``xywh``: (x, y, w, h), top-left corner, 0-based, as in :mod:`ebmtrack.tracking.base`; pixel
  (0, 0) covers [0, 1) x [0, 1), so the box covers [x, x + w) x [y, y + h).
- ``xyxy``: (x1, y1, x2, y2) = (x, y, x + w, y + h).
- ``cxcywh``: (cx, cy, w, h) with centre (x + w / 2, y + h / 2).
- ``rel``: the ATOM / BMVC parametrisation B = (cx / w, cy / h, log w, log h).
- ``ebm``: the BMVC box EBM's y = (cx / w0, cy / h0, log w, log h), relative to a reference size
  (w0, h0) per example (``size_norm``, shape (B, 2); boxes (B, M, 4)).

:func:`box_convert` converts between any two of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = [
    "BOX_FORMATS",
    "box_convert",
    "box_iou",
    "clip_xywh",
    "elementwise_iou",
    "iou_xywh",
    "perturb_boxes",
]

BOX_FORMATS = ("xyxy", "xywh", "cxcywh", "rel", "ebm")
_FORMATS = ("xyxy", "xywh")


def _xywh_to_xyxy(boxes: Tensor) -> Tensor:
    """(..., 4) (x, y, w, h) -> (..., 4) (x1, y1, x2, y2)."""
    xy, wh = boxes[..., :2], boxes[..., 2:]
    return torch.cat([xy, xy + wh], dim=-1)


def _xyxy_to_xywh(boxes: Tensor) -> Tensor:
    """(..., 4) (x1, y1, x2, y2) -> (..., 4) (x, y, w, h); reversed corners give w or h < 0."""
    xy1, xy2 = boxes[..., :2], boxes[..., 2:]
    return torch.cat([xy1, xy2 - xy1], dim=-1)


def _xywh_to_cxcywh(boxes: Tensor) -> Tensor:
    """(..., 4) (x, y, w, h) -> (..., 4) (cx, cy, w, h) with cx = x + w / 2."""
    xy, wh = boxes[..., :2], boxes[..., 2:]
    return torch.cat([xy + 0.5 * wh, wh], dim=-1)


def _cxcywh_to_xywh(boxes: Tensor) -> Tensor:
    """(..., 4) (cx, cy, w, h) -> (..., 4) (x, y, w, h) with x = cx - w / 2."""
    cxy, wh = boxes[..., :2], boxes[..., 2:]
    return torch.cat([cxy - 0.5 * wh, wh], dim=-1)


def _xywh_to_rel(boxes: Tensor) -> Tensor:
    """(..., 4) (x, y, w, h) -> (..., 4) (cx / w, cy / h, log w, log h); needs w, h > 0.

    The parametrisation of the BMVC 2020 paper (and ATOM's IoU refinement in relative units): a
    change of the first two entries moves the box by a fraction of its own size.
    """
    cxcywh = _xywh_to_cxcywh(boxes)
    wh = cxcywh[..., 2:]
    return torch.cat([cxcywh[..., :2] / wh, wh.log()], dim=-1)


def _rel_to_xywh(rel: Tensor) -> Tensor:
    """(..., 4) (cx / w, cy / h, log w, log h) -> (..., 4) (x, y, w, h); inverse of _xywh_to_rel."""
    wh = rel[..., 2:].exp()
    return _cxcywh_to_xywh(torch.cat([rel[..., :2] * wh, wh], dim=-1))


def _xywh_to_ebm(boxes: Tensor, size_norm: Tensor) -> Tensor:
    rel = _xywh_to_rel(boxes)  # (cx / w, cy / h, log w, log h)
    center = rel[..., :2] * rel[..., 2:].exp() / size_norm[:, None, :]
    return torch.cat([center, rel[..., 2:]], dim=-1)


def _ebm_to_xywh(y: Tensor, size_norm: Tensor) -> Tensor:
    center = y[..., :2] * size_norm[:, None, :] / y[..., 2:].exp()
    return _rel_to_xywh(torch.cat([center, y[..., 2:]], dim=-1))


_TO_XYWH = {"xyxy": _xyxy_to_xywh, "cxcywh": _cxcywh_to_xywh, "rel": _rel_to_xywh}
_FROM_XYWH = {"xyxy": _xywh_to_xyxy, "cxcywh": _xywh_to_cxcywh, "rel": _xywh_to_rel}


def box_convert(
    boxes: Tensor, in_fmt: str, out_fmt: str, size_norm: Tensor | None = None
) -> Tensor:
    """``boxes`` (..., 4) in format ``in_fmt`` -> the same boxes in ``out_fmt``.

    Formats: :data:`BOX_FORMATS` (see the module's docstring). ``rel`` needs w, h > 0; ``ebm``
    needs ``size_norm`` (B, 2), the reference (w0, h0) of each example, with boxes (B, M, 4).
    Conversions go through ``xywh``; the same format in and out returns ``boxes`` itself.

    Raises:
        ValueError: an unknown format, or ``ebm`` without ``size_norm``.
    """
    for fmt in (in_fmt, out_fmt):
        if fmt not in BOX_FORMATS:
            raise ValueError(f"box format must be one of {BOX_FORMATS}, got {fmt!r}")
    if "ebm" in (in_fmt, out_fmt) and size_norm is None:
        raise ValueError("the 'ebm' box format needs size_norm, the (B, 2) reference sizes")
    if in_fmt == out_fmt:
        return boxes
    if in_fmt == "ebm":
        xywh = _ebm_to_xywh(boxes, size_norm)
    else:
        xywh = boxes if in_fmt == "xywh" else _TO_XYWH[in_fmt](boxes)
    if out_fmt == "ebm":
        return _xywh_to_ebm(xywh, size_norm)
    return xywh if out_fmt == "xywh" else _FROM_XYWH[out_fmt](xywh)


def _as_xyxy(boxes: Tensor, fmt: str) -> Tensor:
    if fmt not in _FORMATS:
        raise ValueError(f"fmt must be one of {_FORMATS}, got {fmt!r}")
    return _xywh_to_xyxy(boxes) if fmt == "xywh" else boxes


def elementwise_iou(a: Tensor, b: Tensor, fmt: str = "xyxy") -> Tensor:
    """Intersection over union of corresponding boxes.

    Args:
        a, b: (..., 4) boxes in format ``fmt`` ("xyxy" or "xywh"), broadcastable against each
            other.

    Returns:
        (...) IoU in [0, 1]. A box with reversed corners (or negative w, h) is empty; two empty
        boxes, or any pair whose union has zero area, have IoU 0.
    """
    a, b = _as_xyxy(a, fmt), _as_xyxy(b, fmt)
    lo = torch.maximum(a[..., :2], b[..., :2])
    hi = torch.minimum(a[..., 2:], b[..., 2:])
    inter = (hi - lo).clamp(min=0).prod(-1)
    area_a = (a[..., 2:] - a[..., :2]).clamp(min=0).prod(-1)
    area_b = (b[..., 2:] - b[..., :2]).clamp(min=0).prod(-1)
    union = area_a + area_b - inter
    return torch.where(union > 0, inter / torch.where(union > 0, union, 1), 0)


def box_iou(boxes1: Tensor, boxes2: Tensor, fmt: str = "xyxy") -> Tensor:
    """Pairwise IoU: (..., N, 4) x (..., M, 4) -> (..., N, M); see :func:`elementwise_iou`."""
    return elementwise_iou(boxes1[..., :, None, :], boxes2[..., None, :, :], fmt=fmt)


def iou_xywh(a: Tensor, b: Tensor) -> Tensor:
    """:func:`elementwise_iou` of (..., 4) (x, y, w, h) boxes -> (...)."""
    return elementwise_iou(a, b, fmt="xywh")


def clip_xywh(boxes: Tensor, image_size: Sequence[float]) -> Tensor:
    """Intersect (..., 4) (x, y, w, h) boxes with the image [0, W) x [0, H).

    Args:
        boxes: (..., 4) xywh boxes.
        image_size: (H, W), e.g. ``frame.shape[:2]``.

    Returns:
        (..., 4) xywh boxes inside the image; a box wholly outside gets zero width or height
        at the nearest border.
    """
    if len(image_size) != 2 or min(image_size) <= 0:
        raise ValueError(f"image_size must be a positive (H, W), got {tuple(image_size)!r}")
    height, width = (float(s) for s in image_size)
    xyxy = _xywh_to_xyxy(boxes)
    upper = xyxy.new_tensor([width, height, width, height])
    xyxy = torch.minimum(xyxy.clamp(min=0), upper)
    xy1, xy2 = xyxy[..., :2], xyxy[..., 2:]
    return torch.cat([xy1, (xy2 - xy1).clamp(min=0)], dim=-1)


def _replace_tiny_sizes(boxes: Tensor, box: Tensor, generator) -> Tensor:
    """Replace widths and heights <= 1 of (N, 4) ``boxes`` by U(0.15, 0.5) times ``box``'s."""
    shrink = torch.rand(
        (boxes.shape[0], 2), generator=generator, dtype=box.dtype, device=box.device
    )
    sizes = boxes[:, 2:]
    sizes = torch.where(sizes <= 1, box[2:] * (0.15 + 0.35 * shrink), sizes)
    return torch.cat([boxes[:, :2], sizes], dim=1)


def perturb_boxes(
    box: Tensor,
    num: int,
    min_iou: float,
    sigma_factors: Sequence[float] = (0.01, 0.05, 0.1, 0.2, 0.3),
    generator: torch.Generator | None = None,
    max_tries: int = 100,
) -> tuple[Tensor, Tensor]:
    """Random proposals around ``box`` with IoU above ``min_iou``: ATOM's training recipe.

    For each proposal a noise level s is drawn uniformly from ``sigma_factors``; Gaussian noise
    of standard deviation s * sqrt(w * h) is added to cx, cy, w and h, a width or height <= 1 is
    replaced by U(0.15, 0.5) times the original one, and the box is rounded to whole pixels. A
    proposal whose IoU is not above ``min_iou`` is drawn again with the noise scaled by 0.9, up to
    ``max_tries`` times; after that the last draw is kept (its IoU, returned, may then be lower).

    Args:
        box: (4,) xywh box with w, h > 0.
        num: number of proposals.
        min_iou: IoU threshold in [0, 1).
        sigma_factors: noise levels relative to sqrt(w * h).
        generator: source of randomness, for reproducible draws.
        max_tries: draws per proposal before giving up.

    Returns:
        (num, 4) xywh proposals and (num,) their IoU with ``box``.
    """
    box = torch.as_tensor(box)
    if not box.is_floating_point():
        box = box.float()
    if box.shape != (4,) or not torch.isfinite(box).all() or (box[2:] <= 0).any():
        raise ValueError(f"box must be a finite (4,) xywh box with w, h > 0, got {box.tolist()}")
    if not 0 <= min_iou < 1:
        raise ValueError(f"min_iou must be in [0, 1), got {min_iou}")
    if num < 0 or len(sigma_factors) == 0 or max_tries < 1:
        raise ValueError("num must be >= 0, sigma_factors non-empty and max_tries >= 1")
    sigmas = box.new_tensor(list(sigma_factors))
    pick = torch.randint(len(sigmas), (num,), generator=generator, device=box.device)
    noise_std = sigmas[pick] * box[2:].prod().sqrt()  # (num,)
    centre_size = _xywh_to_cxcywh(box)
    proposals = box.new_zeros(num, 4)
    ious = box.new_zeros(num)
    pending = torch.ones(num, dtype=torch.bool, device=box.device)
    for _ in range(max_tries):
        todo = int(pending.sum())
        if todo == 0:
            break
        noise = torch.randn((todo, 4), generator=generator, dtype=box.dtype, device=box.device)
        draw = centre_size + noise * noise_std[pending, None]
        draw = _replace_tiny_sizes(draw, box, generator)
        draw = _replace_tiny_sizes(_cxcywh_to_xywh(draw).round(), box, generator)
        proposals[pending] = draw
        ious[pending] = iou_xywh(draw, box)
        noise_std = torch.where(pending, noise_std * 0.9, noise_std)
        pending = pending & (ious <= min_iou)
    return proposals, ious
