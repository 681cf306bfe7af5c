"""Run trackers over sequences (one-pass evaluation), in worker processes, resumably.

Each (tracker, run, sequence) is one job. A finished job leaves its result files (see
:mod:`ebmtrack.evaluation.results`), so a second call skips it. A job that raises is logged to
``OUT/errors.log`` and as a one-line warning; a job that kills its worker process (some OpenCV
trackers segfault) is logged the same way and the worker is replaced. Other jobs go on.

Interruptions: workers ignore SIGINT (Ctrl-C reaches the whole process group; the parent alone
decides), and die with their parent (Linux: a parent-death signal; elsewhere they notice the
closed pipe). When the parent is interrupted (KeyboardInterrupt, or a SIGTERM turned into one
by the caller) it stops its workers at once, mid-job: result files are written atomically, box
file last, so the results folder holds finished sequences only and a later call resumes.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing as mp
import os
import pickle
import random
import signal
import sys
import time
import traceback
import zlib
from collections import deque
from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from datetime import datetime, timezone
from multiprocessing import connection as mp_connection
from pathlib import Path

import cv2
import numpy as np
from tqdm import tqdm

from ebmtrack.data.datasets import Sequence
from ebmtrack.data.prefetch import prefetch
from ebmtrack.evaluation.results import (
    PARAMETER_NAME,
    SUPERVISED_NAME,
    has_result,
    options_mismatch,
    read_options,
    record_options,
    recorded_value,
    write_result,
    write_trajectory_result,
)
from ebmtrack.evaluation.vot import track_supervised, trajectory_lines
from ebmtrack.process import DEFAULT_THREADS, configure_threads
from ebmtrack.tracking.base import Tracker, TrackResult
from ebmtrack.tracking.init_box import clip_init_box
from ebmtrack.tracking.registry import TrackerFactory

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


def run_job(job: Job, out_dir: Path, on_frame: Callable[[int], None] | None = None) -> None:
    """Track one sequence, with the generators seeded by :func:`job_seed`, and write its results
    (with each frame's score and confidence)."""
    tracker = job.tracker.create()
    _seed_generators(job_seed(job.run, job.sequence.name))
    name, run, sequence = job.tracker.name, job.run, job.sequence.name
    scores = np.full((len(job.sequence), 2), np.nan)

    def on_result(index: int, result: TrackResult) -> None:
        scores[index] = (result.score, getattr(result, "confidence", np.nan))

    if job.experiment == "supervised":
        boxes, codes, times = track_supervised(tracker, job.sequence, on_frame=on_frame)
    else:
        boxes, times = track_sequence(tracker, job.sequence, on_frame, on_result)
    try:
        if job.experiment == "supervised":
            lines = trajectory_lines(boxes, codes)
            write_trajectory_result(out_dir, name, run, sequence, lines, times)
        else:
            write_result(out_dir, name, run, sequence, boxes, times, scores)
    except OSError as err:
        raise ResultsNotWritten(
            f"cannot write results to {out_dir}: {err.strerror or err}"
        ) from err


def thread_budget(workers: int) -> int:
    """Threads per worker: the trackers' default (:data:`~ebmtrack.process.
    DEFAULT_THREADS`, one: it holds its speed on a busy machine, where threads that wait for
    each other do not), fewer if the workers together would use more than the CPU cores we may
    run on. More workers, not more threads, use more cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(DEFAULT_THREADS, (cores or 1) // max(1, workers)))


# Messages from a worker: ("frames", n) while it tracks, ("done", label, error or None) at the
# end, or ("fatal", label, message) when results cannot be written.
_PROGRESS_SECONDS = 0.2


def _die_with_parent(parent: int) -> None:
    """Have the kernel send SIGTERM to this process when its parent dies (Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (AttributeError, OSError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _on_worker_sigterm(signum, frame) -> None:
    # Unwind (an atomic write in progress removes its temporary file), then exit.
    raise SystemExit(128 + signum)


def _worker_main(conn, out_dir: Path, threads: int, parent: int, log_formatter) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, _on_worker_sigterm)
    _die_with_parent(parent)
    if log_formatter is not None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(log_formatter)
        logging.getLogger().handlers[:] = [handler]
    while True:
        try:
            job = conn.recv()
        except EOFError:  # the parent is gone
            return
        if job is None:
            return
        reported, last = 0, time.monotonic()

        def on_frame(index: int) -> None:
            nonlocal reported, last
            now = time.monotonic()
            if now - last >= _PROGRESS_SECONDS:
                conn.send(("frames", index + 1 - reported))
                reported, last = index + 1, now

        try:
            configure_threads(threads)
            run_job(job, out_dir, on_frame)
            conn.send(("done", job.label, None))
        except ResultsNotWritten as err:
            conn.send(("fatal", job.label, str(err)))
        except Exception:
            conn.send(("done", job.label, traceback.format_exc()))


def _log_formatter() -> logging.Formatter | None:
    """The formatter of this process's first log handler, for workers to log alike (None when
    there is none or it cannot be sent to another process)."""
    handlers = logging.getLogger().handlers
    try:
        return pickle.loads(pickle.dumps(handlers[0].formatter)) if handlers else None
    except Exception:
        return None


class _Worker:
    """A worker process with a pipe of its own, so that we know which job it holds when it dies.

    Nothing is shared between workers: a worker that dies mid-write (a tracker crashing in C
    code) can leave no lock held that would stall the others, as a shared results queue could.
    """

    def __init__(self, ctx, out_dir: Path, threads: int) -> None:
        self.conn, child = ctx.Pipe()
        args = (child, out_dir, threads, os.getpid(), _log_formatter())
        self.process = ctx.Process(target=_worker_main, args=args, daemon=True)
        # Started with SIGINT ignored, which the new interpreter keeps until _worker_main: a
        # Ctrl-C while it imports would otherwise print its traceback.
        try:
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # not the main thread
            previous = None
        try:
            self.process.start()
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        child.close()  # the parent keeps its end only, so a dead worker reads as EOF
        self.job: Job | None = None

    def give(self, job: Job) -> None:
        self.job = job
        self.frames = 0  # frames of the job reported so far
        self.conn.send(job)

    def message(self) -> tuple | None:
        """The worker's next message (see ``_worker_main``), or None when it died."""
        try:
            return self.conn.recv()
        except (EOFError, OSError, pickle.UnpicklingError):
            return None

    def stop(self, now: bool = False) -> None:
        """End the worker: after its job, or ``now`` (SIGTERM, then SIGKILL after 3 s)."""
        if self.process.is_alive() and not now:
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=3)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def _log_failure(out_dir: Path, label: str, details: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with open(out_dir / "errors.log", "a") as log:
        log.write(f"[{stamp}] {label}\n{details.rstrip()}\n\n")
    last_line = details.strip().splitlines()[-1] if details.strip() else "failed"
    LOG.warning("%s failed: %s (see %s)", label, last_line, out_dir / "errors.log")


def recorded_options(spec: TrackerSpec) -> dict[str, str]:
    """The options of ``spec`` that change what the tracker does: those the caller gave, less
    those equal to the tracker's default (:func:`~ebmtrack.tracking.registry.default_options`),
    values as :func:`~ebmtrack.evaluation.results.recorded_value` writes them, sorted by name."""
    from ebmtrack.tracking.registry import default_options

    try:
        defaults = default_options(spec.tracker or spec.name)
    except ValueError:  # a factory given directly, not through the registry
        defaults = {}
    recorded = {}
    for key, value in sorted(spec.options.items()):
        if key in defaults and recorded_value(defaults[key]) == recorded_value(value):
            continue
        recorded[key] = recorded_value(value)
    return recorded


def check_recorded_options(out_dir: str | Path, spec: TrackerSpec) -> None:
    """Raise ValueError unless ``out_dir`` holds results of ``spec`` made with its options."""
    before = read_options(out_dir, spec.name)
    if before is None:
        raise ValueError(f"{out_dir} holds no results of {spec.name}")
    if before != recorded_options(spec):
        raise options_mismatch(out_dir, spec.name, before, recorded_options(spec))


def _check_same_options(out_dir: Path, spec: TrackerSpec) -> None:
    """Record the tracker's options beside its results; refuse to mix results of other options
    (:func:`~ebmtrack.evaluation.results.record_options`)."""
    record_options(out_dir, spec.name, recorded_options(spec))


def shard_jobs(jobs: Seq[Job], shard: tuple[int, int]) -> list[Job]:
    """Share ``k`` of ``n`` (1-based) of ``jobs``: jobs ordered by frames (most first, then
    label) go one by one to the share with the fewest frames so far (the lowest-numbered on a
    tie). The same jobs give the same shares on every machine; together the shares are the
    jobs, each once."""
    k, n = shard
    if not 1 <= k <= n:
        raise ValueError(f"shard must be K/N with 1 <= K <= N, got {k}/{n}")
    loads = [0] * n
    mine = []
    for job in sorted(jobs, key=lambda j: (-len(j.sequence), j.label)):
        target = loads.index(min(loads))
        loads[target] += len(job.sequence)
        if target == k - 1:
            mine.append(job)
    return mine


def run_evaluation(
    trackers: Seq[TrackerSpec],
    sequences: Seq[Sequence],
    out_dir: str | Path,
    runs: int = 1,
    workers: int = 1,
    progress: bool = True,
    threads: int | None = None,
    shard: tuple[int, int] | None = None,
    experiment: str = "ope",
) -> RunSummary:
    """Run every tracker ``runs`` times on every sequence; skip what ``out_dir`` already has.

    Args:
        workers: number of worker processes, each with :func:`thread_budget` threads (one by
            default: more workers, not more threads, use more cores). 0 runs the jobs in this
            process (no protection against crashing trackers).
        progress: show a tqdm bar over the frames to track.
        threads: torch / OpenCV / ONNX Runtime threads of each worker process, or of this
            process with ``workers=0`` (None: :func:`thread_budget`; 0: the libraries'
            defaults).
        shard: ``(k, n)``: run only share k of n of the jobs (:func:`shard_jobs`), as one
            task of an array job; every share writes into the same layout.
        experiment: ``ope`` (one pass, ``default_RRR`` folders) or ``supervised`` (VOT's
            resets, ``baseline_RRR`` folders of VOT trajectories).
    """
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    if workers < 0:
        raise ValueError(f"workers must be >= 0, got {workers}")
    out_dir = Path(out_dir)
    for spec in trackers:
        _check_same_options(out_dir, spec)
    summary = RunSummary()
    pending: deque[Job] = deque()
    if experiment not in ("ope", "supervised"):
        raise ValueError(f"experiment must be 'ope' or 'supervised', got {experiment!r}")
    jobs = [
        Job(s, r, q, experiment) for s in trackers for r in range(runs) for q in sequences
    ]
    for job in jobs if shard is None else shard_jobs(jobs, shard):
        if has_result(out_dir, job.tracker.name, job.run, job.sequence.name, job.parameter):
            summary.skipped.append(job.label)
        else:
            pending.append(job)
    frames = sum(len(job.sequence) for job in pending)
    # Counted in frames, so that the bar moves from the first frame, not per finished sequence.
    with tqdm(total=frames, disable=not progress, unit="frame", desc="eval") as bar:
        jobs_total, jobs_done = len(pending) + len(summary.skipped), len(summary.skipped)

        def finish(job: Job, error: str | None, reported: int) -> None:
            nonlocal jobs_done
            if error is None:
                summary.done.append(job.label)
            else:
                summary.failed.append(job.label)
                _log_failure(out_dir, job.label, error)
            jobs_done += 1
            bar.set_postfix_str(f"{jobs_done}/{jobs_total} sequence runs", refresh=False)
            bar.update(len(job.sequence) - reported)

        if workers == 0:
            configure_threads(thread_budget(1) if threads is None else threads)
            for job in pending:
                reported = 0

                def on_frame(index: int) -> None:
                    nonlocal reported
                    reported = index + 1
                    bar.update()

                try:
                    run_job(job, out_dir, on_frame)
                    finish(job, None, reported)
                except ResultsNotWritten:
                    raise
                except Exception:
                    finish(job, traceback.format_exc(), reported)
        else:
            _run_in_workers(pending, out_dir, workers, threads, finish, bar.update)
    return summary


def _death_note(exit_code: int | None) -> str:
    if exit_code is not None and exit_code < 0:
        try:
            return f"worker process died from signal {signal.Signals(-exit_code).name}"
        except ValueError:
            pass
    return f"worker process died (exit code {exit_code})"


def _run_in_workers(
    pending: deque[Job],
    out_dir: Path,
    workers: int,
    threads: int | None,
    finish,
    advance: Callable[[int], None],
) -> None:
    ctx = mp.get_context("spawn")  # fork is unsafe with threaded libraries (torch, OpenMP)
    threads = thread_budget(workers) if threads is None else threads
    pool = [_Worker(ctx, out_dir, threads) for _ in range(min(workers, len(pending)))]
    interrupted = True
    try:
        while True:
            for i, worker in enumerate(pool):
                if worker.job is None and pending:
                    try:
                        worker.give(pending[0])
                    except OSError:  # it died while idle: a new worker takes the job
                        worker.job = None
                        worker.stop()
                        pool[i] = worker = _Worker(ctx, out_dir, threads)
                        worker.give(pending[0])
                    pending.popleft()
            busy = [worker for worker in pool if worker.job is not None]
            if not busy:
                break
            # A message and an exit both wake us; the timeout keeps Ctrl-C responsive.
            mp_connection.wait([w.conn for w in busy] + [w.process.sentinel for w in busy], 1.0)
            for worker in busy:
                message = ("frames", 0)
                while message is not None and message[0] == "frames" and worker.conn.poll():
                    message = worker.message()
                    if message is not None and message[0] == "frames":
                        worker.frames += message[1]
                        advance(message[1])
                if message is not None and message[0] == "frames" and worker.process.is_alive():
                    continue  # still tracking
                job, worker.job = worker.job, None
                if message is not None and message[0] == "fatal":
                    raise ResultsNotWritten(message[2])
                if message is not None and message[0] == "done":
                    finish(job, message[2], worker.frames)
                else:  # it died without a word
                    worker.process.join()
                    finish(job, _death_note(worker.process.exitcode), worker.frames)
                    worker.stop()
                    pool[pool.index(worker)] = _Worker(ctx, out_dir, threads)
        interrupted = False
    finally:
        # Interrupted (Ctrl-C, SIGTERM, an error here): stop the workers mid-job, now.
        for worker in pool:
            worker.stop(now=interrupted)
