"""From the classifier's score map to a position and a status, in NumPy: the map upsampled
bicubically on the cell positions, the peak judged against the strongest other peak, and the scale
search's choice between regions cropped at several sizes. The judgement, :class:`Localization` and
:func:`best_scale` are the torch trackers' too (:mod:`ebmtrack.tracking.localize` hands them its
map); the upsampling here equals the trackers' ``F.interpolate`` (tested)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ebmtrack.lite.result import TrackStatus

__all__ = ["Localization", "best_scale", "bicubic_weights", "localize", "upsample_scores"]

_A = -0.75  # the cubic convolution's parameter in PyTorch's bicubic interpolation


def _cubic(x: np.ndarray) -> np.ndarray:
    """Keys' cubic convolution kernel with a = -0.75 at distances ``x`` >= 0."""
    near = ((_A + 2) * x - (_A + 3)) * x * x + 1
    far = ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


@functools.cache
def bicubic_weights(size: int, factor: int) -> np.ndarray:
    """(out, size) float32, out = (size - 1) factor + 1: PyTorch's bicubic interpolation with
    ``align_corners=True`` along one axis (output ``o`` reads input ``o (size - 1) / (out - 1)``,
    its four neighbours clamped to the border)."""
    out = (size - 1) * factor + 1
    scale = np.float32(size - 1) / np.float32(out - 1) if out > 1 else np.float32(0)
    source = (scale * np.arange(out, dtype=np.float32)).astype(np.float64)
    base = np.floor(source)
    t = source - base
    weights = np.zeros((out, size), dtype=np.float64)
    rows = np.arange(out)
    for offset in (-1, 0, 1, 2):
        index = np.clip(base.astype(np.int64) + offset, 0, size - 1)
        np.add.at(weights, (rows, index), _cubic(np.abs(t - offset)))
    return weights.astype(np.float32)


def upsample_scores(scores: np.ndarray, factor: int) -> np.ndarray:
    """Bicubic upsampling of (H, W) scores on cell positions -> ((H-1) f + 1, (W-1) f + 1)."""
    if factor == 1:
        return scores
    height, width = scores.shape
    return bicubic_weights(height, factor) @ scores @ bicubic_weights(width, factor).T


def best_scale(factors: tuple[float, ...], peaks: list[float]) -> tuple[int, float]:
    """The scale at which the classifier fits best, from the peak scores of search regions
    cropped ``factors`` times wider (1: the usual region).

    Returns the index of the highest peak, and the size factor at the maximum of the parabola
    in log scale through that peak and its neighbours in scale (the two nearest to it when it
    is the smallest or largest factor), kept within those three: a continuous estimate between
    the sampled scales, as DSST interpolates its scale responses. With fewer than three factors,
    or three peaks that are not concave, the best sampled factor itself.
    """
    order = sorted(range(len(factors)), key=lambda i: factors[i])
    logs = [math.log(factors[i]) for i in order]
    values = [peaks[i] for i in order]
    rank = max(range(len(values)), key=values.__getitem__)
    best = order[rank]
    start = min(max(rank - 1, 0), len(values) - 3)
    if start < 0:
        return best, factors[best]
    (x0, x1, x2), (y0, y1, y2) = logs[start : start + 3], values[start : start + 3]
    # Newton's form: y = y0 + left (x - x0) + curve (x - x0)(x - x1), its vertex where y' = 0.
    left, right = (y1 - y0) / (x1 - x0), (y2 - y1) / (x2 - x1)
    curve = (right - left) / (x2 - x0)
    if not curve < 0:
        return best, factors[best]
    vertex = (x0 + x1) / 2 - left / (2 * curve)
    return best, math.exp(min(max(vertex, x0), x2))


@dataclass(frozen=True)
class Localization:
    """The result of :func:`localize`: position (x, y) in crop pixels, its score, a status, and
    the score of the other peak (the strongest outside the first one's neighbourhood when the
    position is the first peak, the first peak when it is the second; NaN where none was looked
    for: a lost target, or no cell outside the neighbourhood)."""

    position: tuple[float, float]
    score: float
    status: TrackStatus
    other_score: float = math.nan


def localize(
    scores: np.ndarray,
    cell_px: float,
    crop_size: int,
    target_size: tuple[float, float],
    not_found_threshold: float = 0.25,
    distractor_threshold: float = 0.8,
    hard_negative_threshold: float = 0.5,
    neighborhood_scale: float = 2.2,
    displacement_scale: float = 0.8,
) -> Localization:
    """Find the target peak and judge it against the strongest other peak (reference B.1).

    Args:
        scores: (H, W) score map whose cell (i, j) sits at crop pixel (j, i) * ``cell_px``.
        cell_px: crop pixels per score cell.
        crop_size: side of the crop in pixels; its centre is the previous target position.
        target_size: (w, h) of the target in crop pixels.
        not_found_threshold: the target is lost below this max score.
        distractor_threshold: a second peak above this fraction of the first is a distractor.
        hard_negative_threshold: a second peak above this fraction (and above
            ``not_found_threshold``) makes the frame a hard negative.
        neighborhood_scale: the second peak is searched outside this many target sizes around
            the first.
        displacement_scale: peaks farther than this * crop_size / 2 from the centre are "far".

    Returns:
        :class:`Localization`. Status ``not_found`` if the max is below the threshold; with a
        distractor, ``hard_negative`` when exactly one of the two peaks is near the centre (the
        position is the near one), else ``uncertain``; ``hard_negative`` for a weaker second
        peak; ``normal`` otherwise.
    """
    height, width = scores.shape
    row1, col1 = divmod(int(np.argmax(scores)), width)
    score1 = float(scores[row1, col1])
    position1 = (col1 * cell_px, row1 * cell_px)
    if score1 < not_found_threshold:
        return Localization(position1, score1, TrackStatus.NOT_FOUND)
    half_w = neighborhood_scale * target_size[0] / 2.0 / cell_px
    half_h = neighborhood_scale * target_size[1] / 2.0 / cell_px
    r0, r1 = max(math.floor(row1 - half_h), 0), min(math.ceil(row1 + half_h) + 1, height)
    c0, c1 = max(math.floor(col1 - half_w), 0), min(math.ceil(col1 + half_w) + 1, width)
    # Mask the first peak's neighbourhood and look for the second one.
    masked = scores.copy()
    masked[r0:r1, c0:c1] = -np.inf
    if np.isinf(masked).all():
        return Localization(position1, score1, TrackStatus.NORMAL)
    row2, col2 = divmod(int(np.argmax(masked)), width)
    score2 = float(masked[row2, col2])
    position2 = (col2 * cell_px, row2 * cell_px)
    center = crop_size / 2.0
    limit = displacement_scale * crop_size / 2.0
    near1 = math.hypot(position1[0] - center, position1[1] - center) <= limit
    near2 = math.hypot(position2[0] - center, position2[1] - center) <= limit
    if score2 > distractor_threshold * score1:
        if near1 and not near2:
            return Localization(position1, score1, TrackStatus.HARD_NEGATIVE, score2)
        if near2 and not near1:
            return Localization(position2, score2, TrackStatus.HARD_NEGATIVE, score1)
        return Localization(position1, score1, TrackStatus.UNCERTAIN, score2)
    if score2 > hard_negative_threshold * score1 and score2 > not_found_threshold:
        return Localization(position1, score1, TrackStatus.HARD_NEGATIVE, score2)
    return Localization(position1, score1, TrackStatus.NORMAL, score2)
