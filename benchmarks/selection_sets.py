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


def track_clip(tracker, sequence) -> dict:
    """IoU and Prec@20 of ``tracker``'s own boxes over the frames after the first of
    ``sequence``, and ms per ``track()``: the rule's measures (docs/results/position-rule.md)."""
    from ebmtrack.evaluation import metrics as M

    boxes, seconds = track_sequence(tracker, sequence)
    pred, truth = boxes[1:], sequence.ground_truth[1:]
    return {
        "iou": float(M.box_iou(pred, truth).mean()),
        "prec20": float((M.center_error(pred, truth) <= 20).mean()),
        "ms": 1000 * float(seconds[1:].mean()),
    }


def measure_rule(make_tracker: Callable, sets: dict[str, list], seeds: list[int], bar) -> dict:
    """:func:`track_clip` of ``make_tracker(seed)`` on every clip of every set and seed: per set
    the means (and each run), and the rule's score S, the mean over the sets of (IoU +
    Prec@20) / 2."""
    row: dict = {}
    for set_name, clips in sets.items():
        runs = {}
        for seed in seeds:
            for clip in clips:
                runs[f"{clip.name}/{seed}"] = track_clip(make_tracker(seed), clip)
                bar.update()
        row[set_name] = {
            key: float(np.mean([run[key] for run in runs.values()]))
            for key in ("iou", "prec20", "ms")
        } | {"runs": runs}
    row["S"] = float(np.mean([(row[s]["iou"] + row[s]["prec20"]) / 2 for s in sets]))
    return row


def print_rule_table(rows: dict) -> None:
    """The rows of :func:`measure_rule` (sets ``held-out`` and ``look-alike``) as a table."""
    print("| candidate | S | held-out IoU | Prec@20 | look-alike IoU | Prec@20 | ms |")
    print("|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        held, alike = row["held-out"], row["look-alike"]
        print(
            f"| {name} | {row['S']:.3f} | {held['iou']:.3f} | {held['prec20']:.3f} | "
            f"{alike['iou']:.3f} | {alike['prec20']:.3f} | {held['ms']:.1f} |"
        )


def run_rule(description: str, candidates: dict, make_tracker: Callable, key: str, name: str):
    """The command line of a rule's benchmark (``--out``, ``--seeds``, ``--candidates``): every
    candidate's :func:`measure_rule` with ``make_tracker(settings, seed)`` on the held-out clips
    and their look-alike versions, each row written to ``OUT/NAME.json`` when done (the settings
    under ``key``; a rerun skips the rows there), then the table; returns the rows."""
    import argparse
    import json

    from tqdm import tqdm

    from ebmtrack.files import write_json_atomic

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--candidates", nargs="+", default=list(candidates), metavar="NAME")
    args = parser.parse_args()
    unknown = [c for c in args.candidates if c not in candidates]
    if unknown:
        parser.error(f"--candidates: unknown {', '.join(unknown)}; valid: {', '.join(candidates)}")
    held_out = pack_clips()
    if not held_out:
        parser.error("the training pack's clips are not beside the repository (../shared)")
    sets = {"held-out": held_out, "look-alike": lookalike_clips()}
    path = args.out / f"{name}.json"
    record = json.loads(path.read_text()) if path.is_file() else {"seeds": args.seeds, "rows": {}}
    todo = [c for c in args.candidates if c not in record["rows"]]
    total = len(todo) * len(args.seeds) * sum(len(clips) for clips in sets.values())
    with tqdm(total=total, unit="run", desc=name.replace("_", " ")) as bar:
        for candidate in todo:
            settings = candidates[candidate]
            row = measure_rule(
                lambda seed, settings=settings: make_tracker(settings, seed), sets, args.seeds, bar
            )
            record["rows"][candidate] = {key: settings} | row
            args.out.mkdir(parents=True, exist_ok=True)
            write_json_atomic(path, record)
    print_rule_table(record["rows"])
    return record["rows"]
