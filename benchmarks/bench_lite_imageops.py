"""The torch-free runtime's ``track`` with OpenCV's image operations and with their NumPy versions
(:mod:`ebmtrack.lite.imageops`), in one process, on the same decoded frames::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_lite_imageops.py \\
        --export runs/atom-lite --sequence ../shared/data/sequences/Car1 --frames 50

The two paths alternate (``--rounds`` each, a fresh tracker a round). Prints one JSON line: per
path the mean ``track`` ms/frame, wall and CPU, and of that the crops' share (the tracker's
``last_timings["crop"]``), then the NumPy path's ratio to OpenCV's.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import cv2
import numpy as np

import ebmtrack.lite
from ebmtrack.lite import imageops


def track_times(export: Path, frames: list[np.ndarray], box: np.ndarray) -> dict[str, float]:
    tracker = ebmtrack.lite.load(export, threads=1)
    tracker.initialize(frames[0], box)
    wall, cpu, crop = [], [], []
    for frame in frames[1:]:
        t0, c0 = time.perf_counter(), time.process_time()
        tracker.track(frame)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        crop.append(tracker.last_timings["crop"])
    return {"wall": wall, "cpu": cpu, "crop": crop}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export", type=Path, required=True)
    parser.add_argument("--sequence", type=Path, required=True, help="an OTB-layout sequence")
    parser.add_argument("--frames", type=int, default=50, help="frames tracked after the first")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    paths = sorted((args.sequence / "img").glob("*.jpg"))[: args.frames + 1]
    frames = [cv2.cvtColor(cv2.imread(str(p)), cv2.COLOR_BGR2RGB) for p in paths]
    box = np.loadtxt(args.sequence / "groundtruth_rect.txt", delimiter=",", max_rows=1)
    paths_cv2 = {"opencv": imageops.cv2, "numpy": None}
    runs: dict[str, dict[str, list[float]]] = {name: {} for name in paths_cv2}
    for _ in range(args.rounds):
        for name, module in paths_cv2.items():
            imageops.cv2 = module
            for key, values in track_times(args.export, frames, box).items():
                runs[name].setdefault(key, []).extend(values)
    imageops.cv2 = paths_cv2["opencv"]
    report = {
        name: {f"{key}_ms": round(1000 * float(np.mean(v)), 2) for key, v in times.items()}
        for name, times in runs.items()
    }
    report["ratio_wall"] = round(report["numpy"]["wall_ms"] / report["opencv"]["wall_ms"], 3)
    report["ratio_cpu"] = round(report["numpy"]["cpu_ms"] / report["opencv"]["cpu_ms"], 3)
    report["frames"] = len(frames) - 1
    print(json.dumps(report))


if __name__ == "__main__":
    main()
