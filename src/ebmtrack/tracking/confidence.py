"""A tracker's confidence: the probability that its box overlaps the target with IoU > 0.5.

Each frame a tracker hands what it already computed (the classifier's score map and its
localisation, the scale search's peaks, the box head's value) to a :class:`ConfidenceEstimator`,
which turns them into a few named features (:func:`frame_features`, :data:`FEATURES`) and maps
them through a :class:`~ebmtrack.tracking.calibrator.Calibrator` (a logistic regression, possibly
followed by an isotonic map) fitted on training data (``python studies/confidence.py``).
The result is :attr:`ebmtrack.tracking.base.TrackResult.confidence`; without a calibrator it is
NaN. Nothing here changes what the tracker does. The features and the estimator's state are
NumPy, one definition shared with the torch-free runtime (:mod:`ebmtrack.lite.confidence`); this
module hands them the score map as an array.

Features (one frame; crop pixels are the search region's):

- ``peak``: the classifier's score at the reported position (the tracker's raw ``score``).
- ``peak_ratio``: ``peak`` over the running mean of the earlier frames' peaks (rate
  :data:`PEAK_RATE`; the first tracked frame: 1), in [-1, 3]: a drop against the sequence's own
  level, whatever the sequence's score scale.
- ``sharpness``: (max - mean) / std of the raw score map (the peak-to-sidelobe ratio), in [0, 50].
- ``distractor``: the other peak's score over ``peak`` (:class:`~ebmtrack.tracking.localize.
  Localization`), in [0, 1]; 1 where the target is lost or no other peak was looked for.
- ``displacement``: how far the position is from the search region's centre (the previous
  position), in target sizes (sqrt(w h)), at most 5.
- ``not_found``, ``uncertain``, ``hard_negative``: 1 for a frame of that status, else 0.
- ``scale_spread``: (max - min) / |max| of the peaks of the scale search's regions, in [0, 1];
  0 on frames without a scale search.
- ``head_value``: the box head's value at its reported box (the mean of its top boxes' predicted
  IoU or energy); NaN where the head did not run (the calibrator fills it in).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from torch import Tensor

from ebmtrack.lite import confidence as lite
from ebmtrack.lite.confidence import PEAK_RATE
from ebmtrack.lite.localize import Localization

__all__ = [
    "DIRECTIONS",
    "FEATURES",
    "PEAK_RATE",
    "ConfidenceEstimator",
    "feature_matrix",
    "frame_features",
]

FEATURES: tuple[str, ...] = (
    "peak",
    "peak_ratio",
    "sharpness",
    "distractor",
    "displacement",
    "not_found",
    "uncertain",
    "hard_negative",
    "scale_spread",
    "head_value",
)
DIRECTIONS: dict[str, int] = {
    "peak": 1,
    "peak_ratio": 1,
    "sharpness": 1,
    "distractor": -1,
    "displacement": -1,
    "not_found": -1,
    "uncertain": -1,
    "head_value": 1,
}
"""The sign each feature's weight is held to when fitting (+1: the confidence never falls as it
grows, -1: never rises; the others are free)."""


def frame_features(scores: Tensor, found: Localization, *args, **kwargs) -> dict[str, float]:
    """The features of one frame: :func:`ebmtrack.lite.confidence.frame_features` (its
    arguments) on the score map ``scores`` (H, W) as a float32 array."""
    return lite.frame_features(_values(scores), found, *args, **kwargs)


class ConfidenceEstimator(lite.ConfidenceEstimator):
    """:class:`ebmtrack.lite.confidence.ConfidenceEstimator` on a tracker's score tensors."""

    def __call__(self, scores: Tensor, found: Localization, *args, **kwargs) -> float:
        """The frame's confidence (arguments as :func:`frame_features`)."""
        return super().__call__(_values(scores), found, *args, **kwargs)


def _values(scores: Tensor) -> np.ndarray:
    return scores.detach().float().cpu().numpy()


def feature_matrix(rows: Sequence[dict[str, float]], names: Sequence[str] = FEATURES) -> np.ndarray:
    """(N, F) float64 array of ``rows`` (feature dicts) in the order of ``names``."""
    return np.array([[row.get(n, math.nan) for n in names] for row in rows], dtype=np.float64)
