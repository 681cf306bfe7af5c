"""Long-term tracking: deciding that the target is lost, searching the frame for it, and taking
it back. :class:`LongTermMode` is a :class:`~ebmtrack.tracking.composition.Mode` of the one frame
loop, so any search-region tracker can take it (``atom-lt`` is ATOM with it,
:mod:`ebmtrack.tracking.atom.longterm`), for one target or several. Its decisions are NumPy and
the torch-free runtime's too (:mod:`ebmtrack.lite.longterm`, whose docstring gives the rule).

A long-term tracker is in one of two modes:

- **tracking**: the short-term tracker runs unchanged. When :func:`is_lost` holds for
  ``lost_after`` frames in a row (the classifier does not find the target, or, with one backbone
  pass, the siamese head's probability at the box is below ``lost_siamese_threshold``), the
  tracker turns **lost**.
- **lost**: the models are frozen (no sample is stored, the classifier is not trained, the
  siamese template kept) and the state (centre, size) stays where the target was last seen, the
  reported box too. Each frame, at most ``lost_crops`` search regions of the usual size go
  through the backbone in one batch (with one pass: the siamese search crops, each through the
  siamese backbone once): the one at the last position, and ``lost_crops - 1`` tiles of a grid
  covering the whole frame, taken in order of their distance from the last position
  (:func:`tile_centers`, :class:`LostSearch`): the region searched grows ring by ring until it
  is the whole frame, then the round starts again. The online classifier scores every crop;
  the peaks that pass :func:`is_found` are the candidates, best first, and the first one the
  siamese head confirms on the same features (:func:`~ebmtrack.lite.longterm.reacquire`) is the
  target: the state moves to the head's box there and tracking (with its updates) resumes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

# The decisions and the search schedule are NumPy, one definition with the torch-free runtime.
from ebmtrack.lite.longterm import (
    LongTermParams,
    LostSearch,
    LostState,
    head_decoder,
    is_found,
    is_lost,
    lost_frame_result,
    reacquire,
    review,
    tile_centers,
)
from ebmtrack.ops.crop import crop_square
from ebmtrack.tracking.base import TrackResult
from ebmtrack.tracking.composition import SearchRegionTracker, TargetFrame, TargetState
from ebmtrack.tracking.search_region import SIAMESE_LAYER, Region, SiameseSearchRegion

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
    Mode`): it reviews every tracked frame (:func:`~ebmtrack.lite.longterm.review`: :func:`is_lost`
    for ``lost_after`` frames in a row, the result turns ``lost``) and takes every frame of a lost
    target: no update of the sample memory, the classifier or the template, :class:`LostSearch`'s
    regions in the frame's backbone batch, re-acquisition by
    :func:`~ebmtrack.lite.longterm.reacquire` (the siamese head confirming where the box
    estimator is the one-pass siamese one).

    Results while lost: ``status`` :attr:`~ebmtrack.tracking.base.TrackStatus.LOST`, ``box`` the
    last box (the state's), ``score`` the classifier's best peak over the searched regions,
    ``confidence`` :data:`~ebmtrack.lite.longterm.LOST_CONFIDENCE`. The frame that turns the
    target lost is reported ``lost`` with the usual frame's box and score.
    """

    params: LongTermParams = field(default_factory=LongTermParams)

    def start(self) -> LostState:
        return LostState.of(self.params)

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
        """The classifier on each crop, the siamese head on its candidates; re-acquired at the
        first one both pass (:func:`~ebmtrack.lite.longterm.reacquire`)."""
        state, regions, feats = target.state, target.regions, target.feats
        classifier = tracker.classifier
        tic = time.perf_counter()
        scores, _ = classifier.score(state.model, feats[classifier.layer])  # (crops, H, W)
        scores = scores.detach().cpu().float().numpy()
        matrices = [region.matrix for region in regions]
        decode = None
        if isinstance(tracker.search, SiameseSearchRegion):  # one pass: the head confirms
            decode = head_decoder(
                tracker.search.siamese,
                feats[SIAMESE_LAYER].detach().cpu().numpy(),
                state.box_model,
                state.mode.search.last,
                state.size,
                regions[0].scale,
                scores,
                matrices,
                classifier.stride,
                getattr(tracker.params, "classifier_weight", 0.0),
            )
        score, found = reacquire(
            state.mode,
            self.params,
            scores,
            tracker.search.params.score_upsample,
            classifier.stride,
            matrices,
            decode,
        )
        if found is not None:
            state.center, state.size = found.target(state.size)
            state.clamp(target.frame.shape)
        target.timings["classifier"] += time.perf_counter() - tic
        return lost_frame_result(found, state.box(), score)

    def review(self, state: TargetState, result: TrackResult) -> TrackResult:
        return review(state.mode, self.params, result, state.box_score)
