"""The runs of the box-regression study (``box_regression.py``): its budget and protocol
(:class:`StudyConfig`), the runs' names per method and seed, and their training.

Every run trains one box head (the tracker's IoU-Net on the study's preset) with one loss, for one
seed, on the cached pairs of :data:`DATA_SEED` (:func:`train_run`); :func:`time_methods` measures
each loss's seconds per iteration on the same batches.
"""

from __future__ import annotations

import copy
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, safe_open
from torch.utils.data import default_collate

from ebmtrack.models.serialization import save_model
from ebmtrack.training.box_regression import BoxLossConfig
from ebmtrack.training.config import config_to_dict, save_config
from ebmtrack.training.experiment import (
    CONFIG_FILE,
    IoUNetExperiment,
    run_experiment,
)
from ebmtrack.training.feature_cache import CachedPairs
from ebmtrack.training.presets import preset_config
from ebmtrack.training.trainer import NonFiniteLossError, Trainer

PRESETS = ("pack-cpu", "default-cpu")
"""Training presets the study runs on: ``pack-cpu`` (the training pack; the default) and
``default-cpu`` (8 of the test folder's sequences; the protocol of the 29 November 2026 record of
docs/results/box-regression.md)."""
TEST_FRAMES = {"pack-cpu": 15, "default-cpu": 40}
"""Test frames per test sequence by preset (:attr:`StudyConfig.frames_per_sequence`)."""
TEST_FOLDER = "../shared/data/sequences"
"""The test sequences (``--sequences``): never trained on, no setting chosen on them."""
TABLE_METHODS = (
    "mse",
    "ml-is",
    "ml-mcmc-1",
    "ml-mcmc-4",
    "ml-mcmc-8",
    "kld-is",
    "nce",
    "dsm",
    "nce+",
)
"""Rows of the table: the paper's Table 2 columns in its order, with ATOM's MSE first."""
CURVE_LOSSES = ("nce+", "kld-is")
CURVE_SAMPLES = (1, 4, 16, 32, 128)
KEY_PAIRS = (
    ("nce+", "kld-is"),
    ("nce", "ml-is"),
    ("nce+", "mse"),
    ("curve-nce+-m128", "curve-nce+-m1"),
    ("curve-kld-is-m128", "curve-kld-is-m1"),
)
"""Differences whose paired standard error the report gives (the first two: the paper's claims
NCE+ >= KLD-IS and NCE > ML-IS)."""
TOP_GROUP = ("ml-is", "kld-is", "nce", "nce+")
"""The paper's top group of Table 2; ``top-4`` in the report is their box-wise mean."""
SEED_PAIRS = (
    ("nce+", "kld-is"),
    ("nce+", "nce"),
    ("nce", "ml-is"),
    ("kld-is", "ml-is"),
    ("nce+", "mse"),
    ("ml-mcmc-8", "top-4"),
    ("ml-mcmc-8", "ml-mcmc-1"),
    ("dsm", "top-4"),
    ("dsm", "start"),
    ("top-4", "start"),
    ("curve-nce+-m128", "curve-nce+-m1"),
    ("curve-kld-is-m128", "curve-kld-is-m1"),
)
"""Differences the report gives over seeds and sequences (paired by seed and sequence): the
paper's orderings in the top group, ML-MCMC-8 and DSM against the top group (``top-4``) and DSM
against the unrefined start boxes (``start``)."""
SAMPLES_FILE = "refinement-samples.safetensors"
RESULT_FILE = "refinement.json"
FAILED_FILE = "failed.json"
PAPER_TABLE2 = {
    "ml-is": (39.4, 58.6, 42.1, 1.03),
    "ml-mcmc-1": (36.4, 57.9, 38.8, 2.47),
    "ml-mcmc-4": (36.4, 57.9, 39.0, 7.05),
    "ml-mcmc-8": (36.4, 58.0, 39.0, 13.3),
    "kld-is": (39.6, 58.6, 42.6, 1.02),
    "nce": (39.5, 58.6, 42.4, 1.04),
    "dsm": (36.3, 57.9, 38.9, 3.84),
    "nce+": (39.7, 58.7, 42.7, 1.09),
}
"""The paper's Table 2 (COCO test-dev): AP, AP50, AP75 (%) and training seconds per iteration."""


@dataclass(frozen=True)
class StudyConfig:
    """The budget and protocol, the same for every method.

    Attributes:
        train_pairs: training pairs per run (one visit of each cached pair = one epoch).
        curve_pairs: training pairs per run of the M-curve (Figure 3), M = 128 included.
        batch_size: pairs per iteration.
        lr: Adam learning rate (constant: one epoch, no step).
        seeds: seeds of the head's initialisation, the data order and the losses' draws; every
            run is trained once per seed (:func:`seeded_run`). The timing slice uses the first.
        num_samples: M of the sampling methods (appendices C.2 and D.2: 128).
        mcmc_samples: M (chains) of ML-MCMC, whose cost grows with L; fewer to fit the budget.
        dsm_samples: noisy copies per label of DSM (double backprop); fewer to fit the budget.
        mcmc_step_length: Langevin step length alpha of ML-MCMC.
        step_lengths: candidate step lengths of Algorithm S1 (the same for centre and size in
            the EBM's box parametrisation), each head gets the best on the tuning frames.
        num_iters: Algorithm S1's T.
        decay: Algorithm S1's eta.
        frames_per_sequence: test frames per test sequence (default :data:`TEST_FRAMES` of the
            preset: 15 on each of the 13 test sequences with ``pack-cpu``, 40 on each of the 5
            held-out ones with ``default-cpu``, whose tuning frames are one fewer, in between).
        start_iou: range of the perturbed boxes' IoU with the truth (drawn uniformly).
        refinement_seed: seed of the perturbations.
        timing_steps: iterations timed per method in :func:`time_methods` (after one warm-up).
        preset: the training preset, one of :data:`PRESETS`; it also sets where the step lengths
            are tuned and what is tested (:func:`evaluation_sources`).
        tuning_frames_per_sequence: tuning frames per held-out track of the pack (``pack-cpu``).
    """

    preset: str = "pack-cpu"
    train_pairs: int = 2048
    curve_pairs: int = 1024
    batch_size: int = 16
    lr: float = 1e-3
    seeds: tuple[int, ...] = (1,)
    num_samples: int = 128
    mcmc_samples: int = 16
    dsm_samples: int = 32
    mcmc_step_length: float = 0.05
    step_lengths: tuple[float, ...] = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
    num_iters: int = 10
    decay: float = 0.5
    frames_per_sequence: int | None = None
    start_iou: tuple[float, float] = (0.5, 0.9)
    refinement_seed: int = 0
    timing_steps: int = 5
    tuning_frames_per_sequence: int = 20

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"preset must be one of {', '.join(PRESETS)}, got {self.preset!r}")
        if self.frames_per_sequence is None:
            object.__setattr__(self, "frames_per_sequence", TEST_FRAMES[self.preset])
        seeds = tuple(self.seeds)
        if (
            not seeds
            or len(set(seeds)) != len(seeds)
            or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds)
        ):
            raise ValueError(f"seeds must be distinct integers >= 0, at least one, got {seeds}")
        object.__setattr__(self, "seeds", seeds)


FIRST_SEED = 1
"""The seed whose runs keep the plain method name (``nce+``; another seed's: ``nce+-seed2``)."""
DATA_SEED = FIRST_SEED
"""The seed of the cached training pairs, the same for every run (:func:`train_on_shared_cache`):
the other seeds change the initialisation, the order of the pairs, the proposals and the losses'
draws, not the training set."""
DATA_SEED_FILE = "data_seed.json"
_SEED_SUFFIX = re.compile(r"^(?P<base>.+)-seed(?P<seed>\d+)$")


def seeded_run(base: str, seed: int) -> str:
    """The name of run ``base`` (e.g. ``nce+``) trained with ``seed``."""
    return base if seed == FIRST_SEED else f"{base}-seed{seed}"


def split_run(name: str) -> tuple[str, int]:
    """``(base, seed)`` of a run name of :func:`seeded_run`."""
    match = _SEED_SUFFIX.match(name)
    return (match["base"], int(match["seed"])) if match else (name, FIRST_SEED)


def run_losses(config: StudyConfig) -> dict[str, BoxLossConfig]:
    """Every run of the study by name, for every seed: the table's methods, then the M-curve's
    (:func:`curve_run`, on their own budget ``curve_pairs``)."""
    base = base_losses(config)
    return {seeded_run(name, seed): base[name] for seed in config.seeds for name in base}


def base_losses(config: StudyConfig) -> dict[str, BoxLossConfig]:
    runs = {"mse": BoxLossConfig("mse")}
    for name in TABLE_METHODS[1:]:
        if name.startswith("ml-mcmc"):
            params = {
                "num_steps": int(name.rsplit("-", 1)[1]),
                "num_samples": config.mcmc_samples,
                "step_length": config.mcmc_step_length,
            }
            runs[name] = BoxLossConfig("ml-mcmc", params)
        else:
            samples = config.dsm_samples if name == "dsm" else config.num_samples
            runs[name] = BoxLossConfig(name, {"num_samples": samples})
    for loss in CURVE_LOSSES:
        for samples in CURVE_SAMPLES:
            runs[curve_run(loss, samples)] = BoxLossConfig(loss, {"num_samples": samples})
    return runs


def curve_run(loss: str, samples: int) -> str:
    """The name of the M-curve's run of ``loss`` with M = ``samples``."""
    return f"curve-{loss}-m{samples}"


def experiment_config(
    name: str, loss: BoxLossConfig, config: StudyConfig, features: str | Path
) -> IoUNetExperiment:
    """The study's preset with ``loss`` and the study's budget (one epoch)."""
    experiment = preset_config(config.preset)
    experiment.loss = loss
    experiment.feature_cache.folder = str(features)
    trainer = experiment.trainer
    trainer.epochs, trainer.lr_step_epochs = 1, 1
    trainer.samples_per_epoch = (
        config.curve_pairs if name.startswith("curve-") else config.train_pairs
    )
    trainer.batch_size, trainer.lr, trainer.seed = config.batch_size, config.lr, split_run(name)[1]
    return experiment


def _claim(lock: Path) -> bool:
    """Create ``lock`` holding this process's id; False if a live process holds it."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(lock, "x") as stream:
            stream.write(str(os.getpid()))
        return True
    except FileExistsError:
        try:
            os.kill(int(lock.read_text() or 0), 0)
            return False  # its owner is alive
        except (ProcessLookupError, ValueError):
            lock.unlink(missing_ok=True)  # left by a process that died
            return _claim(lock)


def train_run(name: str, experiment: IoUNetExperiment, run_dir: Path) -> str:
    """Train (or resume) one run; ``"done"``, ``"failed"`` (non-finite loss, recorded in
    ``failed.json`` as the paper's missing values), ``"skipped"`` (finished before), ``"busy"``
    (another process of this machine is training it: parallel study processes share the runs
    out through a ``train.lock`` file) or ``"error (...)"`` for any other runtime error (e.g. an
    op without double backward for DSM), so that the other runs still train.

    Every run trains on the cached pairs of :data:`DATA_SEED`: a run of that seed through
    :func:`~ebmtrack.training.experiment.run_experiment` itself, a run of another seed through
    :func:`train_on_shared_cache`."""
    if (run_dir / IoUNetExperiment.model_file).is_file() or (run_dir / FAILED_FILE).is_file():
        return "skipped"
    lock = run_dir / "train.lock"
    if not _claim(lock):
        return "busy"
    try:
        if experiment.trainer.seed == DATA_SEED:
            run_experiment(experiment, run_dir, resume=True)
        else:
            train_on_shared_cache(experiment, run_dir, DATA_SEED)
    except NonFiniteLossError as error:
        (run_dir / FAILED_FILE).write_text(json.dumps({"run": name, "error": str(error)}) + "\n")
        return "failed"
    except RuntimeError as error:  # not a result: the next call tries again
        return f"error ({error})"
    finally:
        lock.unlink(missing_ok=True)
    return "done"


def _data_config(experiment: IoUNetExperiment, data_seed: int) -> IoUNetExperiment:
    """``experiment`` with the seed that drew (and keys) the cached pairs."""
    data = copy.deepcopy(experiment)
    data.trainer.seed = data_seed
    return data


def train_on_shared_cache(experiment: IoUNetExperiment, run_dir: Path, data_seed: int) -> None:
    """:func:`~ebmtrack.training.experiment.run_experiment` of the box head on its feature cache,
    except that the cached pairs are those of ``data_seed`` (the pairs, crops and cache key of
    the run with that seed; a missing or mismatching chunk is built as that run would build it),
    while the head's initialisation, the order in which the pairs are visited, their proposals
    and the losses' draws follow ``experiment.trainer.seed``. The seeds of the study thus measure
    the training's variance on one training set, and share one cache instead of building one
    per seed. Writes what ``run_experiment`` writes, plus ``data_seed.json``; resumes."""
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(experiment, run_dir / CONFIG_FILE)
    (run_dir / DATA_SEED_FILE).write_text(json.dumps({"data_seed": data_seed}) + "\n")
    module = experiment.build_module()  # seeded by experiment.trainer.seed
    trainer = experiment.trainer
    # the data seed's cached pairs, read (or built) as the data seed's own run would ...
    data_train, data_val = _data_config(experiment, data_seed).cached_datasets(
        module, run_dir, trainer.progress
    )
    # ... visited in this seed's order, with this seed's proposals
    train = CachedPairs(data_train.cache, experiment.processing, data_train.num_pairs, trainer.seed)
    val = None
    if data_val is not None:
        val = CachedPairs(
            data_val.cache, experiment.processing, data_val.num_pairs, trainer.seed + 1
        )
    loop = Trainer(
        module, train, trainer, run_dir, val_data=val, experiment_config=config_to_dict(experiment)
    )
    loop.resume()
    loop.fit()
    if loop.epoch == trainer.epochs:
        save_model(experiment.trained_model(module).cpu(), run_dir / experiment.model_file)


def link_features(source: Path, folder: Path) -> int:
    """Link every chunk file of the feature cache ``source`` (``train/``, ``val/``) into
    ``folder``, which the runs then use, so that ``source`` is only read: a chunk that a run finds
    stale is rebuilt in ``folder``, replacing its link. Existing files of ``folder`` are kept.
    Returns the number of links made."""
    made = 0
    for chunk in sorted(Path(source).glob("*/chunk-*.safetensors")):
        target = folder / chunk.parent.name / chunk.name
        if target.is_symlink() and not target.exists():
            target.unlink()  # a link to a chunk that is gone
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(chunk.resolve())
            made += 1
    return made


def stale_chunks(experiment: IoUNetExperiment, data_seed: int = DATA_SEED) -> list[str]:
    """The chunk files of ``experiment``'s feature cache whose key is not that of the pairs of
    ``data_seed`` with this config (they would be rebuilt by the first run); missing chunks are
    not listed."""
    key = _data_config(experiment, data_seed).cache_key()
    stale = []
    for chunk in sorted(Path(experiment.feature_cache.folder).glob("*/chunk-*.safetensors")):
        with safe_open(str(chunk), framework="pt") as handle:
            found = (handle.metadata() or {}).get("key", "")
        if found.rsplit(" pairs ", 1)[0] != key:
            stale.append(f"{chunk.parent.name}/{chunk.name}")
    return stale


def time_methods(
    runs: dict[str, BoxLossConfig], config: StudyConfig, features: str | Path
) -> dict[str, float | str]:
    """Seconds per training iteration of each run's loss, measured one after the other in this
    process on the same cached batches (median of ``config.timing_steps`` after a warm-up), so
    that their ratios are comparable even on a shared machine; the error message for a loss that
    cannot run."""
    first_chunk = sorted(Path(features).glob("train/chunk-*.safetensors"))[0]
    base = preset_config(config.preset)
    pairs = CachedPairs(load_file(str(first_chunk)), base.processing, 256, config.seeds[0])
    size = config.batch_size
    batches = [
        default_collate([pairs[i] for i in range(k * size, (k + 1) * size)])
        for k in range(config.timing_steps + 1)
    ]
    seconds = {}
    for name, loss in runs.items():
        experiment = experiment_config(name, loss, config, features)
        module = experiment.build_module().train()
        optimizer = torch.optim.Adam(module.iou_net.parameters(), config.lr)
        times = []
        try:
            for batch in batches:
                start = time.perf_counter()
                value, _ = module(batch)
                optimizer.zero_grad()
                value.backward()
                optimizer.step()
                times.append(time.perf_counter() - start)
        except RuntimeError as error:  # e.g. an op without double backward, for (D)SM
            seconds[name] = f"error: {error}"
            continue
        seconds[name] = float(np.median(times[1:]))
    return seconds


