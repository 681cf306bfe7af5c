"""Speed of ``atom-lt`` while lost and while tracking, on 640x480 frames, float32.

A test sequence's frames are resized to 640x480 (speed only: nothing is chosen here). For
``tracked``, ``atom-lt`` tracks them as usual (its frames are ``atom``'s); for ``lost``, the same
tracker is forced into the lost mode after initialisation, with a re-acquisition threshold no
peak reaches, so every frame is a whole-frame search (``lost_crops`` crops in one batch). Both
are timed in one process, alternating blocks of frames, so that the load of the machine weighs
on both alike. Printed: wall-clock FPS and CPU-time FPS (frames per second of CPU time the
process used; on one thread nearly blind to other jobs on the cores).

    nice -n 5 .venv/bin/python benchmarks/bench_longterm.py --threads 1
    nice -n 5 .venv/bin/python benchmarks/bench_longterm.py --threads 2
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import cv2
import numpy as np

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.process import configure_threads
from ebmtrack.tracking.registry import create_tracker

REPO = Path(__file__).resolve().parents[1]
SIZE = (640, 480)


def frames_640(sequence, count: int) -> tuple[list[np.ndarray], np.ndarray]:
    """The first ``count`` frames resized to 640x480, and the first box scaled alike."""
    frames = [
        cv2.resize(sequence.frame(i), SIZE, interpolation=cv2.INTER_AREA) for i in range(count)
    ]
    height, width = sequence.frame(0).shape[:2]
    scale = np.array([SIZE[0] / width, SIZE[1] / height] * 2)
    return frames, sequence.init_box * scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequence", default="Woman")
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--sequences", type=Path, default=REPO.parent / "shared/data/sequences")
    args = parser.parse_args()
    configure_threads(args.threads)
    sequence = next(s for s in load_folder(args.sequences) if s.name == args.sequence)
    frames, box = frames_640(sequence, args.frames)
    trackers = {
        "tracked": create_tracker("atom-lt", precision="float32"),
        "lost": create_tracker(
            "atom-lt", precision="float32", redetect_threshold=1e9, redetect_near_threshold=None
        ),
    }
    for tracker in trackers.values():
        tracker.initialize(frames[0], box)
    trackers["lost"].state.mode.lost = True
    # Timed by the status each frame reports (the tracked one may lose the target too).
    wall = dict.fromkeys(trackers, 0.0)
    cpu = dict.fromkeys(trackers, 0.0)
    counts = dict.fromkeys(trackers, 0)
    block = (len(frames) - 1) // args.blocks
    for b in range(args.blocks):
        for tracker in trackers.values():
            for frame in frames[1 + b * block : 1 + (b + 1) * block]:
                tic, cpu_tic = time.perf_counter(), time.process_time()
                result = tracker.track(frame)
                status = "lost" if result.status.value == "lost" else "tracked"
                wall[status] += time.perf_counter() - tic
                cpu[status] += time.process_time() - cpu_tic
                counts[status] += 1
    load = os.getloadavg()[0]
    print(f"640x480, float32, {args.threads} thread(s), load {load:.1f}, {args.sequence}")
    print("| mode | frames | wall FPS | CPU-time FPS |")
    print("|---|---|---|---|")
    for mode in trackers:
        print(
            f"| {mode} | {counts[mode]} | {counts[mode] / wall[mode]:.1f} "
            f"| {counts[mode] / cpu[mode]:.1f} |"
        )


if __name__ == "__main__":
    main()
