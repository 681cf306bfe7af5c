"""The torch-free runtime's ``track()`` speed by frame size: is its cost flat in the frame's size?

Each tracker (``--trackers``: ``NAME`` or ``NAME:KEY=VALUE;KEY=VALUE``, default the default and
the two-pass tracker) tracks the first ``--frames`` frames of Jumping (352x288) and the same
frames resized to 1920x1080 and 3840x2160, the box resized with them, so that the networks see
the same crops at every size. Frames are decoded and resized beforehand (decoding excluded); one
thread; after a warm-up pass, the steady ``track()`` FPS (initialize excluded), best of
``--repeats`` passes in one process per tracker. Each row gives the FPS per size and the ratio
of each size's FPS to 352x288's: one run, the same frames.

    python benchmarks/bench_runtime_frame_size.py --frames 60
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import cv2
import numpy as np
from bench_speed import cpu_header, tracker_items

import ebmtrack
from ebmtrack.data.io import list_images, read_image

SEQUENCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "sequences" / "Jumping"
SIZES = ((352, 288), (1920, 1080), (3840, 2160))


def steady_fps(tracker, frames: list[np.ndarray], box: np.ndarray, repeats: int) -> float:
    tracker.initialize(frames[0], box)
    for frame in frames[1:6]:  # warm-up
        tracker.track(frame)
    best = 0.0
    for _ in range(repeats):
        tracker.initialize(frames[0], box)
        tic = time.perf_counter()
        for frame in frames[1:]:
            tracker.track(frame)
        best = max(best, (len(frames) - 1) / (time.perf_counter() - tic))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--trackers", default="atom,atom:classifier_features=backbone")
    args = parser.parse_args()
    if not SEQUENCE.is_dir():
        parser.error(f"--frames: the sequence {SEQUENCE.name} is not beside the repository")
    images = [read_image(p) for p in list_images(SEQUENCE / "img")[: args.frames]]
    box = np.loadtxt(SEQUENCE / "groundtruth_rect.txt", delimiter=",", max_rows=1)
    height, width = images[0].shape[:2]
    print(
        f"CPU: {cpu_header()['cpu']}; Jumping, {len(images)} frames, one thread, "
        f"best of {args.repeats}"
    )
    print(
        "| tracker | "
        + " | ".join(f"{w}x{h} FPS" for w, h in SIZES)
        + " | "
        + " | ".join(f"{w}x{h} / {SIZES[0][0]}x{SIZES[0][1]}" for w, h in SIZES[1:])
        + " |"
    )
    print("|---" * (2 * len(SIZES)) + "|")
    for item, name, options in tracker_items(args.trackers):
        fps = []
        for size in SIZES:
            sx, sy = size[0] / width, size[1] / height
            frames = [cv2.resize(image, size, interpolation=cv2.INTER_LINEAR) for image in images]
            scaled = box * np.array([sx, sy, sx, sy])
            tracker = ebmtrack.load_tracker(name, threads=1, **options)
            fps.append(steady_fps(tracker, frames, scaled, args.repeats))
        ratios = " | ".join(f"{f / fps[0]:.2f}" for f in fps[1:])
        print(f"| {item} | " + " | ".join(f"{f:.1f}" for f in fps) + f" | {ratios} |", flush=True)


if __name__ == "__main__":
    main()
