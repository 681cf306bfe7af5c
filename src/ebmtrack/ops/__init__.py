"""ebmtrack.ops: pure tensor operations (Precise RoI Pooling, box utilities)."""

from ebmtrack.ops.boxes import (
    BOX_FORMATS,
    box_convert,
    box_iou,
    clip_xywh,
    elementwise_iou,
    iou_xywh,
    perturb_boxes,
)
from ebmtrack.ops.prroi_pool import PrRoIPool2D, prroi_pool

__all__ = [
    "BOX_FORMATS",
    "PrRoIPool2D",
    "box_convert",
    "box_iou",
    "clip_xywh",
    "elementwise_iou",
    "iou_xywh",
    "perturb_boxes",
    "prroi_pool",
]
