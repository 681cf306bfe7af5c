"""The NumPy confidence: the torch tracker's features and calibrator, to float precision."""

import math

import numpy as np
import pytest
import torch

from ebmtrack.lite import confidence as lite
from ebmtrack.lite.localize import Localization
from ebmtrack.lite.result import TrackStatus
from ebmtrack.tracking import confidence as ref
from ebmtrack.tracking.calibrator import Calibrator, fit_calibrator
from ebmtrack.tracking.localize import Localization as TorchLocalization


def test_features_and_probabilities_are_the_torch_trackers():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, len(ref.FEATURES)))
    y = (x[:, 0] + rng.normal(0, 0.5, 300) > 0).astype(float)
    x[::7, -1] = np.nan
    calibrator = fit_calibrator(x, y, ref.FEATURES, ref.DIRECTIONS, isotonic=True)
    from dataclasses import asdict

    entry = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(calibrator).items()}
    ours = lite.ConfidenceEstimator(lite.Calibrator(entry))
    theirs = ref.ConfidenceEstimator(calibrator)
    for step, status in enumerate(TrackStatus):
        if status == TrackStatus.LOST:
            continue
        scores = rng.normal(size=(18, 18)).astype(np.float32)
        found = (
            (120.0 + step, 130.0),
            float(scores.max()),
            status,
            math.nan if step == 0 else 0.4,
        )
        got = ours(scores, Localization(*found), 288, (40.0, 30.0), [1.0, 0.7, 0.8])
        want = theirs(
            torch.from_numpy(scores), TorchLocalization(*found), 288, (40.0, 30.0), [1.0, 0.7, 0.8]
        )
        assert got == pytest.approx(want, abs=1e-12)
        assert ours.last_features == pytest.approx(theirs.last_features, nan_ok=True)
    assert isinstance(Calibrator, type)


def test_a_malformed_calibrator_is_refused():
    with pytest.raises(ValueError, match="features"):
        lite.Calibrator({"features": []})
    entry = {
        "features": ["peak"],
        "fill": [0.0],
        "mean": [0.0],
        "scale": [0.0],
        "weights": [1.0],
        "bias": 0.0,
        "isotonic_x": [],
        "isotonic_y": [],
    }
    with pytest.raises(ValueError, match="scale"):
        lite.Calibrator(entry)
