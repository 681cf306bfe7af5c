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

from selection_sets import run_rule

from ebmtrack.api import load_tracker

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
    run_rule(
        __doc__.split("\n\n")[0],
        CANDIDATES,
        lambda options, seed: load_tracker("atom", seed=seed, **options),
        "options",
        "position_rule",
    )


if __name__ == "__main__":
    main()
