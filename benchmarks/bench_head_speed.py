"""What a box head costs the tracker: `atom` against `atom-polished` with a head, in one run.

Both trackers run on the same decoded frames (initialize + ``--frames`` frames of a sequence),
float32, the int8 backbone, one thread, alternating runs so that load from other processes hits
both alike; the best of ``--rounds`` runs of each is reported with the ratio. Usage::

    python benchmarks/bench_head_speed.py --weights HEAD --step 0.3 --sequence Car1
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from ebmtrack.api import load_tracker
from ebmtrack.data.datasets.folder import load_folder

SEQUENCES = Path(__file__).resolve().parents[2] / "shared" / "data" / "sequences"


def fps(make, frames, box) -> float:
    tracker = make()
    start = time.perf_counter()
    tracker.initialize(frames[0], box)
    for frame in frames[1:]:
        tracker.track(frame)
    return len(frames) / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", required=True, help="the head of atom-polished")
    parser.add_argument("--step", type=float, default=0.3, help="its box_step_length (0.3)")
    parser.add_argument("--sequence", default="Car1")
    parser.add_argument("--frames", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    (sequence,) = [s for s in load_folder(SEQUENCES) if s.name == args.sequence]
    frames = [sequence.frame(i) for i in range(min(args.frames, len(sequence)))]
    common = {
        "runtime": "torch", "precision": "float32", "backbone_runtime": "onnx-int8", "threads": 1,
    }  # fmt: skip
    makers = {
        "atom": lambda: load_tracker("atom", **common),
        "atom-polished": lambda: load_tracker(
            "atom-polished", weights=args.weights, box_step_length=args.step, **common
        ),
    }
    load = os.getloadavg()[0]
    best = {name: 0.0 for name in makers}
    for _ in range(args.rounds):
        for name, make in makers.items():
            best[name] = max(best[name], fps(make, frames, sequence.init_box))
    report = {
        "fps": {k: round(v, 1) for k, v in best.items()},
        "ratio": round(best["atom-polished"] / best["atom"], 3),
        "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
        "frames": len(frames),
        "sequence": args.sequence,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
