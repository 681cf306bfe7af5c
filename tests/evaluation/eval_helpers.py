"""A fast registered tracker and generated sequences for ``ebmtrack eval`` tests."""

from __future__ import annotations

import numpy as np

from ebmtrack.tracking.base import TrackResult


class DriftTracker:
    """Reports the init box moved ``step`` px right per frame (deterministic, no model)."""

    def __init__(self, step: float = 0.0, model_dir=None):
        self.step = step

    def initialize(self, frame, box):
        self.box = np.asarray(box, dtype=float)

    def track(self, frame):
        self.box = self.box + [self.step, 0, 0, 0]
        return TrackResult(self.box.copy())


def drift(step: float = 0.0, model_dir=None) -> DriftTracker:
    return DriftTracker(step, model_dir)


def eval_argv(data, out, trackers, *flags):
    """``ebmtrack eval`` in this process, quietly."""
    common = ["--out", str(out), "--workers", "0", "--no-progress"]
    return ["eval", str(data), "--trackers", trackers, *common, *flags]


def sequences_folder(root, count: int = 3, frames: int = 6):
    """``count`` OTB-style sequences ``Seq0``.. of ``frames`` small frames; a 10x10 box moving
    1 px right per frame, starting at x = 5 + 3 * index."""
    import cv2

    for index in range(count):
        folder = root / f"Seq{index}" / "img"
        folder.mkdir(parents=True)
        lines = []
        for k in range(frames):
            cv2.imwrite(str(folder / f"{k + 1:04d}.png"), np.full((40, 60, 3), 20 * k, np.uint8))
            lines.append(f"{5 + 3 * index + k},10,10,10")
        (root / f"Seq{index}" / "groundtruth_rect.txt").write_text("\n".join(lines) + "\n")
    return root
