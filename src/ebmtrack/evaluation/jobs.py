"""One evaluation job: a tracker, a run and a sequence tracked in one pass (or with VOT's
resets), the global generators seeded per job, the results written atomically
(:mod:`ebmtrack.evaluation.results`). :mod:`ebmtrack.evaluation.runner` runs many, in worker
processes (:mod:`ebmtrack.evaluation.workers`)."""

from __future__ import annotations

import logging
import random
import sys
import time
import zlib
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from ebmtrack.data.datasets import Sequence
from ebmtrack.data.prefetch import prefetch
from ebmtrack.evaluation.results import (
    PARAMETER_NAME,
    SUPERVISED_NAME,
    write_result,
    write_trajectory_result,
)
from ebmtrack.evaluation.tracker_cache import lend
from ebmtrack.evaluation.vot import track_supervised, trajectory_lines
from ebmtrack.tracking.base import Tracker, TrackResult
from ebmtrack.tracking.init_box import clip_init_box
from ebmtrack.tracking.registry import TrackerFactory

__all__ = [
    "LOG",
    "Job",
    "ResultsNotWritten",
    "RunSummary",
    "TrackerSpec",
    "job_seed",
    "run_job",
    "track_sequence",
]

LOG = logging.getLogger("ebmtrack.evaluation")


class ResultsNotWritten(OSError):
    """A result file could not be written (full disk, no permission): every other job would
    fail the same way, so the evaluation stops."""


@dataclass(frozen=True)
class TrackerSpec:
    """A tracker to evaluate: the name its results are filed under, its factory and options.

    The factory must be picklable (see :mod:`ebmtrack.tracking.registry`). ``tracker`` is the
    registered name when it differs from ``name``, as for a named variant (``atom@s256``: the
    results of ``atom`` with other options, filed apart); its option defaults decide which
    options are recorded (see :func:`recorded_options`).
    """

    name: str
    factory: TrackerFactory
    options: dict = field(default_factory=dict)
    tracker: str = ""

    def create(self) -> Tracker:
        return self.factory(**self.options)


@dataclass(frozen=True)
class Job:
    """One tracker, run and sequence; ``experiment`` ``ope`` (one pass) or ``supervised``
    (VOT's resets, :mod:`ebmtrack.evaluation.vot`)."""

    tracker: TrackerSpec
    run: int
    sequence: Sequence
    experiment: str = "ope"

    @property
    def parameter(self) -> str:
        return SUPERVISED_NAME if self.experiment == "supervised" else PARAMETER_NAME

    @property
    def label(self) -> str:
        return f"{self.tracker.name} run {self.run} {self.sequence.name}"


@dataclass
class RunSummary:
    """What :func:`run_evaluation` did: job labels done now, skipped (done before), failed."""

    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def track_sequence(
    tracker: Tracker,
    sequence: Sequence,
    on_frame: Callable[[int], None] | None = None,
    on_result: Callable[[int, TrackResult], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One-pass evaluation: initialise on frame 1's ground truth, then track every frame.

    Returns boxes (N, 4), row 0 = the init box (clipped to the frame by
    :func:`~ebmtrack.tracking.init_box.clip_init_box`), and per-frame seconds (N,) of
    ``initialize`` / ``track`` alone (image reading excluded). ``on_frame(index)`` is called
    after each frame, ``on_result(index, result)`` with each tracked frame's result.
    """
    # Decoded ahead in a thread, beside the tracker; the reader stops when the loop ends.
    frames = prefetch(sequence.frame(index) for index in range(len(sequence)))
    first = next(frames)
    init_box = clip_init_box(sequence.init_box, first.shape, f"{sequence.name} init box")
    boxes = np.empty((len(sequence), 4))
    times = np.empty(len(sequence))
    start = time.perf_counter()
    tracker.initialize(first, init_box)
    times[0] = time.perf_counter() - start
    boxes[0] = init_box
    if on_frame is not None:
        on_frame(0)
    for index, frame in enumerate(frames, start=1):
        start = time.perf_counter()
        result = tracker.track(frame)
        times[index] = time.perf_counter() - start
        boxes[index] = np.asarray(result.box, dtype=np.float64).reshape(4)
        if on_result is not None:
            on_result(index, result)
        if on_frame is not None:
            on_frame(index)
    return boxes, times


def job_seed(run: int, sequence: str) -> int:
    """The seed of one run on one sequence: the same whichever worker runs it, new per run."""
    return zlib.crc32(f"{run}/{sequence}".encode()) & 0x7FFFFFFF  # cv2 takes a C int


def _seed_generators(seed: int) -> None:
    # Trackers may draw from any of these global generators; seeding them per job makes a run
    # independent of which jobs the worker ran before (OpenCV's MIL/TLD/Boosting use internal
    # generators that cv2.setRNGSeed does not reach: they stay order-dependent).
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002  (the legacy global generator, as trackers use it)
    cv2.setRNGSeed(seed)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


def run_job(
    job: Job,
    out_dir: Path,
    on_frame: Callable[[int], None] | None = None,
    reuse: bool = False,
) -> None:
    """Track one sequence, with the generators seeded by :func:`job_seed`, and write its results
    (with each frame's score, confidence and status). ``reuse``: take the tracker an earlier
    job of this process left where it is the same, and leave this one for the next
    (:mod:`ebmtrack.evaluation.tracker_cache`; the workers' route)."""
    spec = job.tracker
    lent = lend(spec.factory, spec.options) if reuse else nullcontext(spec.create)
    name, run, sequence = spec.name, job.run, job.sequence.name
    scores = np.full((len(job.sequence), 2), np.nan)
    statuses = np.full(len(job.sequence), "init", dtype=object)

    def on_result(index: int, result: TrackResult) -> None:
        scores[index] = (result.score, getattr(result, "confidence", np.nan))
        status = getattr(result.status, "value", result.status)
        statuses[index] = "_".join(str(status).split()) or "unknown"

    with lent as make:
        tracker = make()
        _seed_generators(job_seed(job.run, job.sequence.name))
        if job.experiment == "supervised":
            boxes, codes, times = track_supervised(tracker, job.sequence, on_frame=on_frame)
        else:
            boxes, times = track_sequence(tracker, job.sequence, on_frame, on_result)
    try:
        if job.experiment == "supervised":
            lines = trajectory_lines(boxes, codes)
            write_trajectory_result(out_dir, name, run, sequence, lines, times)
        else:
            write_result(out_dir, name, run, sequence, boxes, times, scores, statuses)
    except OSError as err:
        raise ResultsNotWritten(
            f"cannot write results to {out_dir}: {err.strerror or err}"
        ) from err
