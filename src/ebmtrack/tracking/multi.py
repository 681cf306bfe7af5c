"""Several targets in one pass over a video: one tracker per target, one backbone call per frame.

Each target has its own tracker with its own state (classifier, sample memory, box). Trackers
that search a square region (:class:`~ebmtrack.tracking.composition.SearchRegionTracker`:
ATOM, DiMP) share one set of networks (:meth:`~SearchRegionTracker.spawn`), and each frame the
search regions of every target go through the backbone as one batch; each target then finishes
its frame alone on its rows of the features. Other trackers (OpenCV's) get one instance per
target from the factory and track one after the other.

The single-target case is the same code: with one target, :meth:`MultiTargetTracker.track` runs
exactly the steps of the tracker's own ``track``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from ebmtrack.tracking.base import Tracker, TrackResult
from ebmtrack.tracking.composition import SearchRegionTracker
from ebmtrack.tracking.search_region import fill_images

__all__ = ["MultiTargetTracker", "split_features"]


def split_features(feats: dict[str, Tensor], counts: Sequence[int]) -> list[dict[str, Tensor]]:
    """Features of a batch ``{layer: (sum(counts), C, H, W)}`` -> one dict per target with its
    ``counts[i]`` consecutive rows (views, no copy)."""
    parts: list[dict[str, Tensor]] = []
    start = 0
    for count in counts:
        parts.append({layer: value[start : start + count] for layer, value in feats.items()})
        start += count
    return parts


class MultiTargetTracker:
    """Track several targets through one video.

    >>> multi = MultiTargetTracker(lambda: ebmtrack.load_tracker("atom"))
    >>> multi.initialize(first_frame, [(x1, y1, w1, h1), (x2, y2, w2, h2)])
    >>> results = multi.track(frame)        # one TrackResult per target, in the boxes' order

    Args:
        factory: builds one tracker (called once for a search-region tracker, whose copies share
            its networks; once per target otherwise).

    Attributes:
        prototype: the first target's tracker; for a search-region tracker its search region's
            backbone call runs once per frame for all targets.
        targets: the trackers, one per target, after :meth:`initialize`.
        backbone_calls: backbone calls made by :meth:`track` so far (shared passes only).
    """

    def __init__(self, factory: Callable[[], Tracker]) -> None:
        self.factory = factory
        self.prototype = factory()
        self.name = self.prototype.name
        self.targets: list[Tracker] = []
        self.backbone_calls = 0
        self.last_timings: dict[str, float] = {}
        self._images: Tensor | None = None

    @property
    def shares_backbone(self) -> bool:
        """Whether the targets' search regions share one backbone call per frame: for a
        search-region tracker that keeps the shared frame loop (``atom-lt`` has a loop of its
        own, the long-term mode's, so each of its targets runs its own tracker)."""
        prototype = self.prototype
        return (
            isinstance(prototype, SearchRegionTracker)
            and type(prototype).track is SearchRegionTracker.track
        )

    def _new_target(self) -> Tracker:
        if not self.targets:
            return self.prototype
        if self.shares_backbone:
            return self.prototype.spawn()
        return self.factory()

    def initialize(self, frame: np.ndarray, boxes) -> None:
        """Start every target on ``frame``; ``boxes`` (N, 4) of (x, y, w, h), N >= 1."""
        boxes = np.asarray(boxes, dtype=np.float64)
        if boxes.ndim == 1:
            boxes = boxes[None]
        if boxes.ndim != 2 or boxes.shape[1] != 4 or len(boxes) < 1:
            raise ValueError(f"boxes must be (N, 4) x, y, w, h with N >= 1, got {boxes.shape}")
        self.targets = []
        for box in boxes:
            target = self._new_target()
            self.targets.append(target)  # before initialize: _new_target reads the count
            target.initialize(frame, box)

    def track(self, frame: np.ndarray) -> list[TrackResult]:
        """Every target's result on ``frame``, in the order of the initial boxes."""
        if not self.targets:
            raise ValueError("track() called before initialize(frame, boxes)")
        if not self.shares_backbone:
            return [target.track(frame) for target in self.targets]
        return self._track_together(frame)

    def _track_together(self, frame: np.ndarray) -> list[TrackResult]:
        """The search regions of all targets through one backbone call, then each target's
        own :meth:`~SearchRegionTracker._finish` on its rows."""
        tic = time.perf_counter()
        begun = [target._next_frame(frame) for target in self.targets]
        regions = [region for _, _, target_regions in begun for region in target_regions]
        images = self._buffer(len(regions))
        fill_images(images, regions)
        crop_seconds = time.perf_counter() - tic
        tic = time.perf_counter()
        with torch.no_grad():
            feats = self.prototype.search.extract(images)
        self.backbone_calls += 1
        backbone_seconds = time.perf_counter() - tic
        parts = split_features(feats, [len(r) for _, _, r in begun])
        results = []
        for target, (state, rgb, target_regions), part in zip(self.targets, begun, parts):
            timings = {"crop": crop_seconds, "backbone": backbone_seconds}
            results.append(target._finish(state, rgb, target_regions, part, timings))
            target.last_timings = timings
        self.last_timings = {"crop": crop_seconds, "backbone": backbone_seconds}
        return results

    def _buffer(self, count: int) -> Tensor:
        """The first ``count`` slots of a (N, 3, S, S) input buffer, grown when needed."""
        template = self.prototype.search.image
        if self._images is None or len(self._images) < count:
            self._images = template.new_empty((count, *template.shape[1:]))
        return self._images[:count]
