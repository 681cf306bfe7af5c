"""Several targets in one pass over a video.

A search-region tracker (:class:`~ebmtrack.tracking.composition.SearchRegionTracker`: ATOM,
DiMP, with or without the long-term mode) tracks every target with its one frame loop,
:meth:`~ebmtrack.tracking.composition.SearchRegionTracker.step`: one set of networks, one
:class:`~ebmtrack.tracking.composition.TargetState` per target (classifier, sample memory, box),
the search regions of every target through the backbone as one batch per frame. Other trackers
(OpenCV's) get one instance per target from the factory and track one after the other.

The single-target case is the same code: a tracker's own ``track`` is ``step`` on one state.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

from ebmtrack.tracking.base import Tracker, TrackResult

__all__ = ["MultiTargetTracker", "split_features"]  # noqa: F822 (split_features: lazy, torch)


def __getattr__(name: str):
    if name == "split_features":  # torch: imported where asked for
        from ebmtrack.tracking.composition import split_features

        return split_features
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class MultiTargetTracker:
    """Track several targets through one video.

    >>> multi = MultiTargetTracker(lambda: ebmtrack.load_tracker("atom"))
    >>> multi.initialize(first_frame, [(x1, y1, w1, h1), (x2, y2, w2, h2)])
    >>> results = multi.track(frame)        # one TrackResult per target, in the boxes' order

    Args:
        factory: builds one tracker (called once for a search-region tracker, which serves
            every target; once per target otherwise).

    Attributes:
        prototype: the first tracker built; a search-region tracker tracks all targets.
        targets: one entry per target after :meth:`initialize`: its
            :class:`~ebmtrack.tracking.composition.TargetState` for a search-region tracker,
            its own tracker otherwise.
        backbone_calls: backbone calls made by :meth:`track` so far (shared passes only).
    """

    def __init__(self, factory: Callable[[], Tracker]) -> None:
        self.factory = factory
        self.prototype = factory()
        self.name = self.prototype.name
        self.targets: list = []
        self.backbone_calls = 0

    @property
    def shares_backbone(self) -> bool:
        """Whether the targets share one tracker, its networks and one backbone call per frame
        (a search-region tracker)."""
        # A tracker of that class exists only where its (torch) module is imported.
        composition = sys.modules.get("ebmtrack.tracking.composition")
        return composition is not None and isinstance(
            self.prototype, composition.SearchRegionTracker
        )

    @property
    def last_timings(self) -> dict[str, float]:
        """Seconds of the last frame's phases, all targets together (shared passes only)."""
        return getattr(self.prototype, "last_timings", {}) if self.shares_backbone else {}

    def initialize(self, frame: np.ndarray, boxes) -> None:
        """Start every target on ``frame``; ``boxes`` (N, 4) of (x, y, w, h), N >= 1."""
        boxes = np.asarray(boxes, dtype=np.float64)
        if boxes.size == 0:
            raise ValueError("no boxes to track: give at least one (x, y, w, h) box")
        if boxes.ndim == 1:
            boxes = boxes[None]
        if boxes.ndim != 2 or boxes.shape[1] != 4:
            raise ValueError(f"boxes must be (N, 4) x, y, w, h with N >= 1, got {boxes.shape}")
        if self.shares_backbone:
            self.targets = [self.prototype.start(frame, box) for box in boxes]
            return
        self.targets = []
        for box in boxes:
            target = self.factory() if self.targets else self.prototype
            target.initialize(frame, box)
            self.targets.append(target)

    def track(self, frame: np.ndarray) -> list[TrackResult]:
        """Every target's result on ``frame``, in the order of the initial boxes."""
        if not self.targets:
            raise ValueError("track() called before initialize(frame, boxes)")
        if not self.shares_backbone:
            return [target.track(frame) for target in self.targets]
        results = self.prototype.step(frame, self.targets)
        self.backbone_calls += 1
        return results
