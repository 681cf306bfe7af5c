"""ebmtrack.ops: pure tensor operations (Precise RoI Pooling, box utilities)."""

from ebmtrack.ops.boxes import (
    box_iou,
    clip_xywh,
    cxcywh_to_xywh,
    elementwise_iou,
    iou_xywh,
    perturb_boxes,
    rel_to_xywh,
    xywh_to_cxcywh,
    xywh_to_rel,
    xywh_to_xyxy,
    xyxy_to_xywh,
)
from ebmtrack.ops.prroi_pool import PrRoIPool2D, prroi_pool

__all__ = [
    "PrRoIPool2D",
    "box_iou",
    "clip_xywh",
    "cxcywh_to_xywh",
    "elementwise_iou",
    "iou_xywh",
    "perturb_boxes",
    "prroi_pool",
    "rel_to_xywh",
    "xywh_to_cxcywh",
    "xywh_to_rel",
    "xywh_to_xyxy",
    "xyxy_to_xywh",
]
