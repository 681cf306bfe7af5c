"""Tasks on a Ray cluster, or in local worker processes, streamed: at most ``in_flight`` tasks
are submitted at a time, so the driver's memory stays flat however many there are.

A task is a picklable function called with picklable arguments (paths and numbers: frames are
decoded inside the worker, never passed through the object store). Each runs with one CPU and
is retried by Ray (``max_retries``) when its worker dies mid-task; its outputs are written
atomically, so a retried or interrupted task never leaves a partial file taken for a finished
one, and a rerun skips what is done.

:func:`run_on_ray` runs the jobs of an evaluation (:mod:`ebmtrack.evaluation.runner`) this way:
the same jobs, the same result files.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from ebmtrack.evaluation.jobs import Job, ResultsNotWritten, run_job
from ebmtrack.process import configure_threads

__all__ = [
    "MAX_RETRIES",
    "connect_ray",
    "run_on_ray",
    "stream_local",
    "stream_ray",
]

MAX_RETRIES = 3  # a task whose worker dies is run again, up to this many times


def connect_ray(address: str | None) -> None:
    """Join the cluster at ``address`` (``auto``: the one ``ray start`` began on this machine),
    or start a local Ray with no address; nothing when this process has joined one already.
    ModuleNotFoundError (``name`` ``ray``) without Ray."""
    import ray

    if ray.is_initialized():
        return
    # Each task sets its own threads; the workers get the driver's environment (its PYTHONPATH
    # included), with ONNX Runtime's and OpenMP's thread pools held to one thread.
    env = {"OMP_NUM_THREADS": "1"}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    previous = signal.getsignal(signal.SIGTERM)
    ray.init(
        address=address or None,
        include_dashboard=False if address is None else None,
        log_to_driver=False,
        logging_level=logging.ERROR,  # its start-up lines; the command says what matters
        runtime_env={"env_vars": env},
    )
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous)  # the caller's (Ray's logs and exits at once)


def _local_worker() -> None:
    """A local worker process: Ctrl-C is the driver's to handle; SIGTERM unwinds (an output
    being written is kept as ``PATH.partial``, never taken for a finished one)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _call(fn: Callable, args: tuple, threads: int):
    """A task's body in a worker: ``fn(*args)`` with ``threads`` library threads."""
    configure_threads(threads)
    return fn(*args)


def stream_ray(
    fn: Callable,
    tasks: Iterable[tuple[object, tuple]],
    on_done: Callable[[object, object, str | None], None],
    threads: int = 1,
    in_flight: int | None = None,
) -> None:
    """Run ``fn(*args)`` for each ``(key, args)`` of ``tasks`` on the Ray cluster joined by
    :func:`connect_ray`, one CPU each; ``on_done(key, value, error)`` as each ends (``error``:
    None, or the last line of what it raised, or the worker's death after its retries).
    ``in_flight``: tasks submitted at a time (default: twice the cluster's CPUs)."""
    import ray

    if in_flight is None:
        in_flight = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
    remote = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)(_call)
    running: dict = {}
    tasks = iter(tasks)
    try:
        while True:
            while len(running) < in_flight:
                item = next(tasks, None)
                if item is None:
                    break
                key, args = item
                running[remote.remote(fn, args, threads)] = key
            if not running:
                return
            ready, _ = ray.wait(list(running), num_returns=1)
            for ref in ready:
                key = running.pop(ref)
                try:
                    value, error = ray.get(ref), None
                except ray.exceptions.RayTaskError as err:
                    value, error = None, _last_line(str(err.cause or err))
                except ray.exceptions.RayError as err:
                    value, error = None, _last_line(str(err)) or type(err).__name__
                on_done(key, value, error)
    finally:
        for ref in running:  # interrupted: what runs is stopped, its outputs are atomic
            ray.cancel(ref, force=True)


def stream_local(
    fn: Callable,
    tasks: Iterable[tuple[object, tuple]],
    on_done: Callable[[object, object, str | None], None],
    workers: int = 1,
    threads: int = 1,
) -> None:
    """:func:`stream_ray` in ``workers`` local processes (spawned); a task whose process dies
    fails (with the others then running), and new processes take the rest."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # fork is unsafe with threaded libraries
    tasks = iter(tasks)
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_local_worker)
    running: dict = {}
    try:
        while True:
            while len(running) < 2 * workers:
                item = next(tasks, None)
                if item is None:
                    break
                key, args = item
                running[pool.submit(_call, fn, args, threads)] = key
            if not running:
                return
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            broken = False
            for future in finished:
                key = running.pop(future)
                try:
                    value, error = future.result(), None
                except BrokenProcessPool:
                    value, error, broken = None, "worker process died", True
                except Exception as err:
                    value, error = None, _last_line(f"{type(err).__name__}: {err}")
                on_done(key, value, error)
            if broken:
                for key in running.values():
                    on_done(key, None, "worker process died")
                running.clear()
                pool.shutdown(wait=False, cancel_futures=True)
                pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_local_worker)
    finally:
        processes = list((getattr(pool, "_processes", None) or {}).values())
        if running:  # interrupted: the workers stop now
            for process in processes:
                process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _eval_task(job: Job, out_dir: Path) -> tuple[str, str | None]:
    """One evaluation job in a worker: ``("done", None)``, ``("done", traceback)`` when it
    failed, ``("fatal", message)`` when results cannot be written."""
    try:
        run_job(job, out_dir, reuse=True)  # a Ray worker keeps its tracker for the next
        return "done", None
    except ResultsNotWritten as err:
        return "fatal", str(err)
    except Exception:
        return "done", traceback.format_exc()


def run_on_ray(pending: Iterable[Job], out_dir: Path, threads: int, finish) -> None:
    """The jobs of an evaluation as Ray tasks; ``finish(job, error, 0)`` as each ends (the
    runner's bookkeeping); ResultsNotWritten stops the run."""

    def on_done(job: Job, value, error: str | None) -> None:
        if error is not None:
            finish(job, error, 0)
        elif value[0] == "fatal":
            raise ResultsNotWritten(value[1])
        else:
            finish(job, value[1], 0)

    stream_ray(_eval_task, ((job, (job, out_dir)) for job in pending), on_done, threads)
