"""The long-term mode's decisions, NumPy only: when a tracked target is lost (:func:`is_lost`),
which search regions a lost tracker looks at (:func:`tile_centers`, :class:`LostSearch`) and when
a candidate is the target again (:func:`is_found`); the parameters (:class:`LongTermParams`) and a
target's long-term state (:class:`LostState`). One definition for the torch trackers' mode
(:class:`~ebmtrack.tracking.longterm.LongTermMode`) and the torch-free runtime.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ebmtrack.lite.result import TrackResult, TrackStatus

__all__ = [
    "LongTermParams",
    "LostSearch",
    "LostState",
    "is_found",
    "is_lost",
    "tile_centers",
]


@dataclass(frozen=True)
class LongTermParams:
    """The long-term mode's parameters (mixed into a tracker's parameter dataclass, whose check
    takes their ranges from :mod:`ebmtrack.lite.option_checks`).

    Attributes:
        lost_after: frames in a row for which :func:`is_lost` holds before the tracker turns lost.
        redetect_threshold: while lost, the classifier's best peak over the searched crops must
            reach this to re-acquire the target (the short-term test is
            ``target_not_found_threshold``).
        redetect_near_threshold: a lower bar for a peak in the search region at the last position
            (where the target was lost): it re-acquires there when it reaches this; None: the
            same ``redetect_threshold`` everywhere.
        lost_crops: search regions per lost frame (the cost bound: one backbone batch of this
            many crops), the one at the last position included; >= 2.
        tile_overlap: overlap of neighbouring whole-frame tiles, as a fraction of their side.
    """

    lost_after: int = 1
    redetect_threshold: float = 0.4
    redetect_near_threshold: float | None = None
    lost_crops: int = 4
    tile_overlap: float = 0.25


def is_lost(result: TrackResult) -> bool:
    """Whether a tracked frame's result says the target is gone: the short-term tracker's own
    not-found test (its classifier's peak below ``target_not_found_threshold``)."""
    return result.status == TrackStatus.NOT_FOUND


def is_found(score: float, params: LongTermParams, near: bool = False) -> bool:
    """Whether a lost tracker's candidate, of peak ``score``, is taken as the target; ``near``:
    a candidate in the search region at the last position."""
    if near and params.redetect_near_threshold is not None:
        return score >= min(params.redetect_near_threshold, params.redetect_threshold)
    return score >= params.redetect_threshold


def _axis_centers(length: float, side: float, overlap: float) -> np.ndarray:
    if side >= length:
        return np.array([length / 2.0])
    count = math.ceil((length - side) / (side * (1.0 - overlap))) + 1
    return np.linspace(side / 2.0, length - side / 2.0, count)


def tile_centers(frame_size: tuple[int, int], side: float, overlap: float = 0.25) -> np.ndarray:
    """Centres (T, 2) in frame px of square tiles of ``side`` px covering a (W, H) frame, with
    neighbours overlapping by at least ``overlap * side`` (one tile along an axis shorter than
    ``side``, centred on it). Row-major, top-left first."""
    width, height = frame_size
    xs = _axis_centers(float(width), side, overlap)
    ys = _axis_centers(float(height), side, overlap)
    return np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2)


class LostSearch:
    """Which search regions a lost tracker looks at, frame after frame.

    Frame ``n`` of being lost (0-based) searches the last position and tiles
    ``n * (B - 1) ... (n + 1) * (B - 1) - 1`` (mod T) of the frame's tiles sorted by distance
    from the last position, B = ``crops``, T the number of tiles; every tile at most once per
    frame, so the whole frame is covered every ``ceil(T / (B - 1))`` frames.
    """

    def __init__(self, crops: int, overlap: float) -> None:
        self.crops = crops
        self.overlap = overlap
        self.frames = 0

    def reset(self) -> None:
        """Start a new loss: the next frame searches the nearest tiles first."""
        self.frames = 0

    def centers(self, frame_size: tuple[int, int], center: np.ndarray, side: float) -> np.ndarray:
        """The (B', 2) centres to search in this frame, B' <= ``crops``; the last position
        ``center`` first. Advances to the next frame."""
        tiles = tile_centers(frame_size, side, self.overlap)
        order = np.argsort(np.linalg.norm(tiles - center, axis=1), kind="stable")
        per_frame = min(self.crops - 1, len(tiles))
        first = self.frames * per_frame
        picked = tiles[order[(first + np.arange(per_frame)) % len(tiles)]]
        self.frames += 1
        return np.concatenate([np.asarray(center, dtype=np.float64)[None], picked])


@dataclass
class LostState:
    """One target's long-term state (the runtime's, and the torch trackers'
    :attr:`~ebmtrack.tracking.composition.TargetState.mode`).

    Attributes:
        search: which regions the next lost frame looks at.
        lost: whether the target is lost (the mode takes its frames).
        misses: frames in a row for which :func:`is_lost` held.
    """

    search: LostSearch
    lost: bool = False
    misses: int = 0
