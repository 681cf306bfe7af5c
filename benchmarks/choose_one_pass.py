"""The candidates for one backbone pass a frame (``classifier_features=siamese``), measured as
docs/results/one-pass.md fixes: on the training pack's held-out clips and their look-alike
versions, never the test sequences.

Each candidate is the shipped ``atom`` export with some parameters changed (as ``ebmtrack export
--option ...`` writes them; the projection's dimension is one the export fixes), run by the
torch-free runtime with one thread. Per set and tracker seed: the mean IoU of the tracker's own
boxes over the frames after the first, Prec@20, ms per ``track()``; per set the means over clips
and seeds, and the rule's score S. Each row is written when done; a rerun skips the rows its
``--out`` holds.

Usage::

    python benchmarks/choose_one_pass.py --out runs/one-pass
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from selection_sets import lookalike_clips, pack_clips
from tqdm import tqdm

from ebmtrack.evaluation import metrics as M
from ebmtrack.evaluation.jobs import track_sequence
from ebmtrack.files import write_json_atomic
from ebmtrack.lite.files import Export
from ebmtrack.lite.tracker import LiteTracker
from ebmtrack.tracking.runtime import shipped_lite_export

ONE_PASS = {"classifier_features": "siamese"}
CANDIDATES: dict[str, dict] = {
    "two-pass": {},
    **{f"one-pass {d}": ONE_PASS | {"projection_dim": d} for d in (16, 32, 48, 64)},
    **{
        f"one-pass v3 {d}": ONE_PASS | {"siamese_model": "v3", "projection_dim": d}
        for d in (32, 64)
    },
}
"""Parameters changed in the shipped ``atom`` export per candidate (docs/results/one-pass.md)."""


def build(params: dict, seed: int) -> LiteTracker:
    """The runtime's ``atom`` with ``params`` changed in its export."""
    shipped = shipped_lite_export("atom")
    export = Export(shipped.folder, shipped.manifest, shipped.params | params | {"seed": seed})
    return LiteTracker(export)


def track_clip(params: dict, sequence, seed: int) -> dict:
    """IoU and Prec@20 over the frames after the first, and ms per ``track()``."""
    boxes, seconds = track_sequence(build(params, seed), sequence)
    pred, truth = boxes[1:], sequence.ground_truth[1:]
    return {
        "iou": float(M.box_iou(pred, truth).mean()),
        "prec20": float((M.center_error(pred, truth) <= 20).mean()),
        "ms": 1000 * float(seconds[1:].mean()),
    }


def measure(params: dict, sets: dict[str, list], seeds: list[int], bar) -> dict:
    row: dict = {"params": params}
    for set_name, clips in sets.items():
        runs = {}
        for seed in seeds:
            for clip in clips:
                runs[f"{clip.name}/{seed}"] = track_clip(params, clip, seed)
                bar.update()
        row[set_name] = {
            key: float(np.mean([run[key] for run in runs.values()]))
            for key in ("iou", "prec20", "ms")
        } | {"runs": runs}
    row["S"] = float(np.mean([(row[s]["iou"] + row[s]["prec20"]) / 2 for s in sets]))
    return row


def pick(rows: dict) -> tuple[str, bool]:
    """The one-pass candidate of the highest S, and whether it becomes the default (the rule of
    docs/results/one-pass.md)."""
    two = rows["two-pass"]
    best = max((name for name in rows if name != "two-pass"), key=lambda name: rows[name]["S"])
    row = rows[best]
    held = row["held-out"]["iou"] >= two["held-out"]["iou"] - 0.01
    return best, row["S"] >= two["S"] - 0.005 and held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES), metavar="NAME")
    args = parser.parse_args()
    unknown = [name for name in args.candidates if name not in CANDIDATES]
    if unknown:
        parser.error(f"--candidates: unknown {', '.join(unknown)}; valid: {', '.join(CANDIDATES)}")
    held_out = pack_clips()
    if not held_out:
        parser.error("the training pack's clips are not beside the repository (../shared)")
    sets = {"held-out": held_out, "look-alike": lookalike_clips()}
    path = args.out / "one_pass.json"
    record = json.loads(path.read_text()) if path.is_file() else {"seeds": args.seeds, "rows": {}}
    todo = [name for name in args.candidates if name not in record["rows"]]
    total = len(todo) * len(args.seeds) * sum(len(clips) for clips in sets.values())
    with tqdm(total=total, unit="run", desc="one pass") as bar:
        for name in todo:
            record["rows"][name] = measure(CANDIDATES[name], sets, args.seeds, bar)
            args.out.mkdir(parents=True, exist_ok=True)
            write_json_atomic(path, record)
    print("| candidate | S | held-out IoU | Prec@20 | look-alike IoU | Prec@20 | ms |")
    print("|---|---|---|---|---|---|---|")
    for name, row in record["rows"].items():
        held, alike = row["held-out"], row["look-alike"]
        print(
            f"| {name} | {row['S']:.3f} | {held['iou']:.3f} | {held['prec20']:.3f} | "
            f"{alike['iou']:.3f} | {alike['prec20']:.3f} | {held['ms']:.1f} |"
        )
    if "two-pass" in record["rows"] and len(record["rows"]) > 1:
        best, default = pick(record["rows"])
        print(f"pick: {best}; " + ("becomes the default" if default else "a named fast variant"))


if __name__ == "__main__":
    main()
