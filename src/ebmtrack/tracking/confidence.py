"""A tracker's confidence: the probability that its box overlaps the target with IoU > 0.5.

Each frame a tracker hands what it already computed (the classifier's score map and its
localisation, the scale search's peaks, the box head's value) to a :class:`ConfidenceEstimator`,
which turns them into a few named features (:func:`frame_features`, :data:`FEATURES`) and maps
them through a :class:`~ebmtrack.tracking.calibrator.Calibrator` (a logistic regression, possibly
followed by an isotonic map) fitted on training data (``python studies/confidence.py``).
The result is :attr:`ebmtrack.tracking.base.TrackResult.confidence`; without a calibrator it is
NaN. Nothing here changes what the tracker does.

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
import time
from collections.abc import Sequence

import numpy as np
from torch import Tensor

from ebmtrack.tracking.base import TrackStatus
from ebmtrack.tracking.localize import Localization

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
PEAK_RATE = 0.1
"""Update rate of the running mean of the peaks behind ``peak_ratio``."""


def frame_features(
    scores: Tensor,
    found: Localization,
    crop_size: float,
    target_size: Sequence[float],
    peak_level: float,
    scale_peaks: Sequence[float] = (),
    head_value: float = math.nan,
) -> dict[str, float]:
    """The features of one frame (see the module docstring).

    Args:
        scores: (H, W) the classifier's raw score map of the region the position comes from.
        found: its localisation (on the upsampled map).
        crop_size: side of the search region in crop pixels (its centre: the previous position).
        target_size: (w, h) of the target in crop pixels.
        peak_level: the running mean of the earlier frames' peaks (NaN: none yet).
        scale_peaks: the peaks of every region of the scale search (empty: none this frame).
        head_value: the box head's value at the reported box, NaN without one.
    """
    values = scores.detach().float().cpu().numpy()
    peak = float(found.score)
    spread = float(values.std())
    sharpness = (float(values.max()) - float(values.mean())) / spread if spread > 0 else 50.0
    lost = found.status == TrackStatus.NOT_FOUND
    other = found.other_score
    if lost or not math.isfinite(other) or peak <= 0:
        distractor = 1.0
    else:
        distractor = min(max(other / peak, 0.0), 1.0)
    centre = crop_size / 2.0
    jump = math.hypot(found.position[0] - centre, found.position[1] - centre)
    size = math.sqrt(max(float(target_size[0]) * float(target_size[1]), 1e-12))
    ratio = 1.0 if not math.isfinite(peak_level) else peak / max(peak_level, 1e-3)
    if len(scale_peaks) > 1:
        top = max(scale_peaks)
        scale_spread = min((top - min(scale_peaks)) / max(abs(top), 1e-6), 1.0)
    else:
        scale_spread = 0.0
    return {
        "peak": peak,
        "peak_ratio": min(max(ratio, -1.0), 3.0),
        "sharpness": min(max(sharpness, 0.0), 50.0),
        "distractor": distractor,
        "displacement": min(jump / size, 5.0),
        "not_found": float(lost),
        "uncertain": float(found.status == TrackStatus.UNCERTAIN),
        "hard_negative": float(found.status == TrackStatus.HARD_NEGATIVE),
        "scale_spread": scale_spread,
        "head_value": float(head_value),
    }


class ConfidenceEstimator:
    """One tracker's per-frame features and confidence, with the little state they need.

    Args:
        calibrator: maps features to a probability (:class:`~ebmtrack.tracking.calibrator.
            Calibrator`, any callable ``dict -> float``); None: the confidence is NaN (the
            features are still computed, for fitting one).

    After each call, ``last_features`` holds the frame's features and ``last_seconds`` the time
    the call took.
    """

    def __init__(self, calibrator=None) -> None:
        self.calibrator = calibrator
        self.last_features: dict[str, float] = {}
        self.last_seconds = 0.0
        self._peak_level = math.nan

    def reset(self) -> None:
        """Start a new sequence."""
        self.last_features = {}
        self._peak_level = math.nan

    def __call__(
        self,
        scores: Tensor,
        found: Localization,
        crop_size: float,
        target_size: Sequence[float],
        scale_peaks: Sequence[float] = (),
        head_value: float = math.nan,
    ) -> float:
        """The frame's confidence (arguments as :func:`frame_features`)."""
        tic = time.perf_counter()
        features = frame_features(
            scores, found, crop_size, target_size, self._peak_level, scale_peaks, head_value
        )
        peak = features["peak"]
        if math.isfinite(peak):
            level = self._peak_level
            self._peak_level = peak if not math.isfinite(level) else level + PEAK_RATE * (
                peak - level
            )
        self.last_features = features
        confidence = math.nan if self.calibrator is None else float(self.calibrator(features))
        self.last_seconds = time.perf_counter() - tic
        return confidence


def feature_matrix(rows: Sequence[dict[str, float]], names: Sequence[str] = FEATURES) -> np.ndarray:
    """(N, F) float64 array of ``rows`` (feature dicts) in the order of ``names``."""
    return np.array([[row.get(n, math.nan) for n in names] for row in rows], dtype=np.float64)
