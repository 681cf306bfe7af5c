"""``atom-lt``: ATOM with the long-term mode of :mod:`ebmtrack.tracking.longterm`.

While tracking, every frame is :class:`~ebmtrack.tracking.atom.tracker.AtomTracker`'s own
(the same numbers). Once lost, a frame is :meth:`AtomLTTracker._search_lost`: no update of the
sample memory or the classifier, a batch of search regions over the frame, the classifier's best
peak as the candidate, re-acquired when it passes :func:`~ebmtrack.tracking.longterm.is_found`.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.ops.crop import apply_matrix, crop_square
from ebmtrack.tracking.atom.box import invert_affine
from ebmtrack.tracking.atom.factory import CLASSIFIER_ONLY, build_atom
from ebmtrack.tracking.atom.longterm_params import AtomLTParams
from ebmtrack.tracking.atom.tracker import AtomTracker
from ebmtrack.tracking.base import TrackResult, TrackStatus
from ebmtrack.tracking.localize import upsample_scores
from ebmtrack.tracking.longterm import LostSearch, is_found, is_lost
from ebmtrack.tracking.registry import OUR_TRACKER, TrackerVariant
from ebmtrack.tracking.search_region import as_rgb

__all__ = ["ATOM_LT", "LONG_TERM", "AtomLTTracker", "create_atom_lt_tracker"]

# atom's parameters, a stricter not-found test (the lost decision: the classifier's peak below
# 0.35 instead of 0.25, so that fewer frames of an absent target train the classifier), a
# re-acquisition threshold of 0.45 anywhere in the frame and atom's own 0.25 in the search
# region at the last position, chosen on spliced training clips (docs/results/long-term.md).
LONG_TERM = {
    **CLASSIFIER_ONLY,
    "target_not_found_threshold": 0.35,
    "redetect_threshold": 0.45,
    "redetect_near_threshold": 0.25,
}


class AtomLTTracker(AtomTracker):
    """ATOM that reports ``status="lost"`` when its classifier loses the target, then searches
    the whole frame for it at a bounded cost and re-acquires it (:mod:`ebmtrack.tracking.
    longterm`).

    Results while lost: ``status`` :attr:`~ebmtrack.tracking.base.TrackStatus.LOST`, ``box`` the
    best candidate of the search (its peak's position at the last known size), ``score`` that
    peak; the state stays at the last position. The frame that turns the tracker lost is
    reported ``lost`` with ATOM's box (the last position) and score. ``lost`` (bool) says which
    mode the tracker is in.
    """

    name = "atom-lt"

    def __init__(
        self,
        backbone: Backbone,
        box_head: AtomIoUNet | None = None,
        params: AtomLTParams | None = None,
        calibrator=None,
    ) -> None:
        params = params or AtomLTParams()
        super().__init__(backbone, box_head, params, calibrator)
        size = params.search_size
        self._lost_image = torch.empty(params.lost_crops, 3, size, size, device=self.device)
        self._lost_search = LostSearch(params.lost_crops, params.tile_overlap)
        self.lost = False
        self._misses = 0

    def initialize(self, frame: np.ndarray, box: np.ndarray) -> None:
        super().initialize(frame, box)
        self.lost, self._misses = False, 0
        self._lost_search.reset()

    def track(self, frame: np.ndarray) -> TrackResult:
        """ATOM's frame while tracking; the wide search while lost."""
        if self.lost and self._state is not None:
            return self._search_lost(frame)
        result = super().track(frame)
        self._misses = self._misses + 1 if is_lost(result) else 0
        if self._misses < self.params.lost_after:
            return result
        self.lost = True
        self._lost_search.reset()
        return TrackResult(result.box, result.score, TrackStatus.LOST)

    def _search_lost(self, frame: np.ndarray) -> TrackResult:
        """One lost frame: crops at the last position and at the next whole-frame tiles, one
        backbone batch, the classifier on each; re-acquire at the best peak if it passes."""
        params, state, timings = self.params, self._state, {}
        tic = time.perf_counter()
        frame = as_rgb(frame)
        self._clamp(state, frame.shape)
        state.frame_index += 1
        side = self.search.side(state.size)
        height, width = frame.shape[:2]
        centers = self._lost_search.centers((width, height), state.center, side)
        images = self._lost_image[: len(centers)]
        matrices = []
        with torch.no_grad():
            for slot, center in zip(images, centers, strict=True):
                patch, matrix = crop_square(frame, tuple(center), side, params.search_size)
                slot.copy_(torch.from_numpy(patch).permute(2, 0, 1))
                matrices.append(matrix)
            toc = time.perf_counter()
            timings["crop"], tic = toc - tic, toc
            feats = self.search.extract(images)
        toc = time.perf_counter()
        timings["backbone"], tic = toc - tic, toc
        # (crops, H, W)
        scores, _ = self.classifier.score(state.model, feats[self.classifier.layer])
        with torch.inference_mode():
            fine = torch.stack([upsample_scores(s, params.score_upsample) for s in scores])
            peaks = fine.flatten(1).amax(dim=1)
            best = int(torch.argmax(peaks).item())
            if not is_found(float(peaks[best]), params) and is_found(
                float(peaks[0]), params, near=True
            ):
                best = 0  # the region at the last position passes the lower bar
            row, col = divmod(int(torch.argmax(fine[best]).item()), fine.shape[2])
            score = float(fine[best, row, col].item())
        cell = self.classifier.stride / params.score_upsample
        center = apply_matrix(invert_affine(matrices[best]), np.array([col * cell, row * cell]))
        timings["classifier"], timings["box"], timings["update"] = (
            time.perf_counter() - tic,
            0.0,
            0.0,
        )
        self.last_timings = timings
        if is_found(score, params, near=best == 0):
            state.center = center
            self._clamp(state, frame.shape)
            self.lost, self._misses = False, 0
            return TrackResult(state.box(), score, TrackStatus.NORMAL)
        box = np.concatenate([center - state.size / 2, state.size])
        return TrackResult(box, score, TrackStatus.LOST)


def create_atom_lt_tracker(
    weights: str | Path | None = None,
    backbone: str = "mobilenetv2",
    backbone_weights: str | Path | None = None,
    **params,
) -> AtomLTTracker:
    """An :class:`AtomLTTracker` built as :func:`~ebmtrack.tracking.atom.factory.
    create_atom_tracker` builds ATOM; ``params`` are fields of :class:`AtomLTParams`."""
    return build_atom(AtomLTTracker, AtomLTParams, weights, backbone, backbone_weights, params)


ATOM_LT = TrackerVariant(
    create_atom_lt_tracker,
    LONG_TERM,
    AtomLTParams,
    "atom with a long-term mode: reports status 'lost' when the classifier loses the target, "
    "freezes its models, searches the whole frame and re-acquires the target",
    kind=OUR_TRACKER,
)
