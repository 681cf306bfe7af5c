"""Windows of feature maps that cover given boxes: the part of a map a box head's convolutions
and pooling need, so that they run on a fraction of the map with the same result.

A layer stack of ``k`` 3x3 convolutions with zero padding changes the outer ``k`` cells of a
window against the whole map; pooling a box reads the cells its bilinear support touches
(``floor(x1)`` to ``ceil(x2)``). A window of the box's cells grown by ``k`` border cells therefore
gives the box's pooled values of the whole map, up to float rounding; where a window meets the
map's edge, the map's own padding applies, as it does on the whole map.

Boxes are (x, y, w, h) in pixels of the image the map was computed from; a map of stride ``s``
has cell ``(i, j)`` over pixels ``[j s, (j + 1) s) x [i s, (i + 1) s)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["box_cells", "crop_windows"]


def box_cells(boxes: Tensor, stride: int, map_size: tuple[int, int], border: int) -> Tensor:
    """The cells of a stride-``stride`` map that pooling ``boxes`` reads, grown by ``border``.

    Args:
        boxes: (B, N, 4) xywh px; row ``b`` holds the boxes of map ``b``.
        stride: pixels per cell.
        map_size: (H, W) cells.
        border: cells added on every side (one per 3x3 convolution before the pooling).

    Returns:
        (B, 4) long ``(row0, row1, col0, col1)``, half-open, clipped to the map, non-empty.
    """
    if boxes.dim() != 3 or boxes.shape[-1] != 4:
        raise ValueError(f"boxes must have shape (B, N, 4), got {tuple(boxes.shape)}")
    corners = torch.cat([boxes[..., :2], boxes[..., :2] + boxes[..., 2:]], dim=-1) / stride
    low = corners[..., :2].amin(dim=1).floor().long() - border  # (B, 2) x, y
    high = corners[..., 2:].amax(dim=1).ceil().long() + border + 1
    height, width = map_size
    size = torch.tensor([width, height], device=boxes.device)
    low = torch.minimum(low.clamp(min=0), size - 1)
    high = torch.maximum(torch.minimum(high, size), low + 1)
    return torch.stack([low[:, 1], high[:, 1], low[:, 0], high[:, 0]], dim=1)


def crop_windows(
    maps: list[Tensor], cells: Tensor, ratios: tuple[int, ...]
) -> tuple[list[Tensor], Tensor]:
    """One window per batch row of every map in ``maps``, all of one size.

    The windows are ``cells`` (on the coarsest map's grid) grown to the largest window of the
    batch and moved inside the map where they would cross its edge, so every row's window holds
    its own cells.

    Args:
        maps: [(B, C_l, H * r_l, W * r_l)] maps whose cells are ``r_l`` times finer than the
            grid of ``cells`` (``ratios`` holds the ``r_l``; 1 for the coarsest map).
        cells: (B, 4) long ``(row0, row1, col0, col1)`` from :func:`box_cells` on that grid.
        ratios: the ``r_l``, one per map.

    Returns:
        ``(windows, origins)``: [(B, C_l, h * r_l, w * r_l)] and (B, 2) long ``(row0, col0)``
        of each row's window on the coarse grid (multiply by the coarse stride for pixels).
    """
    height, width = (maps[-1].shape[-2] // ratios[-1], maps[-1].shape[-1] // ratios[-1])
    h = int((cells[:, 1] - cells[:, 0]).max())
    w = int((cells[:, 3] - cells[:, 2]).max())
    rows = torch.minimum(cells[:, 0], torch.tensor(height - h)).tolist()
    cols = torch.minimum(cells[:, 2], torch.tensor(width - w)).tolist()
    windows = [
        torch.stack(
            [
                feat[b, :, r * ratio : (r + h) * ratio, c * ratio : (c + w) * ratio]
                for b, (r, c) in enumerate(zip(rows, cols))
            ]
        )
        for feat, ratio in zip(maps, ratios)
    ]
    return windows, torch.tensor([rows, cols], device=cells.device).T
