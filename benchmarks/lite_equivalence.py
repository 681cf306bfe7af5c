"""Does the torch-free runtime track as the torch tracker does? Both on the same sequences and
seeds, from the same export (``ebmtrack export``), with three comparisons:

- **AUC**: the mean over sequences per seed, and over seeds (goal: the runtime within 0.5);
- **free-running boxes**: the largest per-frame difference over the first ``--frames`` frames,
  each tracker on its own (goal: 1 px). Float32 rounding differs between the two (OpenBLAS
  against PyTorch's kernels, another summation order) and the tracker amplifies it; for scale,
  ``--float64-reference`` also runs the torch tracker with its classifier trained in float64
  and reports how far the torch tracker itself moves;
- **frame by frame**: each of the first ``--frames`` frames tracked by both from the torch
  tracker's state (:func:`ebmtrack.export.copy_state`), the largest box difference (goal: 1 px),
  which compares the computation of each frame without the rounding carried from earlier ones.

Per-frame CPU milliseconds of ``track`` of both are recorded (the same process, one thread,
float32; run it with ``OPENBLAS_NUM_THREADS=1`` so that NumPy's products take one thread too).

    OPENBLAS_NUM_THREADS=1 python benchmarks/lite_equivalence.py \\
        --sequences ../shared/data/sequences --names Car1 --seeds 0 --out runs/lite-car1

Writes ``equivalence.json`` (every number) and ``equivalence.md`` (the tables) to ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np
import torch

import ebmtrack
from ebmtrack import lite
from ebmtrack.data.datasets import load_dataset
from ebmtrack.data.io import read_image
from ebmtrack.evaluation.scoring import score_run
from ebmtrack.export import copy_state, export_tracker
from ebmtrack.lite.files import is_export


def cpu_line() -> str:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return platform.processor()
    model = next(
        (ln.split(":", 1)[1].strip() for ln in text.splitlines() if "Model name" in ln), ""
    )
    flags = next((ln for ln in text.splitlines() if ln.startswith("Flags")), "")
    bf16 = "avx512_bf16" if "avx512_bf16" in flags else "no avx512_bf16"
    avx = "avx512f" if "avx512f" in flags else ("avx2" if "avx2" in flags else "no avx2")
    return f"{model}, {os.cpu_count()} cores, {avx}, {bf16}"


@contextlib.contextmanager
def torch_float64_training():
    """The torch tracker's classifier (first frame and updates) trained in float64, rounded to
    float32 after: the rounding of float32 training taken out of the torch tracker."""
    from ebmtrack.models import atom_classifier as ac
    from ebmtrack.tracking.atom import classifier as part

    fit, update = part.fit_classifier, part.update_filter

    def fit64(model, samples, labels, weights, gn_iters=6, cg_iters=10):
        wide = ac.AtomClassifier(model.config).double()
        with torch.no_grad():
            wide.filter.copy_(model.filter)
            wide.projection.copy_(model.projection)
        fit(wide, samples.double(), labels.double(), weights.double(), gn_iters, cg_iters)
        with torch.no_grad():
            model.filter.copy_(wide.filter.float())
            model.projection.copy_(wide.projection.float())

    def update64(model, projected, labels, weights, cg_iters=5, **_):
        wide = ac.AtomClassifier(model.config).double()
        with torch.no_grad():
            wide.filter.copy_(model.filter)
        update(wide, projected.double(), labels.double(), weights.double(), cg_iters)
        with torch.no_grad():
            model.filter.copy_(wide.filter.float())

    part.fit_classifier, part.update_filter = fit64, update64
    try:
        yield
    finally:
        part.fit_classifier, part.update_filter = fit, update


def run(tracker, frames: list[np.ndarray], box: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boxes (N, 4) (row 0: ``box``) and per-frame CPU seconds (N - 1,) of ``track`` (the
    process's CPU time: a busy machine changes it less than wall time)."""
    tracker.initialize(frames[0], box)
    boxes, seconds = [box], []
    for frame in frames[1:]:
        tic = time.process_time()
        boxes.append(tracker.track(frame).box)
        seconds.append(time.process_time() - tic)
    return np.array(boxes), np.array(seconds)


def frame_by_frame(name: str, export: Path, frames, box, seed: int, count: int) -> float:
    """The largest box difference of ``count`` frames tracked from the torch tracker's state."""
    theirs = ebmtrack.load_tracker(name, seed=seed, runtime="torch")
    ours = lite.load(export, seed=seed)
    theirs.initialize(frames[0], box)
    ours.initialize(frames[0], box)
    worst = 0.0
    for frame in frames[1 : count + 1]:
        copy_state(theirs, ours)
        a, b = theirs.track(frame), ours.track(frame)
        worst = max(worst, float(np.abs(a.box - b.box).max()))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=Path, default=Path("../shared/data/sequences"))
    parser.add_argument("--names", help="comma-separated sequence names (default: all)")
    parser.add_argument("--tracker", default="atom")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--frames", type=int, default=50, help="frames compared box by box")
    parser.add_argument("--export", type=Path, help="export folder (default: OUT/export)")
    parser.add_argument("--float64-reference", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    export = args.export or args.out / "export"
    if not is_export(export):
        export_tracker(args.tracker, export)
    names = args.names.split(",") if args.names else None
    sequences = load_dataset(str(args.sequences), sequences=names)
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []
    for sequence in sequences:
        frames = [read_image(path) for path in sequence.frames]
        box = sequence.init_box
        for seed in seeds:
            row = {"sequence": sequence.name, "seed": seed}
            ours_boxes, ours_seconds = run(lite.load(export, seed=seed), frames, box)
            theirs_boxes, theirs_seconds = run(
                ebmtrack.load_tracker(args.tracker, seed=seed, runtime="torch"), frames, box
            )
            row["auc_torch"] = 100 * score_run(theirs_boxes, sequence).summary()["auc"]
            row["auc_lite"] = 100 * score_run(ours_boxes, sequence).summary()["auc"]
            head = slice(0, args.frames + 1)
            row["free_px"] = float(np.abs(ours_boxes[head] - theirs_boxes[head]).max())
            row["free_frames_within_1px"] = int(
                (np.abs(ours_boxes[head] - theirs_boxes[head]).max(axis=1) <= 1).sum() - 1
            )
            row["step_px"] = frame_by_frame(args.tracker, export, frames, box, seed, args.frames)
            row["ms_torch"] = 1000 * float(np.mean(theirs_seconds))
            row["ms_lite"] = 1000 * float(np.mean(ours_seconds))
            if args.float64_reference:
                with torch_float64_training():
                    torch_tracker = ebmtrack.load_tracker(args.tracker, seed=seed, runtime="torch")
                    wide, _ = run(torch_tracker, frames, box)
                row["torch_float64_px"] = float(np.abs(wide[head] - theirs_boxes[head]).max())
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {}
    for seed in seeds:
        mine = [r for r in rows if r["seed"] == seed]
        summary[seed] = {
            "auc_torch": float(np.mean([r["auc_torch"] for r in mine])),
            "auc_lite": float(np.mean([r["auc_lite"] for r in mine])),
        }
    mean_torch = float(np.mean([s["auc_torch"] for s in summary.values()]))
    mean_lite = float(np.mean([s["auc_lite"] for s in summary.values()]))
    goals = {
        "auc_within_0.5": abs(mean_lite - mean_torch) <= 0.5,
        "free_running_within_1px": all(r["free_px"] <= 1 for r in rows),
        "frame_by_frame_within_1px": all(r["step_px"] <= 1 for r in rows),
    }
    report = {
        "tracker": args.tracker,
        "cpu": cpu_line(),
        "versions": json.loads((export / "manifest.json").read_text())["versions"],
        "frames_compared": args.frames,
        "rows": rows,
        "per_seed": summary,
        "mean_auc_torch": mean_torch,
        "mean_auc_lite": mean_lite,
        "goals": goals,
    }
    (args.out / "equivalence.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = [
        f"{args.tracker}, {len(sequences)} sequence(s), seeds {args.seeds}; {cpu_line()}",
        "",
        "| sequence | seed | AUC torch | AUC lite | free-running max px (frames <= 1 px) "
        "| frame-by-frame max px | torch float64 max px | CPU ms/frame torch | CPU ms/frame lite |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ref = f"{r['torch_float64_px']:.2f}" if "torch_float64_px" in r else "-"
        lines.append(
            f"| {r['sequence']} | {r['seed']} | {r['auc_torch']:.1f} | {r['auc_lite']:.1f} "
            f"| {r['free_px']:.2f} ({r['free_frames_within_1px']}/{args.frames}) "
            f"| {r['step_px']:.3f} | {ref} | {r['ms_torch']:.1f} | {r['ms_lite']:.1f} |"
        )
    lines += [
        "",
        f"mean AUC: torch {mean_torch:.2f}, lite {mean_lite:.2f}; goals: "
        + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in goals.items()),
    ]
    (args.out / "equivalence.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
