"""VOT's supervised ("baseline") short-term experiment: reset after a failure, then accuracy,
robustness and expected average overlap (EAO).

Protocol (VOT2016-2019's baseline experiment, as the VOT toolkit and pysot run it): the tracker
starts on frame 0's ground truth; a frame whose box does not overlap the ground truth at all
(overlap 0, both boxes bounded to the image) is a **failure**; the tracker is initialised again
on the ground truth ``skip`` = 5 frames later, the frames between are not tracked. A trajectory
is one code or box per frame, as VOT's result files are: ``1`` initialised, ``2`` failed, ``0``
not tracked, otherwise ``x,y,w,h``.

Scores (the definitions of pysot's ``AccuracyRobustnessBenchmark`` and ``EAOBenchmark``):

- **accuracy**: the mean overlap of the tracked frames, leaving out the ``burnin`` = 10 frames
  from each initialisation on (the init frame included); per frame the mean over runs, then the
  mean over all frames of all sequences.
- **robustness**: failures per 100 frames (per run the failures of all sequences over their
  frames, then the mean over runs); **lost** is the number of failures (mean over runs).
- **EAO**: each trajectory is cut into fragments at every re-initialisation (``failure +
  skip``); a fragment that ends in a failure counts overlap 0 for every later length, the
  sequence's last fragment is unknown (left out) beyond its end. The expected overlap curve
  ``phi[L]`` (L = 1, 2, ...) is the weighted mean over the fragments known at length L of their
  mean overlap over frames 1..L (frame 0, the initialisation, left out; ``phi[0]`` = 1), each
  run weighing 1 / runs. EAO is the mean of ``phi`` over the lengths ``low..high`` (VOT's
  "typical sequence lengths"; 1-based as the toolkit gives them, :data:`EAO_INTERVALS`).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ebmtrack.data.datasets import Sequence
from ebmtrack.evaluation import metrics as M

__all__ = [
    "EAO_INTERVALS",
    "FAILURE",
    "INIT",
    "SKIPPED",
    "SupervisedScore",
    "expected_overlap_curve",
    "read_trajectory",
    "score_supervised",
    "track_supervised",
    "trajectory_lines",
    "trajectory_overlaps",
    "write_trajectory",
]

INIT, FAILURE, SKIPPED = 1, 2, 0  # VOT's one-number lines
TRACKED = -1  # a frame with a box (no number of VOT's)
SKIP, BURNIN = 5, 10
# (low, high) sequence lengths of VOT's EAO, as the VOT toolkit estimated them per challenge.
EAO_INTERVALS = {
    "vot2016": (108, 371),
    "vot2017": (100, 356),
    "vot2018": (100, 356),
    "vot2019": (46, 291),
}


def track_supervised(
    tracker,
    sequence: Sequence,
    skip: int = SKIP,
    on_frame: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run ``tracker`` on ``sequence`` with VOT's resets.

    The same tracker object is initialised again after a failure (as the VOT toolkit and pysot
    do). Overlaps for the failure test bound both boxes to the image.

    Returns:
        boxes (N, 4): the box of each tracked frame (the ground truth on init frames), NaN
        elsewhere; codes (N,) int: :data:`INIT`, :data:`FAILURE`, :data:`SKIPPED` or
        :data:`TRACKED`; times (N,): seconds of each ``initialize`` / ``track`` call (0 where
        none ran).
    """
    n = len(sequence)
    boxes = np.full((n, 4), np.nan)
    codes = np.full(n, SKIPPED, dtype=np.int64)
    times = np.zeros(n)
    start_at = 0
    for index in range(n):
        if index < start_at:
            if on_frame is not None:
                on_frame(index)
            continue
        frame = sequence.frame(index)
        truth = sequence.ground_truth[index]
        if index == start_at:
            if not (np.all(np.isfinite(truth)) and truth[2] > 0 and truth[3] > 0):
                start_at += 1  # no box to start from: try the next frame
            else:
                began = time.perf_counter()
                tracker.initialize(frame, tuple(float(v) for v in truth))
                times[index] = time.perf_counter() - began
                boxes[index], codes[index] = truth, INIT
        else:
            began = time.perf_counter()
            box = np.asarray(tracker.track(frame).box, dtype=np.float64).reshape(4)
            times[index] = time.perf_counter() - began
            height, width = frame.shape[:2]
            overlap = _bounded_iou(box[None], truth[None], width, height)[0]
            if overlap > 0 or not np.all(np.isfinite(truth)):
                boxes[index], codes[index] = box, TRACKED
            else:
                codes[index] = FAILURE
                start_at = index + skip
        if on_frame is not None:
            on_frame(index)
    return boxes, codes, times


def _bounded_iou(pred: np.ndarray, truth: np.ndarray, width: float, height: float) -> np.ndarray:
    return M.box_iou(M.clip_to_image(pred, width, height), M.clip_to_image(truth, width, height))


def trajectory_lines(boxes: np.ndarray, codes: np.ndarray) -> list[str]:
    """The lines of a VOT result file: ``1`` / ``2`` / ``0`` or ``x,y,w,h`` per frame."""
    return [
        ",".join(f"{v:.4f}" for v in box) if code == TRACKED else str(int(code))
        for box, code in zip(boxes, codes)
    ]


def write_trajectory(path: str | Path, boxes: np.ndarray, codes: np.ndarray) -> None:
    """A VOT result file (:func:`trajectory_lines`)."""
    Path(path).write_text("\n".join(trajectory_lines(boxes, codes)) + "\n")


def read_trajectory(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(boxes (N, 4), codes (N,)) of a VOT result file (:func:`write_trajectory`'s format, also
    pysot's ``baseline/SEQ/SEQ_001.txt``; an init line's box is not stored, NaN)."""
    path = Path(path)
    rows = [line.replace("\t", ",").replace(" ", ",") for line in path.read_text().splitlines()]
    boxes = np.full((len(rows), 4), np.nan)
    codes = np.full(len(rows), TRACKED, dtype=np.int64)
    for i, row in enumerate(rows):
        values = [float(v) for v in row.split(",") if v]
        if len(values) == 1 and values[0] in (INIT, FAILURE, SKIPPED):
            codes[i] = int(values[0])
        elif len(values) == 4:
            boxes[i] = values
        else:
            raise ValueError(f"{path}, line {i + 1}: expected 1, 2, 0 or x,y,w,h, got {row!r}")
    return boxes, codes


def trajectory_overlaps(
    boxes: np.ndarray,
    codes: np.ndarray,
    sequence: Sequence,
    image_size: tuple[int, int],
    burnin: int = 0,
) -> np.ndarray:
    """Overlap (N,) of each tracked frame with the ground truth, both bounded to the image
    (``image_size`` = width, height); NaN on code frames, unknown ground truth and the
    ``burnin`` frames from each initialisation on."""
    n = min(len(codes), len(sequence))
    truth = sequence.ground_truth[:n]
    overlaps = np.full(n, np.nan)
    tracked = (codes[:n] == TRACKED) & np.all(np.isfinite(truth), axis=1)
    width, height = image_size
    overlaps[tracked] = _bounded_iou(boxes[:n][tracked], truth[tracked], width, height)
    for start in np.flatnonzero(codes[:n] == INIT):
        overlaps[start : start + burnin] = np.nan
    return overlaps


def _fragments(overlaps: np.ndarray, codes: np.ndarray, skip: int, length: int):
    """(fragment (length,), known) rows of one trajectory for the expected-overlap curve."""
    failures = np.flatnonzero(codes == FAILURE)
    if failures.size == 0:
        row = np.full(length, np.nan)
        row[: len(overlaps)] = overlaps[:length]
        return [row]
    points = [0] + [int(f) + skip for f in failures if f + skip <= len(overlaps)]
    rows = []
    for i, start in enumerate(points):
        last = i == len(points) - 1
        piece = overlaps[start:] if last else overlaps[start : points[i + 1] + 1]
        row = np.full(length, np.nan) if last else np.zeros(length)  # a failure: 0 from then on
        row[: len(piece)] = np.nan_to_num(piece[:length], nan=0.0)
        rows.append(row)
    return rows


def expected_overlap_curve(rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``phi`` (L,) from fragments (F, L) (NaN where a fragment is unknown) and their weights
    (F,): ``phi[0]`` = 1, ``phi[l]`` = the weighted mean over fragments known at ``l`` of
    their mean over columns 1..l."""
    rows = np.asarray(rows, dtype=np.float64)
    phi = np.full(rows.shape[1], np.nan)
    phi[0] = 1.0
    means = np.cumsum(np.nan_to_num(rows[:, 1:]), axis=1) / np.arange(1, rows.shape[1])
    for length in range(1, rows.shape[1]):
        known = ~np.isnan(rows[:, length])
        if known.any():
            phi[length] = np.sum(means[known, length - 1] * weights[known]) / np.sum(
                weights[known]
            )
    return phi


@dataclass(frozen=True)
class SupervisedScore:
    """One tracker's supervised scores: accuracy (mean overlap), robustness (failures per 100
    frames), lost (failures, mean over runs), EAO, and the expected-overlap curve."""

    accuracy: float
    robustness: float
    lost: float
    eao: float
    curve: np.ndarray
    frames: int

    def summary(self) -> dict[str, float]:
        return {
            "accuracy": self.accuracy,
            "robustness": self.robustness,
            "lost": self.lost,
            "eao": self.eao,
        }


def score_supervised(
    trajectories: dict[str, list[tuple[np.ndarray, np.ndarray]]],
    sequences: Seq[Sequence],
    image_sizes: dict[str, tuple[int, int]],
    interval: tuple[int, int] = EAO_INTERVALS["vot2018"],
    burnin: int = BURNIN,
    skip: int = SKIP,
) -> SupervisedScore:
    """Accuracy, robustness, lost and EAO (module docstring) of ``trajectories``: per sequence
    name a list (one per run) of (boxes, codes); ``image_sizes`` (width, height) per sequence;
    ``interval`` the (low, high) sequence lengths of EAO, 1-based."""
    by_name = {s.name: s for s in sequences}
    runs = max(len(t) for t in trajectories.values())
    pooled, failures, frames = [], np.zeros(runs), np.zeros(runs)
    rows, weights = [], []
    length = max(len(by_name[n]) for n in trajectories)
    for name, tracks in trajectories.items():
        sequence, size = by_name[name], image_sizes[name]
        accurate = [trajectory_overlaps(b, c, sequence, size, burnin) for b, c in tracks]
        with warnings.catch_warnings():  # frames no run tracked: NaN, said once below
            warnings.simplefilter("ignore", RuntimeWarning)
            pooled.append(np.nanmean(np.stack(accurate), axis=0))
        for run, (boxes, codes) in enumerate(tracks):
            failures[run] += np.count_nonzero(codes == FAILURE)
            frames[run] += len(codes)
            plain = trajectory_overlaps(boxes, codes, sequence, size, burnin=0)
            for row in _fragments(plain, codes, skip, length):
                rows.append(row)
                weights.append(1.0 / len(tracks))
    values = np.concatenate(pooled)
    phi = expected_overlap_curve(np.array(rows), np.array(weights))
    low, high = interval
    window = phi[low - 1 : high]
    window = window[~np.isnan(window)]
    return SupervisedScore(
        accuracy=float(np.nanmean(values)) if np.isfinite(values).any() else math.nan,
        robustness=float(np.mean(100 * failures / frames)),
        lost=float(np.mean(failures)),
        eao=float(window.mean()) if window.size else math.nan,
        curve=phi,
        frames=int(frames.sum()),
    )
