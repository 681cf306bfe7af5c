"""What the confidence costs per frame: the confidence step (features and calibrator, the call
of ``tracker.confidence_estimator``) beside the whole ``track`` call, in one run.

Each tracker tracks the frames of one training-pack clip (``../shared/data/train/clips/<name>``
beside the repository, never a test sequence) with its shipped calibrator. Reported per frame,
in CPU time of the tracking thread (``time.thread_time``: blind to other jobs on the cores, which
stretch wall times on a busy machine): the median, mean and max of the confidence step, the
mean of the whole ``track`` call, and the step's share of it.

    .venv/bin/python benchmarks/bench_confidence.py --clip Dog
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from ebmtrack.api import load_tracker
from ebmtrack.data.datasets.folder import load_folder

CLIPS = Path(__file__).resolve().parents[2] / "shared" / "data" / "train" / "clips"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clip", default="Dog")
    parser.add_argument("--trackers", default="atom,dimp-nce+")
    args = parser.parse_args()
    (sequence,) = load_folder(CLIPS / args.clip)
    frames = [sequence.frame(i) for i in range(len(sequence))]
    for name in args.trackers.split(","):
        tracker = load_tracker(name, threads=1, runtime="torch")
        tracker.initialize(frames[0], sequence.init_box)
        step, whole = [], []
        estimator = tracker.confidence_estimator

        def timed(*args, estimator=estimator, step=step, **kwargs):
            tic = time.thread_time()
            value = type(estimator).__call__(estimator, *args, **kwargs)
            step.append(time.thread_time() - tic)
            return value

        timed.last_seconds = 0.0  # read by the tracker for last_timings
        tracker.state.confidence_estimator = timed
        for frame in frames[1:]:
            tic = time.thread_time()
            result = tracker.track(frame)
            whole.append(time.thread_time() - tic)
            assert 0.0 <= result.confidence <= 1.0
        step, whole = 1000 * np.array(step), 1000 * np.array(whole)
        print(
            f"{name}: confidence {np.median(step):.3f} ms median, {step.mean():.3f} ms mean, "
            f"max {step.max():.3f} ms; track {whole.mean():.1f} ms mean; share "
            f"{100 * step.sum() / whole.sum():.2f} % ({len(step)} frames)"
        )


if __name__ == "__main__":
    main()
