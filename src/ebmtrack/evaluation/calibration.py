"""How well a per-frame confidence predicts that the box is right (IoU > 0.5).

A frame's label is ``IoU > 0.5`` with the ground truth; frames without a known, present target
and the first frame (the given box) are not scored. ``confidence`` is the tracker's probability
of that event (:attr:`ebmtrack.tracking.base.TrackResult.confidence`).

- **ECE** (expected calibration error): frames binned by confidence into :data:`BINS` equal
  bins over [0, 1]; the frame-weighted mean over bins of |mean confidence - share right|.
- **AUROC of "IoU < 0.5"**: how well ``1 - confidence`` ranks the wrong boxes above the right
  ones (0.5: no better than chance, 1: perfect), ties counted half.
- **lost precision / recall**: of the frames a tracker calls ``lost``
  (:data:`~ebmtrack.tracking.base.LOST_BELOW`), the share that are wrong, and of the wrong
  frames, the share it calls lost.
"""

from __future__ import annotations

import math

import numpy as np

from ebmtrack.data.datasets import Sequence
from ebmtrack.evaluation import metrics as M
from ebmtrack.tracking.base import LOST_BELOW

__all__ = [
    "BINS",
    "IOU_RIGHT",
    "auroc",
    "calibration_summary",
    "expected_calibration_error",
    "frame_ious",
    "reliability",
]

BINS = 10
IOU_RIGHT = 0.5


def reliability(
    confidence: np.ndarray, right: np.ndarray, bins: int = BINS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per equal-width bin over [0, 1]: (frames (B,), mean confidence (B,), share right (B,));
    empty bins have NaN means. ``confidence`` (N,) in [0, 1], ``right`` (N,) bool."""
    confidence = np.asarray(confidence, dtype=np.float64).reshape(-1)
    right = np.asarray(right, dtype=np.float64).reshape(-1)
    index = np.clip((confidence * bins).astype(int), 0, bins - 1)
    counts = np.bincount(index, minlength=bins).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(index, confidence, minlength=bins) / counts
        share = np.bincount(index, right, minlength=bins) / counts
    return counts, mean_conf, share


def expected_calibration_error(
    confidence: np.ndarray, right: np.ndarray, bins: int = BINS
) -> float:
    """ECE of ``confidence`` (N,) for the events ``right`` (N,); NaN without frames."""
    counts, mean_conf, share = reliability(confidence, right, bins)
    if counts.sum() == 0:
        return math.nan
    full = counts > 0
    return float(np.sum(counts[full] * np.abs(mean_conf[full] - share[full])) / counts.sum())


def auroc(score: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve of ``score`` (N,) for the ``positive`` (N,) frames (ties half;
    Mann-Whitney); NaN when one class is empty."""
    score = np.asarray(score, dtype=np.float64).reshape(-1)
    positive = np.asarray(positive, dtype=bool).reshape(-1)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    ranks = _average_ranks(score)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def frame_ious(boxes: np.ndarray, sequence: Sequence, clip_to_image: bool = False) -> np.ndarray:
    """(N,) IoU of each result box with the ground truth; NaN on frames not scored (the first,
    and those without a known, present target). ``clip_to_image``: both boxes cut to the image
    first (GOT-10k's convention; the image size is read from the first frame)."""
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    if len(boxes) != len(sequence):
        raise ValueError(f"{sequence.name}: {len(boxes)} result boxes for {len(sequence)} frames")
    mask = sequence.annotated()
    mask[0] = False
    pred, truth = boxes[mask], sequence.ground_truth[mask]
    if clip_to_image:
        height, width = sequence.frame(0).shape[:2]
        pred, truth = M.clip_to_image(pred, width, height), M.clip_to_image(truth, width, height)
    ious = np.full(len(boxes), np.nan)
    ious[mask] = M.box_iou(pred, truth)
    return ious


def calibration_summary(confidence: np.ndarray, ious: np.ndarray) -> dict[str, float]:
    """ECE, AUROC of "IoU < 0.5", Brier score, lost precision / recall and the number of frames,
    over the frames where both ``confidence`` and ``ious`` (N,) are finite."""
    confidence = np.asarray(confidence, dtype=np.float64).reshape(-1)
    ious = np.asarray(ious, dtype=np.float64).reshape(-1)
    keep = np.isfinite(confidence) & np.isfinite(ious)
    p, right = confidence[keep], ious[keep] > IOU_RIGHT
    lost = p < LOST_BELOW
    wrong = ~right
    return {
        "ece": expected_calibration_error(p, right),
        "auroc_wrong": auroc(1.0 - p, wrong),
        "brier": float(np.mean((p - right) ** 2)) if p.size else math.nan,
        "lost_precision": float(wrong[lost].mean()) if lost.any() else math.nan,
        "lost_recall": float(lost[wrong].mean()) if wrong.any() else math.nan,
        "share_right": float(right.mean()) if p.size else math.nan,
        "frames": int(p.size),
    }


def _average_ranks(values) -> np.ndarray:
    """1-based ranks, ties given their mean rank (``scipy.stats.rankdata``'s default, its
    algorithm), in NumPy: the default install has no SciPy."""
    values = np.asarray(values).ravel()
    order = np.argsort(values, kind="mergesort")
    inverse = np.empty(order.size, dtype=np.intp)
    inverse[order] = np.arange(order.size)
    ordered = values[order]
    first = np.r_[True, ordered[1:] != ordered[:-1]]
    dense = first.cumsum()[inverse]
    bounds = np.r_[np.nonzero(first)[0], first.size]
    return 0.5 * (bounds[dense] + bounds[dense - 1] + 1)
