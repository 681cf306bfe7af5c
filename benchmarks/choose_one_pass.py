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

from selection_sets import run_rule

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
    rows = run_rule(__doc__.split("\n\n")[0], CANDIDATES, build, "params", "one_pass")
    if "two-pass" in rows and len(rows) > 1:
        best, default = pick(rows)
        print(f"pick: {best}; " + ("becomes the default" if default else "a named fast variant"))


if __name__ == "__main__":
    main()
