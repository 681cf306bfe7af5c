"""Tracking metrics as pure numpy functions.

Boxes are (N, 4) float arrays (x, y, w, h), 0-based top-left corner, as everywhere in ebmtrack.
Curves follow the OTB convention of the got10k toolkit and pytracking: 21 overlap thresholds
0, 0.05, ..., 1 with success meaning IoU > threshold (strict), centre-error thresholds 0..50 px
with precision meaning error <= threshold.
"""

from __future__ import annotations

import numpy as np

SUCCESS_THRESHOLDS = np.linspace(0.0, 1.0, 21)
PRECISION_THRESHOLDS = np.arange(0.0, 51.0)
NORM_PRECISION_THRESHOLDS = np.linspace(0.0, 0.5, 51)
PRECISION_AT_PX = 20.0
NORM_PRECISION_AT = 0.2


def _as_boxes(boxes, name: str) -> np.ndarray:
    arr = np.asarray(boxes, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(f"{name} must have shape (N, 4), got {arr.shape}")
    return arr


def clip_to_image(boxes: np.ndarray, width: float, height: float) -> np.ndarray:
    """Boxes (N, 4) bounded to a width x height image the way the GOT-10k toolkit does it.

    The corner is clamped into [0, width] x [0, height] first, then the size into
    [0, width - x] x [0, height - y]. A box sticking out on the left or top is therefore moved
    in, not cut (x = -5, w = 10 becomes x = 0, w = 10); the server's numbers use this rule.
    """
    boxes = _as_boxes(boxes, "boxes")
    x = np.clip(boxes[:, 0], 0.0, width)
    y = np.clip(boxes[:, 1], 0.0, height)
    w = np.clip(boxes[:, 2], 0.0, width - x)
    h = np.clip(boxes[:, 3], 0.0, height - y)
    return np.stack([x, y, w, h], axis=1)


def box_iou(pred, gt) -> np.ndarray:
    """Intersection over union (N,) of matching rows of ``pred`` and ``gt`` (N, 4), in [0, 1].

    Continuous areas (no +1 pixel convention). A prediction with a NaN or a non-positive size
    scores 0; two empty boxes score 0.
    """
    pred, gt = _as_boxes(pred, "pred"), _as_boxes(gt, "gt")
    if pred.shape != gt.shape:
        raise ValueError(f"pred {pred.shape} and gt {gt.shape} must have the same shape")
    with np.errstate(invalid="ignore"):
        iw = np.minimum(pred[:, 0] + pred[:, 2], gt[:, 0] + gt[:, 2]) - np.maximum(
            pred[:, 0], gt[:, 0]
        )
        ih = np.minimum(pred[:, 1] + pred[:, 3], gt[:, 1] + gt[:, 3]) - np.maximum(
            pred[:, 1], gt[:, 1]
        )
        inter = np.maximum(iw, 0.0) * np.maximum(ih, 0.0)
        area_pred = np.maximum(pred[:, 2], 0.0) * np.maximum(pred[:, 3], 0.0)
        area_gt = np.maximum(gt[:, 2], 0.0) * np.maximum(gt[:, 3], 0.0)
        union = area_pred + area_gt - inter
        iou = np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)
    return np.clip(np.nan_to_num(iou, nan=0.0), 0.0, 1.0)


def centers(boxes) -> np.ndarray:
    """Box centres (N, 2) x + w / 2, y + h / 2.

    The toolkits' x + (w - 1) / 2 differs by a constant that cancels in every centre distance.
    """
    boxes = _as_boxes(boxes, "boxes")
    return boxes[:, :2] + boxes[:, 2:] / 2.0


def center_error(pred, gt) -> np.ndarray:
    """Euclidean distance (N,) in pixels between box centres; inf where ``pred`` has a NaN."""
    diff = centers(pred) - centers(gt)
    err = np.sqrt(np.sum(diff**2, axis=1))
    return np.where(np.isnan(err), np.inf, err)


def normalized_center_error(pred, gt) -> np.ndarray:
    """Centre distance (N,) after dividing each axis by the ground-truth width / height.

    As in pytracking and the TrackingNet/LaSOT papers; inf where ``pred`` has a NaN.
    """
    gt = _as_boxes(gt, "gt")
    diff = (centers(pred) - centers(gt)) / gt[:, 2:]
    err = np.sqrt(np.sum(diff**2, axis=1))
    return np.where(np.isnan(err), np.inf, err)


def success_curve(ious, thresholds=SUCCESS_THRESHOLDS) -> np.ndarray:
    """Fraction of frames with IoU > t (strict) for each threshold t; (T,). Empty input: NaN."""
    ious = np.asarray(ious, dtype=np.float64).reshape(-1, 1)
    if ious.size == 0:
        return np.full(len(thresholds), np.nan)
    return np.mean(ious > np.asarray(thresholds)[None, :], axis=0)


def precision_curve(errors, thresholds=PRECISION_THRESHOLDS) -> np.ndarray:
    """Fraction of frames with error <= t for each threshold t; (T,). Empty input: NaN."""
    errors = np.asarray(errors, dtype=np.float64).reshape(-1, 1)
    if errors.size == 0:
        return np.full(len(thresholds), np.nan)
    return np.mean(errors <= np.asarray(thresholds)[None, :], axis=0)


def area_under_curve(curve) -> float:
    """AUC of a success curve the OTB way: the mean of its values at the 21 thresholds.

    It approaches the average overlap as the number of thresholds grows.
    """
    return float(np.mean(np.asarray(curve, dtype=np.float64)))


def curve_at(curve, thresholds, value: float) -> float:
    """The value of ``curve`` at the threshold equal to ``value`` (up to 1e-9)."""
    index = np.flatnonzero(np.abs(np.asarray(thresholds) - value) < 1e-9)
    if index.size == 0:
        raise ValueError(f"threshold {value} is not among the curve's thresholds")
    return float(np.asarray(curve)[index[0]])


def average_overlap(ious) -> float:
    """GOT-10k's AO: the mean IoU over the frames given (pool frames across sequences first)."""
    ious = np.asarray(ious, dtype=np.float64)
    return float(np.mean(ious)) if ious.size else float("nan")


def success_rate(ious, threshold: float) -> float:
    """GOT-10k's SR_t: the fraction of frames with IoU > t."""
    ious = np.asarray(ious, dtype=np.float64)
    return float(np.mean(ious > threshold)) if ious.size else float("nan")


def frames_per_second(times) -> float:
    """Frames over total time (pytracking's FPS); times are per-frame seconds."""
    times = np.asarray(times, dtype=np.float64)
    total = float(np.sum(times))
    return len(times) / total if total > 0 else float("nan")
