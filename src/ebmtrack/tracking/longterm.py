"""Long-term tracking: deciding that the target is lost, searching the frame for it, and taking
it back. :class:`LongTermMode` is a :class:`~ebmtrack.tracking.composition.Mode` of the one frame
loop, so any search-region tracker can take it (``atom-lt`` is ATOM with it,
:mod:`ebmtrack.tracking.atom.longterm`), for one target or several.

A long-term tracker is in one of two modes:

- **tracking**: the short-term tracker runs unchanged. When :func:`is_lost` holds for
  ``lost_after`` frames in a row, the tracker turns **lost**.
- **lost**: the models are frozen (no sample is stored, the classifier is not trained) and the
  state (centre, size) stays where the target was last seen. Each frame, at most
  ``lost_crops`` search regions of the usual size go through the backbone in one batch: the one
  at the last position, and ``lost_crops - 1`` tiles of a grid covering the whole frame, taken in
  order of their distance from the last position (:func:`tile_centers`, :class:`LostSearch`): the
  region searched grows ring by ring until it is the whole frame, then the round starts again.
  The online classifier scores every crop; its best peak over all of them is the candidate.
  When :func:`is_found` holds for the candidate, the target is re-acquired: the state moves there
  and tracking (with its updates) resumes.

The decisions are two functions of one number per frame, the classifier's peak score, so that a
calibrated confidence can replace it without changing the mode logic.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

# The decisions and the search schedule are NumPy, one definition with the torch-free runtime.
from ebmtrack.lite.longterm import (
    LongTermParams,
    LostSearch,
    LostState,
    is_found,
    is_lost,
    tile_centers,
)
from ebmtrack.ops.crop import apply_matrix, crop_square, invert_affine
from ebmtrack.tracking.base import TrackResult, TrackStatus
from ebmtrack.tracking.composition import SearchRegionTracker, TargetFrame, TargetState
from ebmtrack.tracking.localize import upsample_scores
from ebmtrack.tracking.search_region import Region

__all__ = [
    "LongTermMode",
    "LongTermParams",
    "LostSearch",
    "LostState",
    "is_found",
    "is_lost",
    "tile_centers",
]


@dataclass
class LongTermMode:
    """The long-term mode as a part of the frame loop (:class:`~ebmtrack.tracking.composition.
    Mode`): it reviews every tracked frame (:func:`is_lost` for ``lost_after`` frames in a row:
    the result turns ``lost``) and takes every frame of a lost target: no update of the sample
    memory or the classifier, :class:`LostSearch`'s regions in the frame's backbone batch, the
    classifier's best peak as the candidate, re-acquired when it passes :func:`is_found`.

    Results while lost: ``status`` :attr:`~ebmtrack.tracking.base.TrackStatus.LOST`, ``box`` the
    best candidate of the search (its peak's position at the last known size), ``score`` that
    peak; the state stays at the last position. The frame that turns the target lost is
    reported ``lost`` with the usual frame's box (the last position) and score.
    """

    params: LongTermParams = field(default_factory=LongTermParams)

    def start(self) -> LostState:
        return LostState(LostSearch(self.params.lost_crops, self.params.tile_overlap))

    def takes(self, state: TargetState) -> bool:
        return state.mode.lost

    def crop(
        self, tracker: SearchRegionTracker, state: TargetState, frame: np.ndarray
    ) -> list[Region]:
        """Crops at the last position and at the next whole-frame tiles."""
        size = tracker.search.size
        side = tracker.search.side(state.size)
        height, width = frame.shape[:2]
        regions = []
        for center in state.mode.search.centers((width, height), state.center, side):
            patch, matrix = crop_square(frame, tuple(center), side, size)
            regions.append(Region(patch, matrix, size / side))
        return regions

    def finish(self, tracker: SearchRegionTracker, target: TargetFrame) -> TrackResult:
        """The classifier on each crop; re-acquire at the best peak if it passes."""
        state, regions, feats = target.state, target.regions, target.feats
        params, classifier = self.params, tracker.classifier
        upsample = tracker.search.params.score_upsample
        tic = time.perf_counter()
        scores, _ = classifier.score(state.model, feats[classifier.layer])  # (crops, H, W)
        with torch.inference_mode():
            fine = torch.stack([upsample_scores(s, upsample) for s in scores])
            peaks = fine.flatten(1).amax(dim=1)
            best = int(torch.argmax(peaks).item())
            if not is_found(float(peaks[best]), params) and is_found(
                float(peaks[0]), params, near=True
            ):
                best = 0  # the region at the last position passes the lower bar
            row, col = divmod(int(torch.argmax(fine[best]).item()), fine.shape[2])
            score = float(fine[best, row, col].item())
        cell = classifier.stride / upsample
        inverse = invert_affine(regions[best].matrix)
        center = apply_matrix(inverse, np.array([col * cell, row * cell]))
        target.timings["classifier"] += time.perf_counter() - tic
        if is_found(score, params, near=best == 0):
            state.center = center
            state.clamp(target.frame.shape)
            state.mode.lost, state.mode.misses = False, 0
            return TrackResult(state.box(), score, TrackStatus.NORMAL)
        box = np.concatenate([center - state.size / 2, state.size])
        return TrackResult(box, score, TrackStatus.LOST)

    def review(self, state: TargetState, result: TrackResult) -> TrackResult:
        lost = state.mode
        lost.misses = lost.misses + 1 if is_lost(result) else 0
        if lost.misses < self.params.lost_after:
            return result
        lost.lost = True
        lost.search.reset()
        return TrackResult(result.box, result.score, TrackStatus.LOST)
