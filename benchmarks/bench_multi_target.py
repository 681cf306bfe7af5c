"""Several targets in one pass against one tracker per target, in the same run.

For N = 1, 2, 4, 8 targets on the shipped demo clip (OTB Couple): the first frame's ground-truth
box and N - 1 boxes of its size spread over the frame (the boxes need not hold objects: the work
per frame hardly depends on what they hold). "one pass": ``ebmtrack.load_multi_tracker`` (one
backbone call per frame for all targets, each target its own classifier); "separate": N
``ebmtrack.load_tracker`` trackers, each tracking every frame on its own (N backbone calls per
frame). Both are timed over the same decoded frames (``initialize`` excluded, a warm-up pass
first), one after the other, so that they meet about the same load; FPS are video frames per
second with all N targets tracked. Float32 is forced (most CPUs have no bfloat16), so the
backbone runs in ONNX Runtime's int8 model on a CPU (``--runtime`` to change). "start" is the
seconds to build the trackers and initialize every target (one set of networks against N).
``--memory`` adds the resident memory of a fresh process per mode and N, after building,
initializing and tracking one frame.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_multi_target.py --frames 40 [--memory]

Prints a table and the 1-minute load average before each row; results go to
``runs/bench_multi_target.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def load_average() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return float("nan")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def target_boxes(first_box: np.ndarray, frame_shape, count: int) -> np.ndarray:
    """``first_box`` and ``count - 1`` boxes of its size on a grid over the frame (N, 4)."""
    height, width = frame_shape[:2]
    w, h = first_box[2:]
    xs = np.linspace(0, width - w, 4)
    ys = np.linspace(0, height - h, 3)
    grid = [(x, y) for y in ys for x in xs]
    boxes = [first_box] + [np.array([x, y, w, h]) for x, y in grid[: count - 1]]
    return np.array(boxes, dtype=np.float64)


def time_pass(track, frames) -> float:
    """Seconds for ``track(frame)`` over ``frames``."""
    tic = time.perf_counter()
    for frame in frames:
        track(frame)
    return time.perf_counter() - tic


def measure(count: int, frames, first, boxes, options: dict, warmup: int) -> dict:
    import ebmtrack

    tic = time.perf_counter()
    multi = ebmtrack.load_multi_tracker("atom", threads=1, **options)
    multi.initialize(first, boxes)
    one_pass_start = time.perf_counter() - tic
    tic = time.perf_counter()
    separate = [ebmtrack.load_tracker("atom", threads=1, **options) for _ in range(count)]
    for tracker, box in zip(separate, boxes):
        tracker.initialize(first, box)
    separate_start = time.perf_counter() - tic

    def track_separately(frame):
        for tracker in separate:
            tracker.track(frame)

    time_pass(multi.track, frames[:warmup])
    time_pass(track_separately, frames[:warmup])
    calls_before = multi.backbone_calls
    one_pass = time_pass(multi.track, frames[warmup:])
    calls = multi.backbone_calls - calls_before
    alone = time_pass(track_separately, frames[warmup:])
    timed = len(frames) - warmup
    return {
        "targets": count,
        "frames": timed,
        "one_pass_fps": timed / one_pass,
        "separate_fps": timed / alone,
        "speedup": alone / one_pass,
        "backbone_calls_per_frame": calls / timed,
        "one_pass_start_seconds": one_pass_start,
        "separate_start_seconds": separate_start,
        "runtime": multi.prototype.backbone_runtime,
    }


def resident_mib() -> float:
    text = Path("/proc/self/status").read_text()
    return int(text.split("VmRSS:", 1)[1].split()[0]) / 1024


def memory_child(mode: str, count: int, options: dict) -> None:
    """Print the resident memory (MiB) after building ``count`` targets' trackers in ``mode``
    (``one`` pass or ``separate``), initializing them and tracking one frame."""
    import ebmtrack
    from ebmtrack.evaluation.demo import demo_sequence

    sequence = demo_sequence(2)
    first, second = sequence.frame(0), sequence.frame(1)
    boxes = target_boxes(np.asarray(sequence.init_box, dtype=np.float64), first.shape, count)
    alive = []  # every tracker stays alive until the memory is read
    if mode == "one":
        alive.append(ebmtrack.load_multi_tracker("atom", threads=1, **options))
        alive[0].initialize(first, boxes)
        alive[0].track(second)
    else:
        for box in boxes:
            alive.append(ebmtrack.load_tracker("atom", threads=1, **options))
            alive[-1].initialize(first, box)
            alive[-1].track(second)
    print(f"{resident_mib():.0f} MiB, {len(alive)} tracker object(s)")


def memory_rows(counts, options: dict) -> list[dict]:
    """Resident memory of a fresh process per (mode, N)."""
    import subprocess
    import sys

    rows = []
    for count in counts:
        row = {"targets": count}
        for mode in ("one", "separate"):
            command = [sys.executable, __file__, "--memory-child", f"{mode}:{count}",
                       "--runtime", options["backbone_runtime"],
                       "--search-size", str(options["search_size"])]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            row[f"{mode}_mib"] = float(done.stdout.splitlines()[-1].split()[0])
        rows.append(row)
        print(f"| {count} | {row['one_mib']:.0f} | {row['separate_mib']:.0f} |", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=40, help="frames tracked after the first")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--targets", default="1,2,4,8")
    parser.add_argument("--search-size", type=int, default=288)
    parser.add_argument("--runtime", default="auto", help="backbone_runtime option")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench_multi_target.json")
    parser.add_argument(
        "--memory", action="store_true", help="also the resident memory, a fresh process each"
    )
    parser.add_argument("--memory-only", action="store_true", help="the memory rows alone")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    options = {
        "runtime": "torch",
        "precision": "float32",
        "search_size": args.search_size,
        "backbone_runtime": args.runtime,
    }
    if args.memory_child:
        mode, count = args.memory_child.split(":")
        memory_child(mode, int(count), options)
        return

    from ebmtrack.evaluation.demo import demo_sequence

    sequence = demo_sequence(args.frames + args.warmup + 1)
    frames = [sequence.frame(i) for i in range(len(sequence))]
    first, rest = frames[0], frames[1:]
    header = {
        "cpu": cpu_model(),
        "cores": len(os.sched_getaffinity(0)),
        "torch_threads": 1,
        "clip": f"{sequence.name}, {first.shape[1]}x{first.shape[0]}",
        "options": options,
    }
    import ebmtrack

    # Once before the rows: the first tracker of a process exports / loads the ONNX model and
    # warms the allocator, which would count against whichever mode ran first.
    ebmtrack.load_tracker("atom", threads=1, **options).initialize(first, sequence.init_box)
    print(json.dumps(header))
    print("| targets | one pass FPS | separate FPS | one pass / separate | backbone calls "
          "per frame | start (build + initialize) s, one pass / separate | load |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    rows = []
    for count in (int(n) for n in args.targets.split(",") if not args.memory_only):
        load = load_average()
        boxes = target_boxes(np.asarray(sequence.init_box, dtype=np.float64), first.shape, count)
        row = {**measure(count, rest, first, boxes, options, args.warmup), "load": load}
        rows.append(row)
        print(
            f"| {count} | {row['one_pass_fps']:.1f} | {row['separate_fps']:.1f} | "
            f"{row['speedup']:.2f}x | {row['backbone_calls_per_frame']:.0f} | "
            f"{row['one_pass_start_seconds']:.1f} / {row['separate_start_seconds']:.1f} | "
            f"{load:.2f} |",
            flush=True,
        )
    memory = []
    if args.memory or args.memory_only:
        print("\n| targets | one pass MiB | separate MiB |\n|---|---|---|")
        memory = memory_rows([int(n) for n in args.targets.split(",")], options)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {**header, "rows": rows, "memory": memory}
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
