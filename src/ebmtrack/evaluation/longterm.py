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

OxUvA's scores (its toolkit's ``assess``) read the same frames as a detection of presence: a
frame is predicted present when the tracker does not say the target is gone (its status) and,
at a threshold ``tau``, its confidence is >= ``tau``. Over all frames of all sequences pooled,
**TPR** is the share of present frames predicted present with IoU >= 0.5, **TNR** the share of
absent frames predicted absent, and **MaxGM** the toolkit's best geometric mean ``sqrt(TPR
TNR)`` on the segment from the operating point to (TPR 0, TNR 1), which a tracker reaches by
also reporting absence at random (:func:`max_geometric_mean`); :func:`oxuva_points` gives the
operating point of every threshold, as the toolkit's ``posthoc_threshold`` traces them.

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
    "LOST_STATUSES",
    "OXUVA_IOU",
    "REACQUIRE_IOU",
    "LongTermRun",
    "LongTermScore",
    "OxUvAScore",
    "confidences",
    "determine_thresholds",
    "f_score",
    "frame_scores",
    "frames_to_reacquire",
    "max_geometric_mean",
    "oxuva_points",
    "precision_recall",
    "score_long_term",
    "score_oxuva",
    "track_long_term",
]

REACQUIRE_IOU = 0.5
OXUVA_IOU = 0.5  # OxUvA's true positive: present, predicted present, IoU >= this
LOST_STATUSES = ("lost",)
"""The statuses that say the target is not there (a prediction at no threshold), by default."""


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


def confidences(
    scores: np.ndarray, statuses: np.ndarray, absent: tuple[str, ...] = LOST_STATUSES
) -> np.ndarray:
    """Scores (N,) as confidences: NaN (no score) becomes +inf, a prediction at every tau; a
    frame whose status is one of ``absent`` (``lost``) -inf, a prediction at none."""
    scores = np.asarray(scores, dtype=np.float64)
    scores = np.where(np.isnan(scores), np.inf, scores)
    return np.where(np.isin(np.asarray(statuses, dtype=str), absent), -np.inf, scores)


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


def frame_scores(
    run: LongTermRun, sequence: Sequence, absent: tuple[str, ...] = LOST_STATUSES
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(overlaps, present, confidence), each (N - 1,), of the frames after the first: the IoU
    with the ground truth (0 where the target is absent), whether it is present
    (:meth:`Sequence.annotated`) and :func:`confidences`."""
    if len(run.boxes) != len(sequence):
        raise ValueError(f"{sequence.name}: {len(run.boxes)} boxes for {len(sequence)} frames")
    present = sequence.annotated()[1:]
    truth = np.where(present[:, None], sequence.ground_truth[1:], 0.0)
    overlaps = np.where(present, M.box_iou(run.boxes[1:], truth), 0.0)
    return overlaps, present, confidences(run.scores[1:], run.statuses[1:], absent)


def score_long_term(
    runs: list[tuple[Sequence, LongTermRun]],
    resolution: int = 100,
    absent: tuple[str, ...] = LOST_STATUSES,
) -> LongTermScore:
    """Score one tracker's runs (pairs of a sequence and its run; several runs of a sequence
    count as several sequences); a frame whose status is one of ``absent`` is a prediction at
    no threshold."""
    if not runs:
        raise ValueError("score_long_term needs at least one run")
    frames = [frame_scores(run, sequence, absent) for sequence, run in runs]
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


def max_geometric_mean(tpr, tnr) -> np.ndarray:
    """OxUvA's MaxGM of operating points (TPR, TNR): the largest ``sqrt(x y)`` on the segment
    from (TNR, TPR) to (TNR 1, TPR 0), the toolkit's ``max_geometric_mean_line(TNR, TPR, 1,
    0)`` (it checks both ends and, where the quadratic ``(1 - t) TPR ((1 - t) TNR + t)`` is
    concave, its peak: ``sqrt(TPR / (1 - TNR)) / 2`` at ``t = (1 - 2 TNR) / (2 - 2 TNR)``)."""
    tpr, tnr = np.asarray(tpr, dtype=np.float64), np.asarray(tnr, dtype=np.float64)
    ends = np.sqrt(tpr * tnr)  # t = 0; t = 1 gives 0
    with np.errstate(divide="ignore", invalid="ignore"):
        peak = np.sqrt(tpr / (1.0 - tnr)) / 2.0
    inside = (tpr > 0) & (tnr < 1) & (tnr <= 0.5)  # concave, peak at t in [0, 1]
    return np.where(inside, np.maximum(ends, np.where(inside, peak, 0.0)), ends)


def oxuva_points(
    hits: np.ndarray, present: np.ndarray, confidence: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(thresholds, TPR, TNR), each (T,), thresholds decreasing: the operating point at each
    distinct confidence a frame predicted present has (the toolkit's ``posthoc_threshold``,
    less its first point, where nothing is predicted present and MaxGM is 0).

    Args:
        hits: (N,) bool, the target present and the box's IoU >= :data:`OXUVA_IOU`.
        present: (N,) bool, the target in the frame.
        confidence: (N,) as :func:`confidences` gives it (-inf: predicted absent at every
            threshold; +inf: present at every one).
    """
    hits, present = np.asarray(hits, dtype=bool), np.asarray(present, dtype=bool)
    confidence = np.asarray(confidence, dtype=np.float64)
    num_present, num_absent = int(present.sum()), int((~present).sum())
    candidates = confidence > -np.inf
    order = np.argsort(-confidence[candidates], kind="stable")
    values = confidence[candidates][order]
    true_pos = np.cumsum((hits & present)[candidates][order])
    false_pos = np.cumsum(~present[candidates][order])
    last = np.r_[values[1:] != values[:-1], True] if values.size else np.zeros(0, bool)
    if not last.any():  # nothing is ever predicted present
        tpr = np.zeros(1) if num_present else np.full(1, np.nan)
        return np.array([np.inf]), tpr, np.ones(1) if num_absent else np.full(1, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpr = true_pos[last] / num_present if num_present else np.full(last.sum(), np.nan)
        tnr = 1.0 - false_pos[last] / num_absent if num_absent else np.full(last.sum(), np.nan)
    return values[last], tpr, tnr


@dataclass(frozen=True)
class OxUvAScore:
    """A tracker's OxUvA scores over frames pooled from all its runs (the module docstring).

    Attributes:
        tpr, tnr, max_gm: at the tracker's own operating point (present unless its status says
            absent, whatever its confidence: the lowest threshold).
        best_threshold, best_tpr, best_tnr, best_max_gm: at the threshold of the largest MaxGM.
        frames_present, frames_absent: the frames scored.
    """

    tpr: float
    tnr: float
    max_gm: float
    best_threshold: float
    best_tpr: float
    best_tnr: float
    best_max_gm: float
    frames_present: int
    frames_absent: int

    @property
    def gm(self) -> float:
        return float(np.sqrt(self.tpr * self.tnr))


def score_oxuva(frames: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> OxUvAScore:
    """OxUvA's scores of (overlaps, present, confidence) per run (:func:`frame_scores`)."""
    if not frames:
        raise ValueError("score_oxuva needs at least one run")
    overlaps, present, confidence = (np.concatenate(parts) for parts in zip(*frames, strict=True))
    present = present.astype(bool)
    thresholds, tpr, tnr = oxuva_points(overlaps >= OXUVA_IOU, present, confidence)
    gm = max_geometric_mean(tpr, tnr)
    best = int(np.argmax(np.nan_to_num(gm, nan=-1.0)))
    return OxUvAScore(
        float(tpr[-1]),
        float(tnr[-1]),
        float(gm[-1]),
        float(thresholds[best]),
        float(tpr[best]),
        float(tnr[best]),
        float(gm[best]),
        int(present.sum()),
        int((~present).sum()),
    )
