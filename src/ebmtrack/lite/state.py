"""A runtime tracker's target between frames (:class:`State`) and one frame's search region
(:class:`Region`), :class:`~ebmtrack.lite.tracker.LiteTracker`'s."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ebmtrack.lite.longterm import LostState
from ebmtrack.lite.memory import SampleMemory

__all__ = ["Region", "State"]


@dataclass
class Region:
    """One search region: the (S, S, 3) crop, the frame -> crop ``matrix``, the ``scale`` in
    crop px per frame px and its side ``factor``."""

    patch: np.ndarray
    matrix: np.ndarray
    scale: float
    factor: float = 1.0


@dataclass
class State:
    """The target between frames: centre and size (frame px), the least size, frames seen, the
    memory, the classifier's projection (D, C) and filter (D, k, k), the head's modulation, the
    siamese estimator's template features; with the long-term mode its state, and the siamese
    head's target probability at the last frame's box (NaN where none was decoded)."""

    center: np.ndarray
    size: np.ndarray
    min_size: np.ndarray
    frame_index: int
    memory: SampleMemory
    projection: np.ndarray
    filter: np.ndarray
    modulation: list[np.ndarray] | None = None
    template: np.ndarray | None = None
    frame_size: tuple[int, ...] = ()  # (height, width) of the first frame
    lost: LostState | None = None
    box_score: float = math.nan

    def box(self) -> np.ndarray:
        return np.concatenate([self.center - self.size / 2, self.size])
