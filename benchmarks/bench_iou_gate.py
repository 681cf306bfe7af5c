"""Choose ``box_accept_margin`` (the IoU-Net's box only where it predicts a gain over the scale
search's box) on sequences no reported number uses.

Runs the default tracker (``atom``: classifier + scale search), ``atom-iounet`` with a head
(``--weights``, its ``--size-rate``), and the scale search + head with each ``--margins`` value,
for each tracker seed, on generated sequences (:mod:`ebmtrack.data.synthetic`, seeded) and on the
training pack's held-out tracks (``PACK_HOLDOUT``: never trained on). It prints the mean AUC on
each set and their mean. The test sequences (``../shared/data/sequences``) are never read.

    .venv/bin/python benchmarks/bench_iou_gate.py --weights runs/scaling/d/nce+/iou_net.safetensors
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from selection_sets import generated, pack_tracks, score_sets

from ebmtrack.process import configure_threads
from ebmtrack.tracking.atom.variants import ATOM, ATOM_IOUNET, CLASSIFIER_ONLY

REPO = Path(__file__).resolve().parents[1]


def variants(
    weights: str,
    size_rate: float,
    margins: list[float],
    baselines: bool,
    step_length: float | None = None,
    reported_only: bool = False,
) -> dict:
    """name -> a function of the seed that builds the tracker; ``step_length``: the heads'
    ascent step (``box_step_length``; None: the tracker's default); ``reported_only``: also the
    scale search + head whose box is reported and never fed back (``box_mode="polished"``)."""
    scale_search = {k: v for k, v in CLASSIFIER_ONLY.items() if k != "box_mode"}
    head = {"weights": weights}
    if step_length is not None:
        head["box_step_length"] = step_length
    step = "" if step_length is None else f", step {step_length}"
    made = {}
    if baselines:
        made["no head"] = lambda seed: ATOM(seed=seed)
        made[f"head (size rate {size_rate}{step})"] = lambda seed: ATOM_IOUNET(
            size_update_rate=size_rate, seed=seed, **head
        )
    if reported_only:
        made[f"scale search + head, reported only{step}"] = lambda seed: ATOM_IOUNET(
            box_mode="polished", seed=seed, **head, **scale_search
        )
    for margin in margins:
        made[f"scale search + head, margin {margin}{step}"] = lambda seed, m=margin: ATOM_IOUNET(
            box_mode="gated", box_accept_margin=m, seed=seed, **head, **scale_search
        )
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", required=True, help="IoU-Net file")
    parser.add_argument("--size-rate", type=float, default=1.0, help="the head's size rate")
    parser.add_argument("--margins", default="0,0.02,0.05,0.1", help="'' for none")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument(
        "--reported-only", action="store_true", help="also the head's box reported only"
    )
    parser.add_argument(
        "--step-length", type=float, help="the heads' ascent step (default: the tracker's)"
    )
    parser.add_argument("--generated", type=int, default=10, help="generated sequences")
    parser.add_argument("--frames", type=int, default=100, help="frames per generated sequence")
    parser.add_argument(
        "--no-baselines", action="store_true", help="the gated trackers only (no head, head)"
    )
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench_iou_gate.json")
    args = parser.parse_args()
    configure_threads(1)
    sets = {"generated": generated(args.generated, args.frames), "pack held-out": pack_tracks()}
    margins = [float(m) for m in args.margins.split(",") if m.strip()]
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []
    print("| tracker | seed | " + " | ".join(f"AUC {n}" for n in sets) + " | mean |")
    print("|---|---|" + "---|" * (len(sets) + 1))
    for name, build in variants(
        args.weights,
        args.size_rate,
        margins,
        not args.no_baselines,
        args.step_length,
        args.reported_only,
    ).items():
        for seed in seeds:
            aucs = score_sets(lambda b=build, s=seed: b(s), sets)
            del aucs["cpu_ms_per_frame"]
            mean = float(np.mean(list(aucs.values())))
            rows.append({"tracker": name, "seed": seed, **aucs, "mean": mean})
            cells = " | ".join(f"{v:.1f}" for v in aucs.values())
            print(f"| {name} | {seed} | {cells} | {mean:.2f} |", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
