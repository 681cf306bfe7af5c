import math

import numpy as np
import pytest
import torch

from ebmtrack.models.backbones import create_backbone
from ebmtrack.tracking.atom import AtomParams, AtomTracker
from ebmtrack.tracking.base import (
    LOST_BELOW,
    TRACKED_FROM,
    TargetPresence,
    TrackResult,
    TrackStatus,
    target_presence,
)
from ebmtrack.tracking.confidence import FEATURES, ConfidenceEstimator, frame_features
from ebmtrack.tracking.localize import Localization, localize


def _peaks(*peaks, size=18):
    """A smooth (size, size) map with Gaussian peaks (row, col, height)."""
    rows, cols = np.mgrid[:size, :size]
    values = np.zeros((size, size))
    for row, col, height in peaks:
        values += height * np.exp(-((rows - row) ** 2 + (cols - col) ** 2) / 2.0)
    return torch.tensor(values, dtype=torch.float32)


def _features(scores, **kwargs):
    found = localize(scores, cell_px=16.0, crop_size=288, target_size=(40.0, 40.0))
    return frame_features(scores, found, 288, (40.0, 40.0), math.nan, **kwargs), found


def test_features_of_a_clean_peak_and_of_a_distractor():
    clean, found = _features(_peaks((9, 9, 1.0)))
    assert found.status == TrackStatus.NORMAL
    assert set(clean) == set(FEATURES)
    assert clean["peak"] == pytest.approx(1.0, abs=1e-3)
    assert clean["distractor"] < 0.01 and clean["displacement"] == pytest.approx(0.0, abs=0.1)
    two, found = _features(_peaks((9, 9, 1.0), (9, 2, 0.9)))
    assert found.status in (TrackStatus.UNCERTAIN, TrackStatus.HARD_NEGATIVE)
    assert two["distractor"] == pytest.approx(0.9, abs=0.02)
    assert two["sharpness"] < clean["sharpness"]
    assert two["uncertain"] + two["hard_negative"] == 1.0


def test_features_of_a_lost_target_and_of_a_jump():
    lost, found = _features(_peaks((9, 9, 0.1)))
    assert found.status == TrackStatus.NOT_FOUND
    assert lost["not_found"] == 1.0 and lost["distractor"] == 1.0
    far, _ = _features(_peaks((9, 15, 1.0)))
    # 6 cells of 16 px from the centre, a 40 px target: 2.4 target sizes.
    assert far["displacement"] == pytest.approx(2.4, abs=0.05)


def test_scale_spread_and_head_value_pass_through():
    features, _ = _features(_peaks((9, 9, 1.0)), scale_peaks=(0.8, 1.0, 0.9), head_value=0.7)
    assert features["scale_spread"] == pytest.approx(0.2)
    assert features["head_value"] == 0.7
    alone, _ = _features(_peaks((9, 9, 1.0)))
    assert alone["scale_spread"] == 0.0 and math.isnan(alone["head_value"])


def test_estimator_tracks_the_peak_level_and_needs_a_calibrator():
    estimator = ConfidenceEstimator()
    scores = _peaks((9, 9, 1.0))
    found = Localization((144.0, 144.0), 1.0, TrackStatus.NORMAL, 0.1)
    assert math.isnan(estimator(scores, found, 288, (40, 40)))
    assert estimator.last_features["peak_ratio"] == 1.0
    weaker = Localization((144.0, 144.0), 0.5, TrackStatus.NORMAL, 0.1)
    estimator(scores, weaker, 288, (40, 40))
    assert estimator.last_features["peak_ratio"] == pytest.approx(0.5)
    estimator.reset()
    estimator(scores, weaker, 288, (40, 40))
    assert estimator.last_features["peak_ratio"] == 1.0
    called = ConfidenceEstimator(lambda features: features["peak"] / 2)
    assert called(scores, found, 288, (40, 40)) == 0.5
    assert called.last_seconds > 0


def test_target_state_thresholds():
    assert target_presence(TRACKED_FROM) == TargetPresence.TRACKED
    assert target_presence(LOST_BELOW) == TargetPresence.UNCERTAIN
    assert target_presence(np.nextafter(LOST_BELOW, 0)) == TargetPresence.LOST
    assert target_presence(math.nan) == TargetPresence.UNKNOWN
    assert TrackResult(np.zeros(4), confidence=0.1).target == TargetPresence.LOST
    assert TrackResult(np.zeros(4)).target == TargetPresence.UNKNOWN


@pytest.mark.slow
def test_confidence_changes_no_box_of_the_tracker():
    torch.manual_seed(0)
    backbone = create_backbone("mobilenetv2", pretrained=False)
    rng = np.random.default_rng(0)
    background = rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)
    target = rng.integers(0, 256, (24, 30, 3), dtype=np.uint8)
    frames = []
    for t in range(6):
        frame = background.copy()
        frame[40 + t : 64 + t, 50 + 2 * t : 80 + 2 * t] = target
        frames.append(frame)
    params = AtomParams(
        search_size=96, box_mode="scale", precision="float32", backbone_runtime="torch"
    )
    runs = {}
    for name, calibrator in (("none", None), ("half", lambda f: 0.5 * (f["peak"] > 0))):
        tracker = AtomTracker(backbone, params=params, calibrator=calibrator)
        tracker.initialize(frames[0], np.array([50.0, 40.0, 30.0, 24.0]))
        runs[name] = [tracker.track(frame) for frame in frames[1:]]
    for plain, calibrated in zip(runs["none"], runs["half"], strict=True):
        assert np.array_equal(plain.box, calibrated.box)
        assert math.isnan(plain.confidence) and calibrated.confidence in (0.0, 0.5)
    assert tracker.confidence_estimator.last_features["scale_spread"] > 0
