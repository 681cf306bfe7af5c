"""The sequences tracker settings are chosen on, shared by the benchmarks that choose them:
generated sequences (:mod:`ebmtrack.data.synthetic`, seeded), the training pack's tracks and clips
(also as look-alike sequences, :mod:`ebmtrack.data.lookalike`),
never the test sequences (``../shared/data/sequences``). Imported by the scripts of this folder
(``python benchmarks/bench_*.py`` puts it on the path)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.data.lookalike import lookalike_set
from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequence
from ebmtrack.evaluation.runner import track_sequence
from ebmtrack.evaluation.scoring import score_run
from ebmtrack.training.sources.pack import CLIP_HOLDOUT, PACK_HOLDOUT

PACK = Path(__file__).resolve().parents[2] / "shared" / "data" / "train" / "sequences"
CLIPS = PACK.parent / "clips"
SUMMARY = ("auc", "op50", "op75", "precision")


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


def pack_clips() -> list:
    """The training pack's held-out clips (``CLIP_HOLDOUT``: 50 consecutive real frames each,
    never trained on); none if the pack is not beside the repository."""
    if not CLIPS.is_dir():
        return []
    return [s for s in load_folder(CLIPS) if s.name in CLIP_HOLDOUT]


def lookalike_clips() -> list:
    """The held-out clips (:func:`pack_clips`) as look-alike sequences
    (:func:`ebmtrack.data.lookalike.lookalike_set`, seed 0, two copies of the target passing
    behind it); none if the pack is not beside the repository."""
    return lookalike_set(pack_clips(), seed=0, copies=2)


def score_sets(make_tracker: Callable, sets: dict[str, list]) -> dict:
    """Track every sequence of every set with a fresh ``make_tracker()``: mean AUC (%) per set
    and ``cpu_ms_per_frame`` (``process_time`` of the initialize + track calls)."""
    row = score_sets_by(make_tracker, sets)
    return {name: row[name]["auc"] for name in sets} | {"cpu_ms_per_frame": row["cpu_ms_per_frame"]}


def score_sets_by(make_tracker: Callable, sets: dict[str, list]) -> dict:
    """:func:`score_sets` with more numbers: ``{set: {"auc", "op50", "op75", "precision"}}`` in %
    (means over the set's sequences) and ``cpu_ms_per_frame``."""
    row: dict = {}
    cpu, frames = 0.0, 0
    for name, sequences in sets.items():
        scores = []
        for sequence in sequences:
            tracker = make_tracker()
            start = time.process_time()
            boxes, _ = track_sequence(tracker, sequence)
            cpu += time.process_time() - start
            frames += len(sequence)
            scores.append(score_run(boxes, sequence).summary())
        row[name] = {key: 100 * float(np.mean([s[key] for s in scores])) for key in SUMMARY}
    row["cpu_ms_per_frame"] = 1000 * cpu / frames
    return row
