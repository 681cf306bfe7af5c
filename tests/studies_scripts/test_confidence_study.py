"""The confidence study: the fixed held-out rule, what is collected per frame, the fit."""

import numpy as np
import pytest
from confidence import _save_npz, collect_sequence, fit_all, is_held_out

from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequence
from ebmtrack.tracking.base import TrackResult
from ebmtrack.tracking.confidence import FEATURES


def test_held_out_rule():
    assert is_held_out("clips", "boat1") and is_held_out("clips", "car1_b")
    assert is_held_out("tracks", "zebrafish1") and not is_held_out("tracks", "bike1")
    assert is_held_out("generated", "gen003") and not is_held_out("generated", "gen004")


class TruthTracker:
    """Reports the ground truth, shifted on odd frames, with a 'peak' that says which."""

    def __init__(self, sequence):
        self.truth = sequence.ground_truth
        self.index = 0

        class Estimator:
            last_features = {}

        self.confidence_estimator = Estimator()

    def initialize(self, frame, box):
        self.index = 0

    def track(self, frame):
        self.index += 1
        shift = self.index % 2 == 1
        box = self.truth[self.index] + ([100.0, 0, 0, 0] if shift else 0.0)
        self.confidence_estimator.last_features = {"peak": 0.0 if shift else 1.0}
        return TrackResult(box, score=0.0 if shift else 1.0, confidence=0.5)


@pytest.mark.slow  # renders generated frames
def test_collect_and_fit(tmp_path):
    sequence = SyntheticSequence("gen000", SyntheticConfig(num_frames=12), seed=0)
    data = collect_sequence(TruthTracker(sequence), sequence)
    assert data["features"].shape == (12, len(FEATURES))
    assert np.isnan(data["iou"][0]) and np.all(np.isnan(data["features"][0]))
    right = data["iou"][1:] > 0.5
    visible = np.isfinite(data["iou"][1:])
    assert np.array_equal(right[visible], (np.arange(1, 12) % 2 == 0)[visible])
    for i in range(8):  # the same sequence as training and held-out sets, only to fit
        _save_npz(tmp_path / "features" / "atom" / "seed0" / f"generated__gen{i:03d}.npz", data)
    calibrators, held_out = fit_all(tmp_path, ["atom"])
    assert set(calibrators) == {"atom", "atom:score"}
    assert held_out["atom"]["frames_held_out"] == 2 * int(visible.sum())
    p = calibrators["atom"].predict(data["features"][1:][visible])
    assert np.all(p[right[visible]] > 0.9) and np.all(p[~right[visible]] < 0.1)
