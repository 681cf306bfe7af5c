"""Accuracy and cost of int8 backbone variants, on sequences no reported number uses.

For choosing between ways of quantizing the backbone (``backbone_runtime="onnx-int8"``): each
``--ranges`` table (written by ``python -m ebmtrack.training.int8_calibration``, e.g. with other
``--float-layers``) is run by the default tracker (``atom``, float32, one thread) beside the
float32 ONNX Runtime backbone, on generated sequences (:mod:`ebmtrack.data.synthetic`, seeded)
and on the training pack's held-out tracks (``PACK_HOLDOUT``: never calibrated on), for each
tracker seed. It prints the mean AUC on each set, their mean, and the CPU time per frame
(``process_time``: nearly blind to other jobs on the cores). The test sequences
(``../shared/data/sequences``) are never read.

    nice -n 5 .venv/bin/python benchmarks/bench_int8.py --ranges runs/int8/a.json,runs/int8/b.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from selection_sets import generated, pack_tracks, score_sets

from ebmtrack.models.backbones import OnnxBackbone
from ebmtrack.models.backbones.int8 import load_ranges
from ebmtrack.process import configure_threads
from ebmtrack.tracking.atom.variants import ATOM

REPO = Path(__file__).resolve().parents[1]


def make_tracker(ranges: Path | None, seed: int):
    tracker = ATOM(precision="float32", backbone_runtime="onnx", seed=seed)
    if ranges is not None:
        entries = {e.weights_key: e for e in load_ranges(ranges)}
        search = tracker.search
        probe = OnnxBackbone(tracker.backbone, layers=search.layers)
        search.extract = OnnxBackbone(
            tracker.backbone, layers=search.layers, int8=True, ranges=entries[probe.weights_key]
        )
    return tracker


def evaluate(ranges: Path | None, sets: dict[str, list], seed: int) -> dict:
    return score_sets(lambda: make_tracker(ranges, seed), sets)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranges", required=True, help="comma-separated ranges tables")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--generated", type=int, default=10, help="generated sequences")
    parser.add_argument("--frames", type=int, default=100, help="frames per generated sequence")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench_int8.json")
    args = parser.parse_args()
    configure_threads(1)
    sets = {"generated": generated(args.generated, args.frames), "pack held-out": pack_tracks()}
    variants: list[tuple[str, Path | None]] = [("float32 (onnx)", None)]
    for path in args.ranges.split(","):
        entry = load_ranges(path)[0]
        label = "int8, float " + "+".join(entry.float_layers) if entry.float_layers else "int8"
        variants.append((f"{label} ({Path(path).name})", Path(path)))
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"{', '.join(f'{n}: {len(s)} sequences' for n, s in sets.items())}; seeds {seeds}")
    print(f"| variant | seed | {' | '.join(f'AUC {n}' for n in sets)} | mean | CPU ms / frame |")
    print("|---|---|" + "---|" * (len(sets) + 2))
    rows = []
    for label, path in variants:
        for seed in seeds:
            row = {"variant": label, "seed": seed, **evaluate(path, sets, seed)}
            row["mean"] = float(np.mean([row[n] for n in sets]))
            rows.append(row)
            cells = " | ".join(f"{row[n]:.1f}" for n in sets)
            print(
                f"| {label} | {seed} | {cells} | {row['mean']:.2f} "
                f"| {row['cpu_ms_per_frame']:.1f} |",
                flush=True,
            )
    print("\n| variant | mean AUC over sets and seeds | CPU ms / frame |\n|---|---|---|")
    for label, _ in variants:
        mine = [r for r in rows if r["variant"] == label]
        print(
            f"| {label} | {np.mean([r['mean'] for r in mine]):.2f} "
            f"| {np.mean([r['cpu_ms_per_frame'] for r in mine]):.1f} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    main()
