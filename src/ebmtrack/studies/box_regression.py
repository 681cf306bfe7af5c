"""Every EBM training method on the box head, on real images (BMVC 2020, section 4.2 at CPU scale).

The paper's Table 2 trains one box-regression head per method (ML-IS, KLD-IS, ML-MCMC with L = 1,
4 and 8 Langevin steps, NCE, NCE+, DSM) on the same detector, data and budget, and scores the
boxes that gradient ascent on each head (Algorithm S1) makes of a detector's boxes; its Figure 3
repeats the best methods for M = 1 .. 128 samples (here NCE+ and KLD-IS). Here the head is the
tracker's IoU-Net on the ``pack-cpu`` preset (frozen ImageNet MobileNetV2, cached features of
2048 training pairs of the training pack; ``--preset default-cpu`` for the study's earlier
protocol), every method gets the same iterations, ATOM's MSE is a reference row, and the
"detector's errors" are ground-truth boxes perturbed to an IoU drawn uniformly from 0.5-0.9
(:mod:`ebmtrack.studies.refinement`).

Prediction follows appendix C.1: T = 10 iterations of Algorithm S1 (step decay 0.5) from the
perturbed box, in the EBM's box parametrisation, with the step length of each head chosen from
:attr:`StudyConfig.step_lengths` on a tuning set (the paper tunes it on COCO val and reports
test-dev): frames of the training pack's held-out tracks, never trained on; the heads are then
tested on 15 frames of each of the 13 test sequences, on which nothing is trained or chosen
(:func:`evaluation_sources`). The MSE head is also scored with the tracker's own box estimation
(ATOM's ascent). Reported per head: mean IoU after refinement, the share of boxes above IoU 0.5
and 0.75 (the AP50 / AP75 analogue), training seconds per iteration.

Run (resumable: finished trainings and evaluations are skipped)::

    python -m ebmtrack.studies.box_regression --out runs/box-regression --seeds 1,2,3 \
        [--features DIR]   # an existing cache of the same pairs, only read

With several seeds every run is trained once per seed (initialisation, data order, proposals and
the losses' draws, on the cached pairs of :data:`DATA_SEED`; the first seed's run keeps the plain
name, e.g. ``nce+``, the others ``nce+-seed2``), and the report adds each method's mean IoU after
refinement as a mean over per-sequence means, with its standard deviation over seeds and its
standard error over sequences (:func:`seed_summary`), and the differences of :data:`SEED_PAIRS`.

Writes ``OUT/<run>/`` (the trained head ``iou_net.safetensors``, ``metrics.csv``,
``refinement.json``), ``OUT/features/`` (the cache, or links to ``--features``),
``OUT/refinement-samples.safetensors`` (the tuning and test crops' features and boxes, shared by
every head), ``OUT/timing.json``, ``OUT/results.json``, ``OUT/report.md`` and ``OUT/m-curve.png``.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, safe_open, save_file
from torch.utils.data import default_collate
from tqdm import tqdm

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.data.datasets.sequence import select
from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.models.serialization import load_model, save_model
from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.training.box_regression import BoxLossConfig
from ebmtrack.training.config import config_to_dict, save_config
from ebmtrack.training.experiment import (
    CONFIG_FILE,
    IoUNetExperiment,
    preset_config,
    run_experiment,
)
from ebmtrack.training.feature_cache import CachedPairs
from ebmtrack.training.trainer import NonFiniteLossError, Trainer

from .refinement import (
    RefinementConfig,
    RefinementSamples,
    ebm_refine,
    overlap_scores,
    paired_difference,
    refinement_samples,
    refinement_scores,
)

PRESETS = ("pack-cpu", "default-cpu")
"""Training presets the study runs on: ``pack-cpu`` (the training pack; the default) and
``default-cpu`` (8 of the test folder's sequences; the study's earlier protocol)."""
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
"""The seed whose runs keep the plain method name (the study's single seed before seeds)."""
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
    base = _base_losses(config)
    return {seeded_run(name, seed): base[name] for seed in config.seeds for name in base}


def _base_losses(config: StudyConfig) -> dict[str, BoxLossConfig]:
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


def _tracker_params(preset: str) -> AtomParams:
    """The tracker's settings for the preset's backbone and crop size (crops, box estimation)."""
    experiment = preset_config(preset)
    return AtomParams(backbone=experiment.backbone, search_size=experiment.processing.output_size)


def _split_config(config: StudyConfig, split: str) -> RefinementConfig:
    """The refinement test of the ``test`` split, or of the ``tuning`` split (other
    perturbations; with ``default-cpu`` also other frames of the same sequences)."""
    pack = config.preset == "pack-cpu"
    return RefinementConfig(
        frames_per_sequence=(
            config.tuning_frames_per_sequence
            if pack and split == "tuning"
            else config.frames_per_sequence
        ),
        seed=config.refinement_seed + (split == "tuning"),
        start_iou=config.start_iou,
        frame_offset=0.5 if split == "tuning" and not pack else 0.0,
    )


def evaluation_sources(
    config: StudyConfig, test_folder: str | None = None
) -> dict[str, tuple[str, list[str] | None]]:
    """Where each split's sequences come from: ``{split: (folder, names or None for all)}``.

    ``pack-cpu``: the step lengths are tuned on the training pack's held-out tracks
    (``data.holdout``, never trained on) and the heads are tested on every sequence of
    ``test_folder`` (default :data:`TEST_FOLDER`), on which nothing is trained or chosen.
    ``default-cpu`` (the earlier protocol): both splits are frames of the preset's held-out
    sequences of ``test_folder`` (default the preset's ``data.sequence_folder``).

    Raises ValueError if with ``pack-cpu`` the test folder is the pack's track folder.
    """
    experiment = preset_config(config.preset)
    data = experiment.data
    if config.preset == "pack-cpu":
        tuning = str(Path(data.pack) / "sequences")
        test = test_folder or TEST_FOLDER
        if Path(tuning).resolve() == Path(test).resolve():
            raise ValueError(f"the test folder {test} is the training pack's tracks")
        return {"test": (test, None), "tuning": (tuning, list(data.holdout))}
    folder = test_folder or data.sequence_folder
    return {split: (folder, list(data.holdout)) for split in ("test", "tuning")}


def _protocol(config: StudyConfig, sources: dict) -> str:
    """What the stored samples are a function of (a different one rebuilds them)."""
    splits = {
        split: {"folder": folder, "names": names, **asdict(_split_config(config, split))}
        for split, (folder, names) in sources.items()
    }
    return json.dumps({"preset": config.preset, "splits": splits}, sort_keys=True)


def prepare_samples(
    out: Path, config: StudyConfig, sequence_folder: str | None = None
) -> dict[str, list[RefinementSamples]]:
    """The crops, features and boxes of the ``test`` and ``tuning`` splits
    (:func:`evaluation_sources`; disjoint sequences, or with ``default-cpu`` disjoint frames),
    computed once for every head and stored in ``OUT/refinement-samples.safetensors`` (rebuilt
    when the protocol changed)."""
    path = out / SAMPLES_FILE
    sources = evaluation_sources(config, sequence_folder)
    protocol = _protocol(config, sources)
    if path.is_file():
        with safe_open(str(path), framework="pt") as handle:
            if (handle.metadata() or {}).get("protocol") != protocol:
                path.unlink()
    if not path.is_file():
        experiment = preset_config(config.preset)
        params = _tracker_params(config.preset)
        module = experiment.build_module()
        tensors, order = {}, {}
        for split in ("test", "tuning"):
            folder, names = sources[split]
            sequences = load_folder(folder)
            if names is not None:
                sequences = select(sequences, names)
            refinement = _split_config(config, split)
            sets = [
                refinement_samples(s, module.backbone, module.layers, refinement, params)
                for s in tqdm(sequences, desc=f"refinement samples ({split})")
            ]
            order[split] = [s.name for s in sets]
            for s in sets:
                prefix = f"{split}.{s.name}."
                tensors.update({f"{prefix}ref_feat{k}": f for k, f in enumerate(s.ref_feats)})
                tensors.update({f"{prefix}test_feat{k}": f for k, f in enumerate(s.test_feats)})
                tensors.update(
                    {
                        f"{prefix}ref_box": s.ref_box,
                        f"{prefix}start_boxes": s.start_boxes,
                        f"{prefix}true_boxes": s.true_boxes,
                    }
                )
        if config.preset == "pack-cpu" and set(order["test"]) & set(order["tuning"]):
            raise ValueError(f"tuning and test share {set(order['test']) & set(order['tuning'])}")
        partial = path.with_suffix(".partial")
        tensors = {name: value.contiguous() for name, value in tensors.items()}
        metadata = {"order": json.dumps(order), "protocol": protocol}
        save_file(tensors, str(partial), metadata=metadata)
        partial.replace(path)
    with safe_open(str(path), framework="pt") as handle:
        order = json.loads(handle.metadata()["order"])
    tensors = load_file(str(path))

    def samples(split: str, name: str) -> RefinementSamples:
        get = lambda key: tensors[f"{split}.{name}.{key}"]  # noqa: E731
        return RefinementSamples(
            name,
            [get("ref_feat0"), get("ref_feat1")],
            get("ref_box"),
            [get("test_feat0"), get("test_feat1")],
            get("start_boxes"),
            get("true_boxes"),
        )

    return {split: [samples(split, name) for name in names] for split, names in order.items()}


def ebm_scores(
    iou_net: AtomIoUNet,
    sets: list[RefinementSamples],
    step_lengths: tuple[float, ...],
    config: StudyConfig,
) -> list[dict]:
    """:func:`~ebmtrack.studies.refinement.overlap_scores` of Algorithm S1 over all ``sets``, one
    per step length."""
    refined = torch.cat(
        [ebm_refine(iou_net, s, step_lengths, config.num_iters, config.decay) for s in sets]
    )
    starts = torch.cat([s.start_boxes for s in sets])
    truths = torch.cat([s.true_boxes for s in sets])
    return [overlap_scores(starts, refined[:, k], truths) for k in range(len(step_lengths))]


def evaluate_head(
    iou_net: AtomIoUNet,
    samples: dict[str, list[RefinementSamples]],
    config: StudyConfig,
    atom_ascent: bool = False,
) -> dict:
    """Algorithm S1 with the step length that is best on the tuning split, scored on the test
    split; with ``atom_ascent`` also the tracker's box estimation (ATOM's ascent) on the test
    split (``atom``)."""
    tuning = ebm_scores(iou_net, samples["tuning"], config.step_lengths, config)
    after = {step: scores["iou_after"] for step, scores in zip(config.step_lengths, tuning)}
    best = max(after, key=after.get)
    result = {"step_length": best, "tuning_iou_after": {str(k): v for k, v in after.items()}}
    result.update(ebm_scores(iou_net, samples["test"], (best,), config)[0])
    # which boxes of ``ious_after`` belong to which sequence, for means over sequences
    result["sequences"] = [s.name for s in samples["test"]]
    result["sequence_boxes"] = [len(s.start_boxes) for s in samples["test"]]
    if atom_ascent:
        result["atom"] = refinement_scores(
            iou_net, samples["test"], _tracker_params(config.preset), config.refinement_seed
        )
    return result


def _write_json(path: Path, record: dict) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(record, indent=1) + "\n")
    partial.replace(path)


def run_study(
    out: str | Path,
    config: StudyConfig = StudyConfig(),
    features: str | Path | None = None,
    only: tuple[str, ...] | None = None,
    train: bool = True,
    evaluate: bool = True,
    sequence_folder: str | None = None,
) -> dict:
    """Train, time and evaluate every run (or the ``only`` ones), then write the report.

    Args:
        out: the study folder.
        config: budget and protocol.
        features: an existing feature cache of the preset's 2048 training pairs, only read: its
            chunks are linked into ``OUT/features`` (:func:`link_features`), where the runs
            read them and where a stale or missing chunk is built (~10 minutes for all);
            e.g. the data-scaling study's ``features-d`` for ``pack-cpu``.
        only: names of :func:`run_losses` to train and evaluate (default all; a method's plain
            name stands for its runs of every seed); the report covers
            every run with results in ``out``, so parallel processes can share the runs out.
        train: train missing runs.
        evaluate: evaluate trained runs without results, time the methods (once), and report.
        sequence_folder: the test sequences' folder (:func:`evaluation_sources`; with
            ``default-cpu`` also the folder it trains on).

    Returns:
        The report's record (also ``OUT/results.json``).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    folder = out / "features"
    if features is not None and Path(features).resolve() != folder.resolve():
        link_features(Path(features), folder)
    features = folder
    if train:
        probe = experiment_config(
            seeded_run(TABLE_METHODS[0], DATA_SEED), BoxLossConfig(), config, features
        )
        stale = stale_chunks(probe)
        if stale:
            print(
                f"{len(stale)} chunk(s) of {features} hold other pairs; rebuilt by the first run: "
                f"{', '.join(stale)}",
                flush=True,
            )
    runs = run_losses(config)
    if only:  # a method's plain name selects its runs of every seed
        base = _base_losses(config)
        only = [
            run
            for name in only
            for run in ([seeded_run(name, s) for s in config.seeds] if name in base else [name])
        ]
    unknown = sorted(set(only or ()) - set(runs))
    if unknown:
        raise ValueError(f"unknown run(s) {unknown}; choose from {', '.join(runs)}")
    selected = {name: runs[name] for name in only} if only else runs
    if train:
        for name, loss in selected.items():
            experiment = experiment_config(name, loss, config, features)
            if sequence_folder is not None and experiment.data.sequence_folder is not None:
                experiment.data.sequence_folder = sequence_folder  # default-cpu trains on it
            print(f"{name}: {train_run(name, experiment, out / name)}", flush=True)
    if not evaluate:
        return {}
    if not (out / "timing.json").is_file():
        base = _base_losses(config)
        table = {name: base[name] for name in TABLE_METHODS}
        _write_json(out / "timing.json", time_methods(table, config, features))
    samples = prepare_samples(out, config, sequence_folder)
    untrained = out / "untrained" / RESULT_FILE
    if not untrained.is_file():
        untrained.parent.mkdir(exist_ok=True)
        # every run's seeded initialisation
        head = preset_config(config.preset).build_module().iou_net
        starts = torch.cat([s.start_boxes for s in samples["test"]])
        truths = torch.cat([s.true_boxes for s in samples["test"]])
        no_refinement = overlap_scores(starts, starts, truths)  # the start boxes' shares
        _write_json(untrained, {**evaluate_head(head, samples, config), "start": no_refinement})
    for name in selected:
        result = out / name / RESULT_FILE
        if (out / name / IoUNetExperiment.model_file).is_file() and not result.is_file():
            head = load_model(out / name / IoUNetExperiment.model_file, expected="AtomIoUNet")
            atom_ascent = split_run(name)[0] == "mse"  # the MSE head of every seed
            _write_json(result, evaluate_head(head, samples, config, atom_ascent=atom_ascent))
    return write_report(out, config)


def _train_stats(run_dir: Path, batch_size: int) -> dict[str, float]:
    """Validation ranking numbers and the measured seconds per iteration of a finished run."""
    path = run_dir / "metrics.csv"
    if not path.is_file():
        return {}
    with open(path, newline="") as stream:
        rows = list(csv.DictReader(stream))
    stats = {}
    for row in rows:
        if row["split"] == "train":
            stats["run_s_per_iter"] = batch_size / float(row["samples_per_s"])
        elif row["split"] == "val":
            stats.update(rank_corr=float(row["rank_corr"]), top1_iou=float(row["top1_iou"]))
    return stats


def _row(out: Path, name: str, config: StudyConfig) -> dict | None:
    """One run's numbers from its folder (None if it has none yet)."""
    if (out / name / FAILED_FILE).is_file():
        return {"run": name, "failed": json.loads((out / name / FAILED_FILE).read_text())["error"]}
    path = out / name / RESULT_FILE
    if not path.is_file():
        return None
    return {
        "run": name,
        **json.loads(path.read_text()),
        **_train_stats(out / name, config.batch_size),
    }


def write_report(out: Path, config: StudyConfig) -> dict:
    """``OUT/results.json``, ``OUT/report.md`` (the table, the key differences and the M-curve of
    the first seed's runs, then every method over seeds and sequences) and ``OUT/m-curve.png``
    from every run with results in ``out``."""
    runs = _base_losses(config)
    timing = (
        json.loads((out / "timing.json").read_text()) if (out / "timing.json").is_file() else {}
    )
    all_rows = {
        name: row for name in ["untrained", *run_losses(config)] if (row := _row(out, name, config))
    }
    first = config.seeds[0]
    rows = {"untrained": all_rows["untrained"]} if "untrained" in all_rows else {}
    for name in runs:
        if seeded_run(name, first) in all_rows:
            rows[name] = all_rows[seeded_run(name, first)]
    untrained = rows.get("untrained")
    lines = [
        "| method | M | IoU after (S1) | > 0.5 | > 0.75 | improved | step | s/iter (slice) | "
        "x ML-IS | s/iter (run) | rank_corr | paper AP / AP50 / AP75 | paper s/iter |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    if untrained:
        start = untrained["start"]
        lines.append(
            f"| no refinement (start boxes) | - | {start['iou_after']:.3f} | "
            f"{start['above_50']:.3f} | {start['above_75']:.3f} | - | - | - | - | - | - | - | - |"
        )
    timing = {name: value for name, value in timing.items() if isinstance(value, float)}
    base_time = timing.get("ml-is")
    for name in ["untrained", *TABLE_METHODS]:
        row = rows.get(name)
        if row is None:
            continue
        if "failed" in row:
            lines.append(f"| {name} | - | failed: non-finite loss | | | | | | | | | | |")
            continue
        samples = runs[name].params.get("num_samples", "-") if name in runs else "-"
        slice_time = timing.get(name)
        paper = PAPER_TABLE2.get(name)
        lines.append(
            f"| {name} | {samples} | {row['iou_after']:.3f} | {row['above_50']:.3f} | "
            f"{row['above_75']:.3f} | {row['improved']:.2f} | {row['step_length']:g} | "
            + (f"{slice_time:.2f} | " if slice_time else "- | ")
            + (f"{slice_time / base_time:.2f} | " if slice_time and base_time else "- | ")
            + (f"{row['run_s_per_iter']:.2f} | " if "run_s_per_iter" in row else "- | ")
            + (f"{row['rank_corr']:.3f} | " if "rank_corr" in row else "- | ")
            + (f"{paper[0]} / {paper[1]} / {paper[2]} | {paper[3]} |" if paper else "- | - |")
        )
    if "mse" in rows and "atom" in rows["mse"]:
        atom = rows["mse"]["atom"]
        lines.append(
            f"| mse, ATOM's ascent | - | {atom['iou_after']:.3f} | {atom['above_50']:.3f} | "
            f"{atom['above_75']:.3f} | {atom['improved']:.2f} | 1 x size | | | | | | |"
        )
    differences = {}
    for first, second in KEY_PAIRS:
        if "ious_after" in rows.get(first, {}) and "ious_after" in rows.get(second, {}):
            mean, se = paired_difference(rows[first]["ious_after"], rows[second]["ious_after"])
            differences[f"{first} - {second}"] = (mean, se)
    lines.append("")
    lines += [
        f"- {pair}, same {untrained['num_boxes'] if untrained else '?'} boxes: "
        f"{mean:+.4f} +- {se:.4f} (paired s.e.)"
        for pair, (mean, se) in differences.items()
    ]
    curve, ranking = m_curve(rows), _curve_ranking(rows)
    has_curve = any(curve.values())  # the M-curve's runs are optional (``--runs``)
    if has_curve:
        header = " | ".join(f"{loss} IoU after | {loss} rank_corr" for loss in CURVE_LOSSES)
        lines += ["", f"| M | {header} |", "|---|" + "---|---|" * len(CURVE_LOSSES)]
        for samples in CURVE_SAMPLES:
            cells = []
            for loss in CURVE_LOSSES:
                point = curve[loss].get(samples)
                cells.append(
                    "-"
                    if point is None
                    else point
                    if isinstance(point, str)
                    else f"{point[0]:.3f} +- {point[1]:.3f}"
                )
                cells.append(next((f"{r:.3f}" for m, r in ranking[loss] if m == samples), "-"))
            lines.append(f"| {samples} | " + " | ".join(cells) + " |")
    by_seed = {
        name: {seed: all_rows.get(seeded_run(name, seed)) for seed in config.seeds} for name in runs
    }
    by_seed.update(_pseudo_methods(all_rows.get("untrained"), by_seed, config.seeds))
    seeds = {name: seed_summary([r for r in rs.values() if r]) for name, rs in by_seed.items()}
    seed_differences = {
        f"{a} - {b}": seed_difference(by_seed.get(a, {}), by_seed.get(b, {})) for a, b in SEED_PAIRS
    }
    lines += _seed_lines(config.seeds, seeds, seed_differences)
    (out / "report.md").write_text("\n".join(lines) + "\n")
    record = {
        "config": asdict(config),
        "timing_s_per_iter": timing,
        "rows": all_rows,
        "differences": differences,
        "over_seeds": {name: summary for name, summary in seeds.items() if summary},
        "over_seeds_differences": {k: v for k, v in seed_differences.items() if v},
        "m_curve": {loss: {str(k): v for k, v in points.items()} for loss, points in curve.items()},
    }
    _write_json(out / "results.json", record)
    if has_curve:
        plot_m_curve(curve, ranking, out / "m-curve.png")
    return record


def _sequence_means(row: dict) -> dict[str, float] | None:
    """Mean IoU after refinement per test sequence of one run's result (None for a result without
    the sequences' sizes, or a failed run)."""
    if "sequence_boxes" not in row or "ious_after" not in row:
        return None
    ious = np.asarray(row["ious_after"], dtype=np.float64)
    bounds = np.cumsum([0, *row["sequence_boxes"]])
    if bounds[-1] != len(ious):
        raise ValueError(f"sequence_boxes {row['sequence_boxes']} do not add up to {len(ious)}")
    return {
        name: float(ious[start:stop].mean())
        for name, start, stop in zip(row["sequences"], bounds[:-1], bounds[1:])
    }


def _pseudo_methods(
    untrained: dict | None, by_seed: dict[str, dict[int, dict | None]], seeds: tuple[int, ...]
) -> dict[str, dict[int, dict | None]]:
    """Rows that are no trained head of their own, per seed: ``start`` (the start boxes, the same
    for every seed), ``top-4`` (the box-wise mean IoU after refinement of :data:`TOP_GROUP`'s
    runs of that seed, where all four have results) and ``mse-atom`` (the MSE head with ATOM's
    ascent instead of Algorithm S1)."""
    rows: dict[str, dict[int, dict | None]] = {}
    if untrained and "sequences" in untrained and "ious_after" in untrained.get("start", {}):
        start = {
            "ious_after": untrained["start"]["ious_after"],
            "above_75": untrained["start"]["above_75"],
            "sequences": untrained["sequences"],
            "sequence_boxes": untrained["sequence_boxes"],
        }
        rows["start"] = dict.fromkeys(seeds, start)
    top: dict[int, dict | None] = {}
    for seed in seeds:
        group = [by_seed.get(name, {}).get(seed) for name in TOP_GROUP]
        if all(row and _sequence_means(row) for row in group):
            if any(row["sequences"] != group[0]["sequences"] for row in group):
                raise ValueError("the top group's runs were evaluated on different sequences")
            ious = np.mean([row["ious_after"] for row in group], axis=0)
            top[seed] = {
                "ious_after": ious.tolist(),
                "sequences": group[0]["sequences"],
                "sequence_boxes": group[0]["sequence_boxes"],
            }
        else:
            top[seed] = None
    rows["top-4"] = top
    rows["mse-atom"] = {  # the MSE heads with the tracker's own box estimation
        seed: {
            **row["atom"],
            "sequences": row["sequences"],
            "sequence_boxes": row["sequence_boxes"],
        }
        if row and "atom" in row and "sequences" in row
        else None
        for seed, row in by_seed.get("mse", {}).items()
    }
    return rows


def seed_summary(rows: list[dict]) -> dict:
    """One method over its seeds' runs (``rows``, one evaluated result per seed): the mean IoU
    after refinement as a mean over per-sequence means (every sequence weighs the same, whatever
    its number of boxes), its standard deviation over seeds (training variance) and its standard
    error over sequences (of the per-sequence means averaged over seeds); empty when no row has
    per-sequence results."""
    tables = [table for row in rows if (table := _sequence_means(row))]
    failed = sum("failed" in row for row in rows)
    if not tables:
        return {"failed_seeds": failed} if failed else {}
    names = list(tables[0])
    if any(list(table) != names for table in tables):
        raise ValueError("the seeds' runs were evaluated on different sequences")
    values = np.array([[table[name] for name in names] for table in tables])  # (seeds, seqs)
    per_seed, per_sequence = values.mean(axis=1), values.mean(axis=0)
    return {
        "mean": float(per_seed.mean()),
        "std_over_seeds": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else None,
        "se_over_sequences": (
            float(per_sequence.std(ddof=1) / math.sqrt(len(names))) if len(names) > 1 else None
        ),
        "num_seeds": len(per_seed),
        "failed_seeds": failed,
        "per_seed": per_seed.tolist(),
        # shares and ranking of every seed's run (the shares are over all its boxes)
        **{
            name: [row[name] for row in rows if name in row]
            for name in ("above_75", "rank_corr", "step_length")
        },
        "per_sequence": dict(zip(names, per_sequence.tolist())),
    }


def seed_difference(first: dict[int, dict | None], second: dict[int, dict | None]) -> dict:
    """``first - second`` over the seeds both methods have (runs of one seed share their
    initialisation and data order, so they are paired): the mean difference, its standard
    deviation over seeds and its standard error over sequences; empty without common seeds."""
    common = [
        seed
        for seed in first
        if all(row and _sequence_means(row) for row in (first[seed], second.get(seed)))
    ]
    if not common:
        return {}
    a = seed_summary([first[seed] for seed in common])
    b = seed_summary([second[seed] for seed in common])
    per_seed = np.subtract(a["per_seed"], b["per_seed"])
    per_sequence = np.array(
        [a["per_sequence"][n] - b["per_sequence"][n] for n in a["per_sequence"]]
    )
    return {
        "mean": float(per_seed.mean()),
        "std_over_seeds": float(per_seed.std(ddof=1)) if len(common) > 1 else None,
        "se_over_sequences": (
            float(per_sequence.std(ddof=1) / math.sqrt(len(per_sequence)))
            if len(per_sequence) > 1
            else None
        ),
        "num_seeds": len(common),
    }


def _seed_lines(seeds: tuple[int, ...], summaries: dict, differences: dict) -> list[str]:
    """The report's section over seeds and sequences."""
    cell = lambda value: "-" if value is None else f"{value:.4f}"  # noqa: E731
    lines = [
        "",
        f"Over seeds {', '.join(map(str, seeds))} and test sequences: mean IoU after refinement "
        "as a mean over per-sequence means; +- standard deviation over seeds; +- standard error "
        "over sequences (of the per-sequence means averaged over seeds).",
        "",
        "| method | seeds | failed | IoU after | std over seeds | s.e. over sequences | per seed "
        "| > 0.75 | rank_corr | steps |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    mean = lambda values: f"{np.mean(values):.3f}" if values else "-"  # noqa: E731
    for name, summary in summaries.items():
        if "mean" in summary:
            per_seed = ", ".join(f"{v:.3f}" for v in summary["per_seed"])
            steps = ", ".join(f"{v:g}" for v in summary.get("step_length", [])) or "-"
            lines.append(
                f"| {name} | {summary['num_seeds']} | {summary['failed_seeds']} | "
                f"{summary['mean']:.4f} | {cell(summary['std_over_seeds'])} | "
                f"{cell(summary['se_over_sequences'])} | {per_seed} | "
                f"{mean(summary.get('above_75'))} | {mean(summary.get('rank_corr'))} | {steps} |"
            )
        elif summary:
            lines.append(f"| {name} | 0 | {summary['failed_seeds']} | - | - | - | - | - | - | - |")
    lines += ["", "| difference | seeds | mean | std over seeds | s.e. over sequences |",
              "|---|---|---|---|---|"]  # fmt: skip
    for pair, diff in differences.items():
        if diff:
            lines.append(
                f"| {pair} | {diff['num_seeds']} | {diff['mean']:+.4f} | "
                f"{cell(diff['std_over_seeds'])} | {cell(diff['se_over_sequences'])} |"
            )
    return lines


def m_curve(rows: dict) -> dict[str, dict[int, tuple[float, float] | str]]:
    """Per loss of :data:`CURVE_LOSSES`: M -> (mean IoU after refinement, its standard error over
    the boxes), or ``"failed"``."""
    curve: dict[str, dict[int, tuple[float, float] | str]] = {}
    for loss in CURVE_LOSSES:
        curve[loss] = {}
        for samples in CURVE_SAMPLES:
            row = rows.get(curve_run(loss, samples))
            if row is None:
                continue
            if "failed" in row:
                curve[loss][samples] = "failed"
                continue
            ious = np.asarray(row["ious_after"])
            curve[loss][samples] = (
                float(ious.mean()),
                float(ious.std(ddof=1) / np.sqrt(len(ious))),
            )
    return curve


def _curve_ranking(rows: dict) -> dict[str, list[tuple[int, float]]]:
    """Per loss of :data:`CURVE_LOSSES`: (M, validation rank correlation) of its finished runs."""
    ranking = {}
    for loss in CURVE_LOSSES:
        runs = ((m, rows.get(curve_run(loss, m), {})) for m in CURVE_SAMPLES)
        ranking[loss] = [(m, row["rank_corr"]) for m, row in runs if "rank_corr" in row]
    return ranking


def plot_m_curve(curve: dict, ranking: dict, path: Path) -> None:
    """Figure 3's layout, one line per loss against M (log scale): mean IoU after refinement
    (with its standard error) and the validation rank correlation of proposals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    for loss, points in curve.items():
        done = sorted((m, v) for m, v in points.items() if not isinstance(v, str))
        if done:
            left.errorbar(
                [m for m, _ in done],
                [v[0] for _, v in done],
                [v[1] for _, v in done],
                marker="o",
                capsize=3,
                label=loss.upper(),
            )
        for m in (m for m, v in points.items() if v == "failed"):
            left.axvline(m, color="grey", linestyle=":", linewidth=1)
        if ranking.get(loss):
            right.plot(*zip(*ranking[loss]), marker="o", label=loss.upper())
    left.set_ylabel("mean IoU after refinement (test)")
    right.set_ylabel("rank correlation of proposals (val)")
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_xticks(CURVE_SAMPLES, [str(m) for m in CURVE_SAMPLES])
        axis.set_xlabel("M (samples per training example)")
        if axis.get_legend_handles_labels()[0]:
            axis.legend()
    figure.suptitle("Box head trained with NCE+ / KLD-IS against the number of samples M")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _seed_list(text: str) -> tuple[int, ...]:
    """argparse type of ``--seeds``: distinct integers >= 0, e.g. ``1,2,3``."""
    try:
        seeds = tuple(int(v) for v in text.split(",") if v.strip())
        return StudyConfig(seeds=seeds).seeds
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected distinct integers >= 0 like 1,2,3; got {text!r}"
        ) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="study folder")
    parser.add_argument(
        "--features",
        type=Path,
        help="existing feature cache of the preset's pairs, only read (linked into OUT/features; "
        "default: built there once)",
    )
    parser.add_argument(
        "--preset", choices=PRESETS, default=StudyConfig().preset, help="training preset"
    )
    parser.add_argument("--runs", help="comma-separated runs to train/evaluate (default all)")
    parser.add_argument(
        "--sequences",
        help=f"test sequences' folder (pack-cpu: default {TEST_FOLDER}; default-cpu: the folder "
        "it trains on and tests the held-out sequences of, default the preset's)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--no-train", action="store_true", help="evaluate finished runs only")
    parser.add_argument("--no-eval", action="store_true", help="train only")
    parser.add_argument(
        "--seeds",
        type=_seed_list,
        default=StudyConfig().seeds,
        help="comma-separated seeds, every run trained once per seed (default 1)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    only = (
        tuple(name.strip() for name in args.runs.split(",") if name.strip()) if args.runs else None
    )
    run_study(
        args.out,
        StudyConfig(seeds=args.seeds, preset=args.preset),
        features=args.features,
        only=only,
        train=not args.no_train,
        evaluate=not args.no_eval,
        sequence_folder=args.sequences,
    )
    if not args.no_eval:
        print((args.out / "report.md").read_text(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
