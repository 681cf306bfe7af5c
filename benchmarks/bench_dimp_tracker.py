"""Per-frame cost of the dimp-nce+ tracker against the default atom tracker, in one run.

Each configuration tracks the same frames of one real sequence (``../shared/data/sequences/<name>``
beside the repository) after a warm-up; reported per frame: mean CPU time (``process_time``,
nearly blind to other jobs on the cores), mean wall time, the FPS each implies, the ratio to
atom's CPU time, and the stage medians the trackers record in ``last_timings``.

    .venv/bin/python benchmarks/bench_dimp_tracker.py --threads 1 --frames 45
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from ebmtrack.api import load_tracker
from ebmtrack.data.io import list_images, read_image

CONFIGS: dict[str, tuple[str, dict]] = {
    "atom (default)": ("atom", {}),
    "dimp-nce+ (default)": ("dimp-nce+", {}),
    "dimp-nce+, 10 box steps": ("dimp-nce+", {"box_steps": 10}),
    "dimp-nce+, ONNX Runtime backbone": ("dimp-nce+", {"backbone_runtime": "onnx"}),
    "dimp-nce+, no box head": ("dimp-nce+", {"box_mode": "position"}),
}


def measure(name: str, options: dict, frames: list[np.ndarray], box: np.ndarray, warmup: int):
    tracker = load_tracker(name, **options)
    start = time.process_time()
    tracker.initialize(frames[0], box)
    init_cpu = time.process_time() - start
    cpu, wall, stages = [], [], []
    for frame in frames[1:]:
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        tracker.track(frame)
        cpu.append(time.process_time() - cpu_start)
        wall.append(time.perf_counter() - wall_start)
        stages.append(tracker.last_timings)
    cpu, wall, stages = np.array(cpu[warmup:]), np.array(wall[warmup:]), stages[warmup:]
    stage_ms = {k: 1000 * float(np.median([s[k] for s in stages])) for k in stages[0]}
    return init_cpu, cpu.mean(), wall.mean(), stage_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sequence", default="Car1")
    parser.add_argument("--frames", type=int, default=45)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    root = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "sequences"
    root = root / args.sequence
    if not root.is_dir():
        raise SystemExit(f"--sequence: {root} not found (the shared sequences sit beside the repo)")
    frames = [read_image(p) for p in list_images(root / "img")[: args.frames]]
    box = np.loadtxt(root / "groundtruth_rect.txt", delimiter=",", max_rows=1)
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), {args.sequence}, "
        f"{len(frames) - 1 - args.warmup} frames timed, load average {os.getloadavg()}"
    )
    print(
        "| tracker | first frame CPU (s) | CPU ms/frame | CPU FPS | wall ms/frame | wall FPS "
        "| CPU vs atom | stage medians, wall ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    reference = None
    for label, (name, options) in CONFIGS.items():
        init_cpu, cpu, wall, stages = measure(name, options, frames, box, args.warmup)
        reference = reference or cpu
        stage_text = ", ".join(f"{k} {v:.1f}" for k, v in stages.items())
        print(
            f"| {label} | {init_cpu:.2f} | {1000 * cpu:.1f} | {1 / cpu:.1f} | {1000 * wall:.1f} "
            f"| {1 / wall:.1f} | {cpu / reference:.2f}x | {stage_text} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
