"""The tracker's confidence in NumPy: the per-frame features (:func:`frame_features`, described
in :mod:`ebmtrack.tracking.confidence`) and their running state (:class:`ConfidenceEstimator`),
one definition for the torch trackers and the torch-free runtime, and the calibrator of
:mod:`ebmtrack.tracking.calibrator` (a logistic regression, then an optional isotonic map) read
from the export's JSON (tested equal to the torch tracker's)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ebmtrack.lite.localize import Localization
from ebmtrack.lite.result import TrackStatus

__all__ = ["PEAK_RATE", "Calibrator", "ConfidenceEstimator", "frame_features"]

PEAK_RATE = 0.1
"""Update rate of the running mean of the peaks behind ``peak_ratio``."""


def frame_features(
    scores: np.ndarray,
    found: Localization,
    crop_size: float,
    target_size: Sequence[float],
    peak_level: float,
    scale_peaks: Sequence[float] = (),
    head_value: float = math.nan,
) -> dict[str, float]:
    """The features of one frame (listed in :mod:`ebmtrack.tracking.confidence`).

    Args:
        scores: (H, W) the classifier's raw score map of the region the position comes from.
        found: its localisation (on the upsampled map).
        crop_size: side of the search region in crop pixels (its centre: the previous position).
        target_size: (w, h) of the target in crop pixels.
        peak_level: the running mean of the earlier frames' peaks (NaN: none yet).
        scale_peaks: the peaks of every region of the scale search (empty: none this frame).
        head_value: the box head's value at the reported box, NaN without one.
    """
    values = np.asarray(scores, dtype=np.float32)
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


class Calibrator:
    """``p = iso(sigmoid(b + sum_i w_i (x_i - m_i) / s_i))``, NaN inputs filled, from the JSON
    fields of :class:`ebmtrack.tracking.calibrator.Calibrator` (checked: sizes, finite numbers,
    positive scales, monotone isotonic knots)."""

    def __init__(self, entry: Mapping) -> None:
        names = entry.get("features")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise ValueError("calibrator: 'features' must be a non-empty list of names")
        self.features = tuple(names)
        size = len(names)

        def numbers(key: str, count: int | None) -> np.ndarray:
            values = entry.get(key)
            ok = isinstance(values, list) and all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in values
            )
            array = np.asarray(values if ok else [], dtype=np.float64)
            if (
                not ok
                or not np.all(np.isfinite(array))
                or (count is not None and len(array) != count)
            ):
                raise ValueError(
                    f"calibrator: {key!r} must be {count or 'a list of'} finite numbers"
                )
            return array

        self.fill, self.mean = numbers("fill", size), numbers("mean", size)
        self.scale, self.weights = numbers("scale", size), numbers("weights", size)
        bias = entry.get("bias")
        if not isinstance(bias, int | float) or isinstance(bias, bool) or not math.isfinite(bias):
            raise ValueError("calibrator: 'bias' must be a finite number")
        self.bias = float(bias)
        self.iso_x = numbers("isotonic_x", None)
        self.iso_y = numbers("isotonic_y", len(self.iso_x))
        if np.any(self.scale <= 0):
            raise ValueError("calibrator: 'scale' must be positive")
        if np.any(np.diff(self.iso_x) < 0) or np.any(np.diff(self.iso_y) < 0):
            raise ValueError("calibrator: the isotonic knots must be non-decreasing")

    def __call__(self, features: Mapping[str, float]) -> float:
        x = np.array([features.get(name, math.nan) for name in self.features], dtype=np.float64)
        x = np.where(np.isfinite(x), x, self.fill)
        z = self.bias + ((x - self.mean) / self.scale) @ self.weights
        p = 0.5 * (1.0 + np.tanh(0.5 * z))
        if len(self.iso_x):
            p = np.interp(p, self.iso_x, self.iso_y)
        return float(p)


class ConfidenceEstimator:
    """One tracker's per-frame features and confidence, with the little state they need.

    Args:
        calibrator: maps features to a probability (:class:`Calibrator`,
            :class:`ebmtrack.tracking.calibrator.Calibrator`, any callable ``dict -> float``);
            None: the confidence is NaN (the features are still computed, for fitting one).

    After each call, ``last_features`` holds the frame's features and ``last_seconds`` the time
    the call took.
    """

    def __init__(self, calibrator: Callable[[Mapping[str, float]], float] | None = None) -> None:
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
        scores: np.ndarray,
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
            self._peak_level = (
                peak if not math.isfinite(level) else level + PEAK_RATE * (peak - level)
            )
        self.last_features = features
        confidence = math.nan if self.calibrator is None else float(self.calibrator(features))
        self.last_seconds = time.perf_counter() - tic
        return confidence
