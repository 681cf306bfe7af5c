"""The sequences tracker settings are chosen on, shared by the benchmarks that choose them:
generated sequences (:mod:`ebmtrack.data.synthetic`, seeded) and the training pack's tracks,
never the test sequences (``../shared/data/sequences``). Imported by the scripts of this folder
(``python benchmarks/bench_*.py`` puts it on the path)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequence
from ebmtrack.evaluation.runner import track_sequence
from ebmtrack.evaluation.scoring import score_run
from ebmtrack.training.sources.pack import PACK_HOLDOUT

PACK = Path(__file__).resolve().parents[2] / "shared" / "data" / "train" / "sequences"


def generated(count: int, frames: int) -> list:
    """``count`` generated sequences of ``frames`` frames, seeds (2024, i)."""
    config = SyntheticConfig(num_frames=frames)
    return [SyntheticSequence(f"gen{i:03d}", config, seed=(2024, i)) for i in range(count)]


def pack_tracks(held_out_only: bool = True) -> list:
    """The training pack's held-out tracks (``PACK_HOLDOUT``), or all its tracks; none if the
    pack is not beside the repository."""
    if not PACK.is_dir():
        return []
    tracks = load_folder(PACK)
    return [s for s in tracks if s.name in PACK_HOLDOUT] if held_out_only else tracks


def score_sets(make_tracker: Callable, sets: dict[str, list]) -> dict:
    """Track every sequence of every set with a fresh ``make_tracker()``: mean AUC (%) per set
    and ``cpu_ms_per_frame`` (``process_time`` of the initialize + track calls)."""
    row: dict = {}
    cpu, frames = 0.0, 0
    for name, sequences in sets.items():
        aucs = []
        for sequence in sequences:
            tracker = make_tracker()
            start = time.process_time()
            boxes, _ = track_sequence(tracker, sequence)
            cpu += time.process_time() - start
            frames += len(sequence)
            aucs.append(score_run(boxes, sequence).summary()["auc"])
        row[name] = 100 * float(np.mean(aucs))
    row["cpu_ms_per_frame"] = 1000 * cpu / frames
    return row
