"""Accuracy and cost of the classifier-only tracker's scale search every k-th frame.

The default tracker crops three search regions per frame (the usual one and two 5 % apart in
scale) to search the target's scale. ``scale_search_interval=k`` searches on every k-th frame
only and runs one region on the frames between, so the backbone, most of the per-frame cost,
runs (k + 2) / k times per frame on average instead of 3. This script chooses k on sequences
no reported number uses: generated sequences (:mod:`ebmtrack.data.synthetic`, seeded) and the
training pack's sequences (``../shared/data/train/sequences``: 30 frames each, about 16
original frames apart, so scale changes are larger per step than in a video). For each k it
prints the mean AUC on each set and the CPU time per frame (``process_time``: nearly blind to
other jobs on the cores), in float32 with ONNX Runtime and one thread.

    nice -n 5 .venv/bin/python benchmarks/bench_scale_interval.py --intervals 1,2,3,5
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from selection_sets import generated, pack_tracks, score_sets

from ebmtrack.process import configure_threads
from ebmtrack.tracking.atom.variants import ATOM

REPO = Path(__file__).resolve().parents[1]


def evaluate(interval: int, sets: dict[str, list], params: dict) -> dict:
    # the registered `atom`
    row = score_sets(lambda: ATOM(scale_search_interval=interval, **params), sets)
    return {"interval": interval, **row}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--intervals", default="1,2,3,5")
    parser.add_argument("--generated", type=int, default=12, help="generated sequences")
    parser.add_argument("--frames", type=int, default=100, help="frames per generated sequence")
    parser.add_argument("--runtime", default="onnx")
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench_scale_interval.json")
    args = parser.parse_args()
    configure_threads(1)
    sets = {
        "generated": generated(args.generated, args.frames),
        "train pack": pack_tracks(held_out_only=False),
    }
    sets = {name: sequences for name, sequences in sets.items() if sequences}
    params = {"precision": args.precision, "backbone_runtime": args.runtime}
    print(f"{', '.join(f'{n}: {len(s)} sequences' for n, s in sets.items())}; {params}")
    print(f"| k | {' | '.join(f'AUC {name}' for name in sets)} | CPU ms / frame |")
    print("|---|" + "---|" * (len(sets) + 1))
    rows = []
    for interval in (int(k) for k in args.intervals.split(",")):
        row = evaluate(interval, sets, params)
        rows.append(row)
        cells = " | ".join(f"{row[name]:.1f}" for name in sets)
        print(f"| {interval} | {cells} | {row['cpu_ms_per_frame']:.1f} |", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"params": params, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
