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

from selection_sets import lookalike_clips, measure_rule, pack_clips, print_rule_table
from tqdm import tqdm

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
            params = CANDIDATES[name]
            row = measure_rule(
                lambda seed, params=params: build(params, seed), sets, args.seeds, bar
            )
            record["rows"][name] = {"params": params} | row
            args.out.mkdir(parents=True, exist_ok=True)
            write_json_atomic(path, record)
    print_rule_table(record["rows"])
    if "two-pass" in record["rows"] and len(record["rows"]) > 1:
        best, default = pick(record["rows"])
        print(f"pick: {best}; " + ("becomes the default" if default else "a named fast variant"))


if __name__ == "__main__":
    main()
