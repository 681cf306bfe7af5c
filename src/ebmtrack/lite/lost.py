"""The torch-free runtime's frames of a lost target (:class:`LostFrames`, a part of
:class:`~ebmtrack.lite.tracker.LiteTracker`): the long-term mode's search and re-acquisition
(:mod:`ebmtrack.lite.longterm`, the decisions the torch trackers' mode takes too) on the
runtime's crops, backbone, classifier and siamese head."""

from __future__ import annotations

import numpy as np

from ebmtrack.lite import classifier as cls
from ebmtrack.lite.crop import crop_square
from ebmtrack.lite.longterm import head_decoder, lost_frame_result, reacquire
from ebmtrack.lite.result import TrackResult
from ebmtrack.lite.state import State

__all__ = ["LostFrames"]


class LostFrames:
    """The lost frames of :class:`~ebmtrack.lite.tracker.LiteTracker` (which it is a base of:
    it reads the tracker's parameters, ``long_term``, crops, backbone and siamese estimator)."""

    def _lost_frame(self, frame, state: State, timings: dict, tic: float) -> TrackResult:
        """A lost target's frame (:mod:`ebmtrack.lite.longterm`): the regions at the last position
        and the next whole-frame tiles, each through the backbone once; the classifier on each,
        the siamese head on its candidates (one pass); the models frozen."""
        params, side = self.params, self._side(state.size)
        centers = state.lost.search.centers(frame.shape[1::-1], state.center, side)
        crops = [crop_square(frame, tuple(center), side, self.search_size) for center in centers]
        tic = self._lap(timings, "crop", tic)
        images = np.stack([patch.transpose(2, 0, 1) for patch, _ in crops]).astype(np.float32)
        feats = self._features(images)
        tic = self._lap(timings, "backbone", tic)
        projected = cls.project(cls.normalize_features(feats[self.layer]), state.projection)
        scores = cls.filter_response(projected, state.filter)
        matrices = [matrix for _, matrix in crops]
        decode = None
        if self.one_pass:  # the head confirms, from the same features
            decode = head_decoder(
                self.siamese,
                feats[self.layer],
                state.template,
                centers,
                state.size,
                self.search_size / side,
                scores,
                matrices,
                self.stride,
                params.get("classifier_weight", 0.0),
            )
        score, found = reacquire(
            state.lost,
            self.long_term,
            scores,
            params["score_upsample"],
            self.stride,
            matrices,
            decode,
        )
        if found is not None:
            state.center, state.size = found.target(state.size)
            self._clamp(state, frame.shape)
        self._lap(timings, "classifier", tic)
        self.last_timings = timings
        return lost_frame_result(found, state.box(), score)
