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

import traceback
from collections import deque
from collections.abc import Sequence as Seq
from pathlib import Path

from tqdm import tqdm

from ebmtrack.data.datasets import Sequence
from ebmtrack.evaluation.jobs import (
    Job,
    ResultsNotWritten,
    RunSummary,
    TrackerSpec,
    job_seed,
    run_job,
    track_sequence,
)
from ebmtrack.evaluation.provenance import record_provenance
from ebmtrack.evaluation.results import (
    has_result,
    options_mismatch,
    read_options,
    record_options,
    recorded_value,
)
from ebmtrack.evaluation.tracker_cache import clear as clear_trackers
from ebmtrack.evaluation.workers import log_failure, run_in_workers, thread_budget
from ebmtrack.process import configure_threads

__all__ = [
    "Job",
    "ResultsNotWritten",
    "RunSummary",
    "TrackerSpec",
    "check_recorded_options",
    "job_seed",
    "recorded_options",
    "run_evaluation",
    "run_job",
    "shard_jobs",
    "thread_budget",
    "track_sequence",
]


def recorded_options(spec: TrackerSpec) -> dict[str, str]:
    """The options of ``spec`` that change what the tracker does: those the caller gave, less
    those equal to the tracker's default (:func:`~ebmtrack.tracking.registry.default_options`),
    values as :func:`~ebmtrack.evaluation.results.recorded_value` writes them, sorted by name."""
    from ebmtrack.tracking.registry import default_options

    try:
        defaults = default_options(spec.tracker or spec.name)
    except (ValueError, ImportError):  # a factory given directly; a torch tracker's without torch
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
    provenance: dict[str, dict] | None = None,
    ray: bool | str = False,
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
        provenance: what each tracker is, by name (:func:`~ebmtrack.evaluation.provenance.
            tracker_provenance`): recorded beside its results (``provenance.json``) once its
            options are accepted, before any job runs, so that an interrupted run has it.
        ray: run every job as a Ray task (:mod:`ebmtrack.evaluation.distributed`) instead of
            in ``workers``: True on the cluster this process joined (or a local Ray), a string
            on the cluster at that address. The same result files.
    """
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    if workers < 0:
        raise ValueError(f"workers must be >= 0, got {workers}")
    out_dir = Path(out_dir)
    for spec in trackers:
        _check_same_options(out_dir, spec)
    for name, info in (provenance or {}).items():
        try:
            record_provenance(out_dir, name, info)
        except OSError as err:  # as a result file that cannot be written: nothing can be
            raise ResultsNotWritten(
                f"cannot write results to {out_dir}: {err.strerror or err}"
            ) from None
    summary = RunSummary()
    pending: deque[Job] = deque()
    if experiment not in ("ope", "supervised"):
        raise ValueError(f"experiment must be 'ope' or 'supervised', got {experiment!r}")
    jobs = [Job(s, r, q, experiment) for s in trackers for r in range(runs) for q in sequences]
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
                log_failure(out_dir, job.label, error)
            jobs_done += 1
            bar.set_postfix_str(f"{jobs_done}/{jobs_total} sequence runs", refresh=False)
            bar.update(len(job.sequence) - reported)

        if ray is not False:
            from ebmtrack.evaluation.distributed import connect_ray, run_on_ray

            connect_ray(ray if isinstance(ray, str) else None)
            run_on_ray(pending, out_dir, 1 if threads is None else threads, finish)
        elif workers == 0:
            configure_threads(thread_budget(1) if threads is None else threads)
            try:
                for job in pending:
                    reported = 0

                    def on_frame(index: int) -> None:
                        nonlocal reported
                        reported = index + 1
                        bar.update()

                    try:
                        run_job(job, out_dir, on_frame, reuse=True)
                        finish(job, None, reported)
                    except ResultsNotWritten:
                        raise
                    except Exception:
                        finish(job, traceback.format_exc(), reported)
            finally:
                clear_trackers()  # this process keeps no tracker after its evaluation
        else:
            run_in_workers(pending, out_dir, workers, threads, finish, bar.update)
    return summary
