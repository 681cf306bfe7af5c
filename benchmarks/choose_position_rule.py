"""The candidates of the rule by which the classifier and the siamese head decide the box
(:mod:`ebmtrack.lite.position`), measured as docs/results/position-rule.md fixes: on the training
pack's held-out clips and their look-alike versions, never the test sequences.

For each candidate (the runtime's ``atom`` with options), each set and tracker seed: the mean IoU
of the tracker's own boxes over the frames after the first, the fraction of those frames whose
centre error is at most 20 px (Prec@20), and ms per ``track()``; per set the means over clips and
seeds, and the rule's score S (the mean over the sets of (IoU + Prec@20) / 2). Each candidate's
row is written when it is done, and a rerun skips the rows its ``--out`` already holds.

Usage::

    python benchmarks/choose_position_rule.py --out runs/position-rule
    python benchmarks/choose_position_rule.py --out runs/position-rule --candidates default poe-4
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from selection_sets import lookalike_clips, measure_rule, pack_clips, print_rule_table
from tqdm import tqdm

from ebmtrack.api import load_tracker
from ebmtrack.files import write_json_atomic

WEIGHTS = (2, 4, 8, 16)
CANDIDATES: dict[str, dict] = {
    "default": {},
    "scale search": {"box_mode": "scale"},
    **{f"poe-{a}": {"classifier_weight": float(a)} for a in WEIGHTS},
    "no-growth": {"distractor_growth": False},
    **{
        f"poe-{a} + no-growth": {"classifier_weight": float(a), "distractor_growth": False}
        for a in WEIGHTS
    },
    "siamese-scale": {"box_mode": "siamese-scale"},
    "siamese-scale + no-growth": {"box_mode": "siamese-scale", "distractor_growth": False},
    "v3": {"siamese_model": "v3"},
    "v3 + poe-2": {"siamese_model": "v3", "classifier_weight": 2.0},
}
"""Options of the runtime's ``atom`` per candidate (docs/results/position-rule.md)."""


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
    path = args.out / "position_rule.json"
    record = json.loads(path.read_text()) if path.is_file() else {"seeds": args.seeds, "rows": {}}
    todo = [name for name in args.candidates if name not in record["rows"]]
    total = len(todo) * len(args.seeds) * sum(len(clips) for clips in sets.values())
    with tqdm(total=total, unit="run", desc="position rule") as bar:
        for name in todo:
            options = CANDIDATES[name]
            row = measure_rule(
                lambda seed, options=options: load_tracker("atom", seed=seed, **options),
                sets,
                args.seeds,
                bar,
            )
            record["rows"][name] = {"options": options} | row
            args.out.mkdir(parents=True, exist_ok=True)
            write_json_atomic(path, record)
    print_rule_table(record["rows"])


if __name__ == "__main__":
    main()
