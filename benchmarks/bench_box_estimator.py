"""Box estimators measured as they are used, on the training pack's clips (consecutive real
frames), never the test sequences: the rule of docs/results/box-estimator.md reads this table.

For each candidate (a registered tracker with options), on the held-out clips
(``CLIP_HOLDOUT``) and on a fixed set of training clips (``TRAIN_CLIPS``), over tracker seeds:

- **IoU**: mean IoU of the tracker's own boxes with the ground truth (frames after the first),
  i.e. the box estimator fed by the tracker's positions and its own earlier boxes;
- **OP75**: the share of those frames with IoU > 0.75;
- **gap**: training-clip IoU minus held-out IoU (how much of the precision is memorised);
- **ms**: mean milliseconds per tracked frame (``track()`` alone, the CPU's, one thread).

And, per clip set, the **oracle** of the siamese estimator: its box decoded in a search crop
centred on the ground truth and scaled from the true size (NanoTrack's window and penalties, no
size smoothing): what the estimator makes of a frame where the position and last size are right.

Usage::

    python benchmarks/bench_box_estimator.py --out runs/box-estimator --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from ebmtrack.api import load_tracker
from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.files import write_json_atomic
from ebmtrack.lite.siamese import SiameseBoxConfig
from ebmtrack.ops.boxes import iou_xywh
from ebmtrack.process import configure_threads
from ebmtrack.tracking.siamese import shipped_siamese
from ebmtrack.training.sources.pack import CLIP_HOLDOUT

TRAIN_CLIPS = (
    "Animal3", "Gull1", "S0601", "Skating2-1", "airplane-1", "building5", "group1_1", "traffic",
)  # fmt: skip
"""Training clips of the pack, fixed: every third name of the training clips, sorted."""

CANDIDATES: dict[str, tuple[str, dict]] = {
    "atom (scale search)": ("atom", {"box_mode": "scale", "size_update_rate": 0.6}),
    "siamese": ("atom", {"box_mode": "siamese"}),
    "siamese + EBM (pack NCE+ head)": (
        "atom",
        {"box_mode": "siamese-polished", "box_head_tag": "pack", "box_climb": "ebm"},
    ),
    "siamese + IoU ascent (pack head)": (
        "atom",
        {"box_mode": "siamese-polished", "box_head_tag": "pack", "box_step_length": 0.1},
    ),
}


def clip_sets(pack: Path) -> dict[str, list]:
    clips = load_folder(pack / "clips")
    return {
        "held-out": [s for s in clips if s.name in CLIP_HOLDOUT],
        "train": [s for s in clips if s.name in TRAIN_CLIPS],
    }


def track_ious(name: str, options: dict, sequence, seed: int) -> tuple[np.ndarray, float]:
    """IoU per frame after the first, and seconds per tracked frame."""
    tracker = load_tracker(name, seed=seed, runtime="torch", **options)
    truth = sequence.ground_truth
    tracker.initialize(sequence.frame(0), truth[0])
    boxes, seconds = [], 0.0
    for index in range(1, len(sequence)):
        frame = sequence.frame(index)
        tic = time.perf_counter()
        boxes.append(tracker.track(frame).box)
        seconds += time.perf_counter() - tic
    ious = iou_xywh(torch.tensor(np.asarray(boxes)), torch.tensor(truth[1:])).numpy()
    return ious, seconds / (len(sequence) - 1)


def oracle_ious(sequence) -> np.ndarray:
    """The siamese estimator's box from a crop centred on the truth, per frame after the first."""
    config = SiameseBoxConfig()
    estimator = shipped_siamese(config)
    truth = sequence.ground_truth
    first = truth[0]
    template = estimator.template(sequence.frame(0), first[:2] + first[2:] / 2, first[2:])
    ious = []
    for index in range(1, len(sequence)):
        box = truth[index]
        found = estimator.locate(sequence.frame(index), box[:2] + box[2:] / 2, box[2:], template)
        decoded = np.concatenate([found.center - found.raw_size / 2, found.raw_size])
        ious.append(float(iou_xywh(torch.tensor(decoded), torch.tensor(box))))
    return np.asarray(ious)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pack", type=Path, default=Path("../shared/data/train"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES), metavar="NAME")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    configure_threads(1)
    sets = clip_sets(args.pack)
    record: dict = {"seeds": args.seeds, "candidates": {}, "oracle": {}}
    for set_name, clips in sets.items():
        record["oracle"][set_name] = float(np.concatenate([oracle_ious(s) for s in clips]).mean())
    print("oracle (siamese, crop centred on the truth):", record["oracle"])
    for label in args.candidates:
        name, options = CANDIDATES[label]
        row: dict = {"tracker": name, "options": options}
        for set_name, clips in sets.items():
            per_seed, times = [], []
            for seed in args.seeds:
                runs = [track_ious(name, options, s, seed) for s in clips]
                ious = np.concatenate([r[0] for r in runs])
                per_seed.append((float(ious.mean()), float((ious > 0.75).mean())))
                times += [r[1] for r in runs]
            row[set_name] = {
                "iou": float(np.mean([p[0] for p in per_seed])),
                "op75": float(np.mean([p[1] for p in per_seed])),
                "iou_per_seed": [p[0] for p in per_seed],
                "ms": 1000 * float(np.mean(times)),
            }
        row["gap"] = row["train"]["iou"] - row["held-out"]["iou"]
        record["candidates"][label] = row
        held = row["held-out"]
        print(
            f"{label}: held-out IoU {held['iou']:.3f} OP75 {held['op75']:.3f} | train "
            f"{row['train']['iou']:.3f} | gap {row['gap']:+.3f} | {held['ms']:.1f} ms/frame"
        )
        args.out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(args.out / "box_estimators.json", record)


if __name__ == "__main__":
    main()
