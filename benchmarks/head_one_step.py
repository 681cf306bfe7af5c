"""Where a box head errs: one frame at a time, from the tracker's own boxes.

The tracker without a head (``atom``: classifier + scale search) tracks as usual. On every frame
a box head (``--weights``) also refines the tracker's box, as the gated box mode would, and its box
is reported and never fed back (``atom-polished``), so the head's errors cannot carry into the
next frame. Per set of sequences it prints the mean IoU with the ground truth of the tracker's
box and of the head's box, how often the head's box is the closer one, what a gate on the head's own
predicted gain (``box_accept_margin``) would keep, and the rank correlation between the
predicted gain and the real one. If the head is better frame by frame and worse as a tracker,
its errors compound; if it is worse frame by frame, it is worse on these images from the
tracker's boxes; if its predicted gain does not rank the real gain, a gate cannot find the
frames where it helps.

Sets: generated sequences and the training pack's held-out tracks (where settings are chosen),
and with ``--test`` a folder of test sequences, reported only (nothing is chosen on it):

    .venv/bin/python benchmarks/head_one_step.py \\
        --weights runs/scaling/d/nce+/iou_net.safetensors --test ../shared/data/sequences
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr
from selection_sets import generated, pack_tracks

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.evaluation.runner import track_sequence
from ebmtrack.ops.boxes import iou_xywh
from ebmtrack.process import configure_threads
from ebmtrack.tracking.atom.variants import ATOM_POLISHED

REPO = Path(__file__).resolve().parents[1]
MARGINS = (0.0, 0.05, 0.1, 0.2)


def one_step(sequence, weights: str, seed: int, options: dict) -> dict[str, np.ndarray]:
    """Per tracked frame: IoU of the tracker's box (its state), of the head's box (the box it
    reports; the state's where the head gave none), and the head's predicted gain (NaN where it
    gave none). The tracker is ``atom-polished`` with ``weights``: its state follows the scale
    search as in ``atom``, and the head's box is only reported."""
    tracker = ATOM_POLISHED(weights=weights, seed=seed, **options)
    estimator = tracker.box_estimator
    refine = estimator.refine
    gains: list[float] = []

    def spy(state, feats, center, size):  # note the predicted gain of each refinement
        refined = refine(state, feats, center, size)
        gains[-1] = float("nan") if refined is None else refined[1]
        return refined

    estimator.refine = spy
    states, reported = [], []

    class Recorder:  # the tracker as track_sequence sees it, noting each frame's two boxes
        name = tracker.name

        def initialize(self, frame, box):
            tracker.initialize(frame, box)

        def track(self, frame):
            gains.append(float("nan"))
            result = tracker.track(frame)
            states.append(tracker.state.box())
            reported.append(np.asarray(result.box, dtype=np.float64))
            return result

    track_sequence(Recorder(), sequence)
    truth = torch.as_tensor(np.asarray(sequence.ground_truth[1:]), dtype=torch.float64)
    visible = np.all(np.asarray(sequence.ground_truth[1:])[:, 2:] > 0, axis=1)
    if sequence.visible is not None:  # None: the data set flags no absent frames
        visible &= np.asarray(sequence.visible[1:])
    return {
        "tracker": iou_xywh(torch.as_tensor(np.stack(states)), truth).numpy()[visible],
        "head": iou_xywh(torch.as_tensor(np.stack(reported)), truth).numpy()[visible],
        "gain": np.asarray(gains)[visible],
    }


def summary(frames: dict[str, np.ndarray]) -> dict[str, float]:
    """Means over the frames of a set (those where the head gave a box, for the comparisons)."""
    refined = ~np.isnan(frames["gain"])
    tracker, head, gain = frames["tracker"], frames["head"], frames["gain"]
    real = head[refined] - tracker[refined]
    row = {
        "frames": int(len(tracker)),
        "refined": float(refined.mean()),
        "iou tracker": float(tracker.mean()),
        "iou head": float(head.mean()),
        "head closer": float((real > 0.01).mean()),
        "head farther": float((real < -0.01).mean()),
        "rank corr. predicted vs real gain": float(spearmanr(gain[refined], real).statistic),
    }
    for margin in MARGINS:
        taken = refined & (np.nan_to_num(gain, nan=-np.inf) >= margin)
        row[f"iou gated {margin}"] = float(np.where(taken, head, tracker).mean())
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", required=True, help="IoU-Net file")
    parser.add_argument("--seed", type=int, default=0, help="tracker seed")
    parser.add_argument("--generated", type=int, default=10, help="generated sequences")
    parser.add_argument("--frames", type=int, default=100, help="frames per generated sequence")
    parser.add_argument("--test", type=Path, help="a folder of test sequences (reported only)")
    parser.add_argument(
        "--step-length",
        type=float,
        help="the head's ascent step (box_step_length; default atom-polished's)",
    )
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "head_one_step.json")
    args = parser.parse_args()
    if not Path(args.weights).is_file():
        parser.error(f"--weights: no file {args.weights}")
    configure_threads(1)
    sets = {"generated": generated(args.generated, args.frames), "pack held-out": pack_tracks()}
    if args.test is not None:
        sets["test"] = load_folder(args.test)
    rows = {}
    for name, sequences in sets.items():
        if not sequences:  # --generated 0, or no pack beside the repository
            continue
        options = {} if args.step_length is None else {"box_step_length": args.step_length}
        parts = [one_step(s, args.weights, args.seed, options) for s in sequences]
        frames = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
        rows[name] = summary(frames)
        print(name, json.dumps(rows[name]), flush=True)
    keys = list(next(iter(rows.values())))
    print("\n| " + " | ".join(["set", *keys]) + " |\n|" + "---|" * (len(keys) + 1))
    for name, row in rows.items():
        cells = [f"{row[k]:.3f}" if isinstance(row[k], float) else str(row[k]) for k in keys]
        print(f"| {name} | " + " | ".join(cells) + " |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1, default=str))


if __name__ == "__main__":
    main()
