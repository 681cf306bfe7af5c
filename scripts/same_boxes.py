"""Check that a change leaves tracking results exactly as they were.

    python scripts/same_boxes.py record before.npz ../shared/data/sequences
    (change the code)
    python scripts/same_boxes.py record after.npz ../shared/data/sequences
    python scripts/same_boxes.py compare before.npz after.npz

``record`` runs each tracker (``--trackers``, default every registered tracker with a backbone of
ours) on every sequence of the
data set the way ``ebmtrack eval`` does (a fresh tracker per sequence, the global generators
seeded per sequence), with one torch thread so that float32 results are deterministic, and saves
every box at full precision. ``compare`` exits 1 unless every box is bit-identical.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

import cv2
import numpy as np
import torch


def record(out: str, dataset: str, trackers: list[str]) -> None:
    import ebmtrack
    from ebmtrack.data.datasets import load_dataset
    from ebmtrack.evaluation.runner import job_seed, track_sequence

    torch.set_num_threads(1)
    boxes = {}
    for name in trackers:
        for sequence in load_dataset(dataset):
            start = time.perf_counter()
            tracker = ebmtrack.load_tracker(name)
            seed = job_seed(0, sequence.name)
            random.seed(seed)
            np.random.seed(seed)  # noqa: NPY002  (trackers may use the legacy global generator)
            cv2.setRNGSeed(seed)
            torch.manual_seed(seed)
            boxes[f"{name}/{sequence.name}"], _ = track_sequence(tracker, sequence)
            np.savez(out, **boxes)
            print(f"{name} {sequence.name}: {time.perf_counter() - start:.1f} s", flush=True)


def compare(before: str, after: str) -> int:
    old, new = np.load(before), np.load(after)
    if set(old.files) != set(new.files):
        print(f"different runs: {sorted(set(old.files) ^ set(new.files))}")
        return 1
    changed = [k for k in old.files if not np.array_equal(old[k], new[k])]
    for key in changed:
        print(f"{key}: differs (max abs difference {np.abs(old[key] - new[key]).max():.3g} px)")
    total = sum(len(old[k]) for k in old.files)
    print(f"{len(old.files) - len(changed)} of {len(old.files)} runs identical ({total} boxes)")
    return 1 if changed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="run trackers and save their boxes")
    rec.add_argument("out", help="output .npz file")
    rec.add_argument("dataset", help="data set folder or LAYOUT:PATH, as for ebmtrack eval")
    rec.add_argument("--trackers", default="", help="comma-separated names (default: ours)")
    cmp = commands.add_parser("compare", help="compare two recordings exactly")
    cmp.add_argument("before")
    cmp.add_argument("after")
    args = parser.parse_args()
    if args.command == "record":
        names = [t for t in args.trackers.split(",") if t]
        if not names:
            from ebmtrack.tracking.registry import trackers_of_kind

            names = trackers_of_kind(backbone=True)
        record(args.out, args.dataset, names)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
