"""Long-term tracking scores, as VOT-LT computes them, and a one-pass run that keeps them.

A long-term tracker reports a box and a confidence per frame; the prediction counts at a
threshold ``tau`` where the confidence is >= ``tau``. The confidence is the tracker's ``score``;
a NaN score (a tracker without one) always counts, and a frame reported with status ``lost``
never does: the tracker says the target is not there, as a VOT-LT tracker reports an empty
region (its box is only its best guess). With ``O_t`` the IoU of the box with the ground truth
where the target is present and 0 where it is absent:

- tracking precision ``Pr(tau)``: the mean of ``O_t`` over the frames predicted at ``tau``
  (1 when none is), recall ``Re(tau)``: their sum over the number of frames with the target
  present; both averaged over sequences, then ``F(tau) = 2 Pr Re / (Pr + Re)``. A tracker's
  F-score is the maximum over the thresholds, which are the quantiles of all its confidences
  (VOT's ``resolution`` of them, plus +-inf; :func:`determine_thresholds`).
- frames to re-acquire: for each return of the target (a present frame after an absent one),
  the frames from the return until the first frame predicted at the F-maximising threshold with
  IoU >= 0.5 (0: on the return frame itself; inf: never).
- AUC (OTB success) over the frames where the target is present.

Frame 0, the initialisation, is left out of every score.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ebmtrack.data.datasets import Sequence
from ebmtrack.evaluation import metrics as M
from ebmtrack.tracking.base import Tracker
from ebmtrack.tracking.init_box import clip_init_box

__all__ = [
    "REACQUIRE_IOU",
    "LongTermRun",
    "LongTermScore",
    "determine_thresholds",
    "f_score",
    "frames_to_reacquire",
    "precision_recall",
    "score_long_term",
    "track_long_term",
]

REACQUIRE_IOU = 0.5


@dataclass(frozen=True)
class LongTermRun:
    """One pass of a tracker over a sequence: boxes (N, 4), scores (N,), statuses (N,) str and
    seconds (N,) of each ``initialize`` / ``track`` call (row 0 the initialisation)."""

    boxes: np.ndarray
    scores: np.ndarray
    statuses: np.ndarray
    times: np.ndarray


def track_long_term(
    tracker: Tracker, sequence: Sequence, on_frame: Callable[[int], None] | None = None
) -> LongTermRun:
    """Initialise on frame 0's ground truth and track every later frame, keeping each result."""
    first = sequence.frame(0)
    init_box = clip_init_box(sequence.init_box, first.shape, f"{sequence.name} init box")
    count = len(sequence)
    boxes, scores, times = np.empty((count, 4)), np.full(count, np.inf), np.empty(count)
    statuses = np.empty(count, dtype=object)
    start = time.perf_counter()
    tracker.initialize(first, init_box)
    times[0] = time.perf_counter() - start
    boxes[0], statuses[0] = init_box, "init"
    for index in range(1, count):
        frame = sequence.frame(index)
        start = time.perf_counter()
        result = tracker.track(frame)
        times[index] = time.perf_counter() - start
        boxes[index] = np.asarray(result.box, dtype=np.float64).reshape(4)
        scores[index] = result.score
        statuses[index] = getattr(result.status, "value", str(result.status))
        if on_frame is not None:
            on_frame(index)
    return LongTermRun(boxes, scores, statuses.astype(str), times)


def confidences(scores: np.ndarray, statuses: np.ndarray) -> np.ndarray:
    """Scores (N,) as confidences: NaN (no score) becomes +inf, a prediction at every tau; a
    frame whose status is ``lost`` -inf, a prediction at none."""
    scores = np.asarray(scores, dtype=np.float64)
    scores = np.where(np.isnan(scores), np.inf, scores)
    return np.where(np.asarray(statuses) == "lost", -np.inf, scores)


def determine_thresholds(scores: np.ndarray, resolution: int = 100) -> np.ndarray:
    """Thresholds (T,), decreasing: +inf, ``resolution - 2`` quantiles of the finite ``scores``
    (all of them when fewer), -inf."""
    values = np.sort(np.asarray(scores, dtype=np.float64)[np.isfinite(scores)])[::-1]
    if len(values) > resolution - 2:
        delta = len(values) // (resolution - 2)
        picks = np.round(np.linspace(delta, len(values) - delta, resolution - 2)).astype(int)
        values = values[np.minimum(picks, len(values) - 1)]
    return np.concatenate([[np.inf], values, [-np.inf]])


def precision_recall(
    overlaps: np.ndarray, present: np.ndarray, confidence: np.ndarray, thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Tracking precision and recall (T,) of one sequence at each threshold.

    Args:
        overlaps: (N,) IoU with the ground truth, 0 where the target is absent.
        present: (N,) bool, the target is in the frame.
        confidence: (N,) the tracker's confidence (+inf: always predicted, -inf: never).
        thresholds: (T,).
    """
    overlaps = np.where(present, overlaps, 0.0)
    # A confidence of -inf (a lost frame) is a prediction at no threshold, -inf included.
    predicted = (confidence[None, :] >= np.asarray(thresholds)[:, None]) & (confidence > -np.inf)
    count = predicted.sum(axis=1)
    total = (predicted * overlaps[None, :]).sum(axis=1)
    precision = np.where(count > 0, total / np.maximum(count, 1), 1.0)
    recall = total / max(int(np.sum(present)), 1)
    return precision, recall


def f_score(precision: np.ndarray, recall: np.ndarray) -> np.ndarray:
    """``2 P R / (P + R)``, 0 where both are 0."""
    total = precision + recall
    return np.where(total > 0, 2 * precision * recall / np.where(total > 0, total, 1.0), 0.0)


def frames_to_reacquire(
    overlaps: np.ndarray,
    present: np.ndarray,
    confidence: np.ndarray,
    threshold: float,
    min_iou: float = REACQUIRE_IOU,
) -> list[float]:
    """For each return of the target (present after absent), the frames until the first frame
    from it on that is predicted at ``threshold`` with IoU >= ``min_iou``; inf if none.
    (``threshold`` -inf: frames with confidence -inf, the lost ones, still do not count.)"""
    present = np.asarray(present, dtype=bool)
    predicted = (confidence >= threshold) & (confidence > -np.inf)
    hits = np.flatnonzero(present & predicted & (overlaps >= min_iou))
    returns = np.flatnonzero(present[1:] & ~present[:-1]) + 1
    delays = []
    for index in returns:
        later = hits[hits >= index]
        delays.append(float(later[0] - index) if later.size else float("inf"))
    return delays


@dataclass(frozen=True)
class LongTermScore:
    """A tracker's long-term scores over sequences (see the module docstring).

    Attributes:
        thresholds, precision, recall, f: (T,) curves, averaged over sequences.
        best: index of the maximum F; ``f_score``, ``threshold`` its value and threshold.
        reacquire: frames to re-acquire of every return, at ``threshold``.
        auc: mean over sequences of the success AUC on present frames.
        per_sequence: (name, F at ``threshold``, AUC, frames to re-acquire of its returns) of
            each run.
    """

    thresholds: np.ndarray
    precision: np.ndarray
    recall: np.ndarray
    f: np.ndarray
    best: int
    reacquire: list[float]
    auc: float
    per_sequence: list

    @property
    def f_score(self) -> float:
        return float(self.f[self.best])

    @property
    def threshold(self) -> float:
        return float(self.thresholds[self.best])

    def median_reacquire(self) -> float:
        return float(np.median(self.reacquire)) if self.reacquire else float("nan")


def _per_frame(run: LongTermRun, sequence: Sequence) -> tuple[np.ndarray, ...]:
    if len(run.boxes) != len(sequence):
        raise ValueError(f"{sequence.name}: {len(run.boxes)} boxes for {len(sequence)} frames")
    present = sequence.annotated()[1:]
    truth = np.where(present[:, None], sequence.ground_truth[1:], 0.0)
    overlaps = np.where(present, M.box_iou(run.boxes[1:], truth), 0.0)
    return overlaps, present, confidences(run.scores[1:], run.statuses[1:])


def score_long_term(
    runs: list[tuple[Sequence, LongTermRun]], resolution: int = 100
) -> LongTermScore:
    """Score one tracker's runs (pairs of a sequence and its run; several runs of a sequence
    count as several sequences)."""
    if not runs:
        raise ValueError("score_long_term needs at least one run")
    frames = [_per_frame(run, sequence) for sequence, run in runs]
    thresholds = determine_thresholds(np.concatenate([c for _, _, c in frames]), resolution)
    curves = [precision_recall(o, p, c, thresholds) for o, p, c in frames]
    precision = np.mean([pr for pr, _ in curves], axis=0)
    recall = np.mean([re for _, re in curves], axis=0)
    f = f_score(precision, recall)
    best = int(np.argmax(f))
    reacquire, aucs, per_sequence = [], [], []
    for (sequence, _), (overlaps, present, confidence), (pr, re) in zip(
        runs, frames, curves, strict=True
    ):
        delays = frames_to_reacquire(overlaps, present, confidence, thresholds[best])
        auc = M.area_under_curve(M.success_curve(overlaps[present]))
        reacquire.extend(delays)
        aucs.append(auc)
        per_sequence.append((sequence.name, float(f_score(pr[best], re[best])), auc, delays))
    return LongTermScore(
        thresholds, precision, recall, f, best, reacquire, float(np.mean(aucs)), per_sequence
    )
