"""Where a box head errs: one frame at a time, from the tracker's own boxes.

The tracker without a head (``atom``: classifier + scale search) tracks as usual. On every frame
a box head (``--weights``) also refines the box the tracker reports, exactly as ``atom-gated``
would, and its box is recorded and never used, so the head's errors cannot carry into the next
frame. Per set of sequences it prints the mean IoU with the ground truth of the tracker's box and
of the head's box, how often the head's box is the closer one, what a gate on the head's own
predicted gain (``iou_accept_margin``) would keep, and the rank correlation between the
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
from ebmtrack.runtime import configure_threads
from ebmtrack.tracking.atom.factory import ATOM_GATED

REPO = Path(__file__).resolve().parents[1]
MARGINS = (0.0, 0.05, 0.1, 0.2)


def head_box(tracker_box: np.ndarray, start_crop: tuple, refined_crop: np.ndarray) -> np.ndarray:
    """The head's box in frame pixels (x, y, w, h), from the tracker's box (frame px), the start
    box the head refined (its centre and size, crop px: the same box) and the head's box (xywh,
    crop px). The crop is an axis-aligned scaling of the frame."""
    center, size = (np.asarray(v, dtype=np.float64) for v in start_crop)
    scale = float(np.mean(size / tracker_box[2:]))  # crop px per frame px
    frame_center = tracker_box[:2] + tracker_box[2:] / 2
    refined_center = refined_crop[:2] + refined_crop[2:] / 2
    new_center = frame_center + (refined_center - center) / scale
    new_size = refined_crop[2:] / scale
    return np.concatenate([new_center - new_size / 2, new_size])


def one_step(sequence, weights: str, seed: int, options: dict) -> dict[str, np.ndarray]:
    """Per tracked frame: IoU of the tracker's box, of the head's box (the tracker's where the
    head gave none), and the head's predicted gain (NaN where it gave none)."""
    # The spy below takes no head box, whatever the gate says.
    tracker = ATOM_GATED(weights=weights, seed=seed, **options)
    refine = tracker._refine_box
    pending: list = []

    def spy(feats, center, size):  # refine, record, and keep the tracker's box
        pending.append(((center.copy(), size.copy()), refine(feats, center, size)))
        return None

    tracker._refine_box = spy
    heads: list[np.ndarray | None] = []
    gains: list[float] = []
    boxes = []

    class Recorder:  # the tracker as track_sequence sees it, noting each frame's head box
        name = tracker.name

        def initialize(self, frame, box):
            tracker.initialize(frame, box)

        def track(self, frame):
            pending.clear()
            result = tracker.track(frame)
            box = np.asarray(result.box, dtype=np.float64)
            refined = pending[0][1] if pending else None
            heads.append(None if refined is None else head_box(box, pending[0][0], refined[0]))
            gains.append(float("nan") if refined is None else refined[1])
            boxes.append(box)
            return result

    track_sequence(Recorder(), sequence)
    truth = torch.as_tensor(np.asarray(sequence.ground_truth[1:]), dtype=torch.float64)
    visible = np.all(np.asarray(sequence.ground_truth[1:])[:, 2:] > 0, axis=1)
    if sequence.visible is not None:  # None: the data set flags no absent frames
        visible &= np.asarray(sequence.visible[1:])
    own = torch.as_tensor(np.stack(boxes))
    head = torch.as_tensor(np.stack([b if h is None else h for b, h in zip(boxes, heads)]))
    return {
        "tracker": iou_xywh(own, truth).numpy()[visible],
        "head": iou_xywh(head, truth).numpy()[visible],
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
        "--step-length", type=float, help="the head's ascent step length (iou_step_length)"
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
        options = {} if args.step_length is None else {"iou_step_length": args.step_length}
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
