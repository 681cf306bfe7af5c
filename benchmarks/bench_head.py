"""A box head scored by what tracking needs, on held-out real frames of the training pack.

The sets: the training pack's held-out clips (``CLIP_HOLDOUT``: consecutive real frames) and
held-out tracks (``PACK_HOLDOUT``: frames far apart), never the test sequences. On every frame
after the first, the search region is cut around the box of the tracker without a head
(``atom``, tracker seed 0: its boxes are the start boxes the head meets in tracking, with the
tracker's own errors), and the head refines as ``atom-polished`` does (the same proposals,
ascent, step and top-k averaging; the reference modulation from the first frame's box):

- **ceiling**: mean IoU with the ground truth after the ascent started *at the ground-truth box*
  (in the search region cut around it);
- **gain by start IoU**: mean change in IoU when the ascent starts at the tracker's box, in bins of
  the start box's IoU (0.3-0.5, 0.5-0.7, 0.7-0.8, 0.8-0.9, 0.9-1.0);
- **rank correlation**: Spearman correlation of the head's score (predicted IoU, or f for an EBM
  head) and the true IoU of 32 boxes around the ground truth (IoU >= 0.5), mean over frames.

The headless tracker's boxes are computed once per set and kept in ``--out``. Usage::

    .venv/bin/python benchmarks/bench_head.py --weights runs/pack-stream/iou_net.safetensors \\
        --option backbone_runtime=onnx-int8 --out runs/bench_head/stream
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from ebmtrack.cli.options import parse_option
from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.evaluation.runner import track_sequence
from ebmtrack.ops.boxes import iou_xywh, perturb_boxes
from ebmtrack.ops.crop import apply_matrix, box_to_crop, crop_square
from ebmtrack.process import configure_threads
from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.tracking.atom.variants import ATOM, ATOM_POLISHED
from ebmtrack.training.box_regression import proposal_ranking_stats
from ebmtrack.training.sources.pack import CLIP_HOLDOUT, PACK_HOLDOUT

BINS = ((0.3, 0.5), (0.5, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.0))
NEAR_BOXES = 32


def held_out_sets(pack: Path) -> dict[str, list]:
    """``{"clips": held-out clips, "tracks": held-out tracks}`` of the training pack."""
    clips = [s for s in load_folder(pack / "clips") if s.name in CLIP_HOLDOUT]
    tracks = [s for s in load_folder(pack / "sequences") if s.name in PACK_HOLDOUT]
    return {"clips": clips, "tracks": tracks}


def headless_boxes(sequence, options: dict, cache: Path) -> np.ndarray:
    """The boxes (N, 4) of ``atom`` (seed 0) on ``sequence``, computed once into ``cache``."""
    path = cache / f"{sequence.name}.json"
    if path.exists():
        return np.asarray(json.loads(path.read_text()))
    boxes, _ = track_sequence(ATOM(seed=0, **options), sequence)
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(np.asarray(boxes).tolist()))
    return np.asarray(boxes)


def headless_options(options: dict) -> dict:
    """``options`` less the head's own fields, which ``atom`` (box_mode scale) refuses."""
    bound = AtomParams.mode_fields
    return {k: v for k, v in options.items() if "scale" in bound.get(k, ("scale",))}


def _to_frame(box_crop: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    scale = float(np.hypot(matrix[0, 0], matrix[1, 0]))
    inverse = np.linalg.inv(np.vstack([matrix, [0, 0, 1]]))[:2]
    center = apply_matrix(inverse, box_crop[:2] + box_crop[2:] / 2)
    size = box_crop[2:] / scale
    return np.concatenate([center - size / 2, size])


def _iou(box: np.ndarray, truth: np.ndarray) -> float:
    return float(iou_xywh(torch.tensor(box), torch.tensor(truth)))


def _search_region(tracker, frame: np.ndarray, box: np.ndarray) -> tuple[dict, np.ndarray]:
    """The head's features of the search region the tracker cuts around ``box``, and its map."""
    center = box[:2] + box[2:] / 2
    search = tracker.search
    patch, matrix = crop_square(
        frame, tuple(center), search.side(box[2:]), search.params.search_size
    )
    with torch.no_grad():
        feats = search.extract(search.to_tensor(patch[None]))
    return {layer: feats[layer] for layer in tracker.box_estimator.layers}, matrix


def _refined(tracker, feats: dict, matrix: np.ndarray, box: np.ndarray) -> np.ndarray:
    """The head's box (frame px) when its ascent starts at ``box``; ``box`` where it gives none."""
    box_crop = box_to_crop(box, matrix)
    center = box_crop[:2] + box_crop[2:] / 2
    size = box_crop[2:].astype(np.float64)
    refined = tracker.box_estimator.refine(tracker.state, feats, center, size)
    return box if refined is None else _to_frame(refined[0], matrix)


def score_sequence(sequence, starts: np.ndarray, weights: str, options: dict) -> dict:
    """Per frame: IoU of the start box, of the head's box from it, of the head's box from the
    ground truth, and the rank correlation among boxes near the ground truth."""
    tracker = ATOM_POLISHED(weights=weights, seed=0, **options)
    truth = sequence.ground_truth
    tracker.initialize(sequence.frame(0), truth[0])
    state = tracker.state
    generator = torch.Generator().manual_seed(0)
    rows = {"start": [], "refined": [], "ceiling": [], "rank_corr": []}
    annotated = sequence.annotated()
    for index in range(1, len(sequence)):
        if not annotated[index]:
            continue
        frame = sequence.frame(index)
        if frame.ndim == 2:
            frame = np.repeat(frame[:, :, None], 3, axis=2)
        state.frame_index = index + 1  # the refinement's proposal stream of this frame
        start, gt = starts[index], truth[index]
        # From the tracker's box, in the search region the tracker cuts around it ...
        feats, matrix = _search_region(tracker, frame, start)
        rows["start"].append(_iou(start, gt))
        rows["refined"].append(_iou(_refined(tracker, feats, matrix, start), gt))
        # ... and from the ground truth, in the search region around it.
        feats, matrix = _search_region(tracker, frame, gt)
        rows["ceiling"].append(_iou(_refined(tracker, feats, matrix, gt), gt))
        rows["rank_corr"].append(near_rank_correlation(tracker, feats, matrix, gt, generator))
    return {key: np.asarray(values) for key, values in rows.items()}


def near_rank_correlation(tracker, feats, matrix, truth, generator) -> float:
    """Spearman correlation of the head's score and the IoU of boxes near ``truth``."""
    box = torch.tensor(box_to_crop(truth, matrix), dtype=torch.float32)
    boxes, iou = perturb_boxes(box, NEAR_BOXES, 0.5, (0.02, 0.05, 0.1, 0.15), generator=generator)
    head = tracker.box_estimator.head.folded
    with torch.no_grad():
        test = head.test_features([feats[layer] for layer in tracker.box_estimator.layers])
        scores = head.predict_iou(tracker.state.modulation, test, boxes[None])
    return float(proposal_ranking_stats(scores.float(), (2 * iou - 1)[None])["rank_corr"])


def summarize(frames: dict[str, np.ndarray]) -> dict:
    """The section's metrics from the frames of one set."""
    gain = frames["refined"] - frames["start"]
    bins = {}
    for low, high in BINS:
        inside = (frames["start"] >= low) & (frames["start"] < high + (high == 1.0))
        bins[f"{low:.1f}-{high:.1f}"] = {
            "gain": float(gain[inside].mean()) if inside.any() else None,
            "frames": int(inside.sum()),
        }
    return {
        "frames": int(len(gain)),
        "ceiling": float(frames["ceiling"].mean()),
        "start_iou": float(frames["start"].mean()),
        "refined_iou": float(frames["refined"].mean()),
        "gain_by_start_iou": bins,
        "rank_corr": float(np.nanmean(frames["rank_corr"])),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", required=True, help="the head (iou_net.safetensors)")
    parser.add_argument("--pack", type=Path, default=Path("../shared/data/train"))
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of both trackers (e.g. backbone_runtime=onnx-int8, box_step_length=0.3)",
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("runs/bench_head"))
    args = parser.parse_args(argv)
    configure_threads(args.threads)
    options = dict(parse_option(text) for text in args.option)
    headless = headless_options(options)
    report = {"weights": args.weights, "options": options}
    for set_name, sequences in held_out_sets(args.pack).items():
        frames: dict[str, list] = {}
        cache = args.out / "headless" / set_name
        for sequence in sequences:
            starts = headless_boxes(sequence, headless, cache)
            for key, values in score_sequence(sequence, starts, args.weights, options).items():
                frames.setdefault(key, []).append(values)
        report[set_name] = summarize({k: np.concatenate(v) for k, v in frames.items()})
        print(set_name, json.dumps(report[set_name]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
