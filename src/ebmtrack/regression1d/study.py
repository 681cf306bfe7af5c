"""The 1-D regression study of section 4.1: many independent runs, resumable, in parallel.

Each finished run is one small JSON file (plus the trained weights as safetensors) under
``<out>/runs/``, written atomically, so an interrupted study resumes without redoing finished
runs; a run in progress also keeps its state after every epoch (``.<stem>.partial.pt``), so even
an hours-long ML-MCMC-256 run resumes where it stopped. Seeds are derived from the run's
identity (method, data set, M, epochs, run index), never from the order in which runs happen to
execute.
"""

from __future__ import annotations

import json
import queue
import signal
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path

import torch
from safetensors.torch import save_file
from tqdm import tqdm

from ebmtrack.files import write_atomic, write_text_atomic
from ebmtrack.process import retain_freed_memory, torch_threads

from .data import check_dataset
from .kl import GRID_SIZE, model_kl
from .methods import FIGURE2_METHODS, METHODS
from .train import TrainConfig, train_model


@dataclass(frozen=True)
class StudyConfig:
    """What to run. Defaults: the paper's protocol (N = 20 runs, 75 epochs, M = 1024)."""

    methods: tuple[str, ...] = tuple(METHODS)
    datasets: tuple[int, ...] = (1, 2)
    runs: int = 20
    runs_per_method: dict[str, int] = field(default_factory=dict)  # overrides ``runs``
    epochs: int = 75
    num_samples: int = 1024
    figure2_samples: tuple[int, ...] = (1, 4, 16, 64, 256)  # extra M values for Figure 2
    figure2_runs: int = 5
    workers: int = 1
    grid_size: int = GRID_SIZE

    def __post_init__(self):
        for name in self.methods:
            if name not in METHODS:
                raise ValueError(f"methods: unknown {name!r}; choose from {', '.join(METHODS)}")
        for dataset in self.datasets:
            check_dataset(dataset)
        if self.runs < 1 or any(n < 0 for n in self.runs_per_method.values()):
            raise ValueError(f"runs must be >= 1, got {self.runs}, {self.runs_per_method}")
        if self.epochs < 1 or self.num_samples < 1 or self.workers < 1:
            raise ValueError("epochs, num_samples and workers must be >= 1")
        if self.figure2_runs < 0:
            raise ValueError(f"figure2_runs must be >= 0, got {self.figure2_runs}")
        if any(m < 1 for m in self.figure2_samples):
            raise ValueError(f"figure2_samples must be >= 1, got {self.figure2_samples}")

    def runs_for(self, method: str) -> int:
        return self.runs_per_method.get(method, self.runs)


@dataclass(frozen=True)
class RunKey:
    """The identity of one training run; also its file name and seed."""

    method: str
    dataset: int
    num_samples: int
    epochs: int
    run: int

    @property
    def stem(self) -> str:
        safe = self.method.replace("+", "plus")
        return f"{safe}_d{self.dataset}_M{self.num_samples}_e{self.epochs}_r{self.run:02d}"

    @property
    def seed(self) -> int:
        return zlib.crc32(self.stem.encode())


def planned_runs(config: StudyConfig) -> list[RunKey]:
    """Every run the study needs: the table's runs and Figure 2's extra values of M.

    Ordered by run index first, so that a study stopped early has the same number of finished
    runs for every method (cheap ones get ahead only when ``runs_per_method`` says so).
    """
    extra_samples = [m for m in config.figure2_samples if m != config.num_samples]
    keys = []
    for run in range(max([config.runs, config.figure2_runs, *config.runs_per_method.values()])):
        keys += [
            RunKey(method, dataset, config.num_samples, config.epochs, run)
            for method in config.methods
            if run < config.runs_for(method)
            for dataset in config.datasets
        ]
        if run < config.figure2_runs:
            keys += [
                RunKey(method, dataset, num_samples, config.epochs, run)
                for num_samples in extra_samples
                for method in FIGURE2_METHODS
                if method in config.methods
                for dataset in config.datasets
            ]
    return keys


def execute_run(
    key: RunKey,
    run_dir: Path,
    grid_size: int,
    on_epoch: Callable[[int], None] | None = None,
    threads: int = 1,
) -> dict:
    """Train (on ``threads`` threads) and evaluate one run; write ``<stem>.safetensors`` then
    ``<stem>.json`` (the marker of a finished run). Returns the result record."""
    config = TrainConfig(
        method=key.method,
        dataset=key.dataset,
        seed=key.seed,
        num_samples=key.num_samples,
        epochs=key.epochs,
    )
    partial = run_dir / f".{key.stem}.partial.pt"
    model, seconds_per_epoch = train_model(
        config, on_epoch=on_epoch, checkpoint=partial, threads=threads
    )
    result = {**asdict(key), "seed": key.seed, "seconds_per_epoch": seconds_per_epoch}
    result["kl"] = model_kl(model, key.dataset, grid_size)
    weights = {k: v.contiguous() for k, v in model.state_dict().items()}
    write_atomic(run_dir / f"{key.stem}.safetensors", lambda p: save_file(weights, str(p)))
    write_text_atomic(run_dir / f"{key.stem}.json", json.dumps(result))
    partial.unlink(missing_ok=True)
    return result


def load_results(run_dir: Path) -> list[dict]:
    """Every finished run's record under ``run_dir``."""
    return [json.loads(p.read_text()) for p in sorted(Path(run_dir).glob("*.json"))]


def _worker_run(key: RunKey, run_dir: str, grid_size: int, threads: int, progress_queue) -> dict:
    retain_freed_memory()
    torch.set_num_threads(threads)  # for the evaluation; training sets its own
    return execute_run(
        key, Path(run_dir), grid_size, lambda _: progress_queue.put(1), threads=threads
    )


def run_study(
    config: StudyConfig, out_dir: Path, threads_per_worker: int = 1, progress: bool = True
) -> list[dict]:
    """Run every planned run not yet finished under ``out_dir/runs``; return all records.

    One tqdm bar counts epochs over all pending runs; its postfix counts finished runs. Each of
    the ``config.workers`` processes trains on ``threads_per_worker`` threads.
    """
    run_dir = Path(out_dir) / "runs"
    run_dir.mkdir(parents=True, exist_ok=True)
    pending = [k for k in planned_runs(config) if not (run_dir / f"{k.stem}.json").exists()]
    bar = tqdm(
        total=sum(k.epochs for k in pending), unit="epoch", disable=not progress, smoothing=0.05
    )
    done = 0

    def finished(count: int) -> None:
        nonlocal done
        done += count
        bar.set_postfix_str(f"runs {done}/{len(pending)}")

    finished(0)
    if config.workers == 1:
        retain_freed_memory()
        with torch_threads(threads_per_worker):  # for the evaluation; training sets its own
            for key in pending:
                execute_run(
                    key, run_dir, config.grid_size, lambda _: bar.update(1), threads_per_worker
                )
                finished(1)
    else:
        _run_in_pool(config, pending, run_dir, threads_per_worker, bar, finished)
    bar.close()
    return load_results(run_dir)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the group: the parent decides


def _run_in_pool(
    config: StudyConfig,
    pending: Iterable[RunKey],
    run_dir: Path,
    threads: int,
    bar: tqdm,
    finished: Callable[[int], None],
) -> None:
    context = get_context("spawn")
    with (
        context.Manager() as manager,
        ProcessPoolExecutor(config.workers, mp_context=context, initializer=_ignore_sigint) as pool,
    ):
        progress_queue = manager.Queue()
        futures = {
            pool.submit(_worker_run, k, str(run_dir), config.grid_size, threads, progress_queue)
            for k in pending
        }
        try:
            while futures:
                completed, futures = wait(futures, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in completed:
                    future.result()  # re-raise a worker's error here
                finished(len(completed))
                while True:
                    try:
                        bar.update(progress_queue.get_nowait())
                    except queue.Empty:
                        break
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM) or failed: stop the runs in progress now rather
            # than wait for them; finished runs are on disk and a later call resumes.
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                process.terminate()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
