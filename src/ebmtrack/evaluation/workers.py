"""The worker processes of an evaluation: one pipe each, SIGINT ignored, dying with their
parent; a worker that dies mid-job is replaced and its job reported failed (see
:mod:`ebmtrack.evaluation.runner`)."""

from __future__ import annotations

import ctypes
import logging
import multiprocessing as mp
import os
import pickle
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from multiprocessing import connection as mp_connection
from pathlib import Path

from ebmtrack.evaluation.jobs import LOG, Job, ResultsNotWritten, run_job
from ebmtrack.evaluation.results import remove_unfinished
from ebmtrack.process import DEFAULT_THREADS, configure_threads

__all__ = ["log_failure", "log_skipped", "run_in_workers", "thread_budget"]


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
            run_job(job, out_dir, on_frame, reuse=True)
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
        self.out_dir = out_dir
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
            job = self.job
            if job is not None:  # killed: it may have been writing a result file
                remove_unfinished(
                    self.out_dir, job.tracker.name, job.run, job.sequence.name, job.parameter
                )
        self.conn.close()


def _append_errors(out_dir: Path, entries: dict[str, str]) -> Path:
    """Add ``{label: details}`` to ``OUT/errors.log``; returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with open(out_dir / "errors.log", "a") as log:
        for label, details in entries.items():
            log.write(f"[{stamp}] {label}\n{details.rstrip()}\n\n")
    return out_dir / "errors.log"


def log_failure(out_dir: Path, label: str, details: str) -> None:
    """A job that failed: its details in ``OUT/errors.log``, one warning line."""
    log = _append_errors(out_dir, {label: details})
    last_line = details.strip().splitlines()[-1] if details.strip() else "failed"
    LOG.warning("%s failed: %s (see %s)", label, last_line, log)


def log_skipped(out_dir: Path, problems: dict[str, str]) -> None:
    """Sequences left out as broken (name -> problem): each in ``OUT/errors.log``, one warning
    line for all."""
    log = _append_errors(out_dir, {f"{name} skipped": p for name, p in problems.items()})
    LOG.warning(
        "%d broken sequence(s) skipped: %s (see %s)",
        len(problems),
        "; ".join(problems.values()),
        log,
    )


def _death_note(exit_code: int | None) -> str:
    if exit_code is not None and exit_code < 0:
        try:
            return f"worker process died from signal {signal.Signals(-exit_code).name}"
        except ValueError:
            pass
    return f"worker process died (exit code {exit_code})"


def run_in_workers(
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
