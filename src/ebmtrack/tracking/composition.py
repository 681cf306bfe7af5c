"""A search-region tracker is three parts and one frame loop.

::

    frame ──> SearchRegion ──crops, features──> Classifier ──score map──> SearchRegion.localize
                                                                               │ position, status
                     TargetState <──centre, size── BoxEstimator <──────────────┘
                         │                    (scale search, IoU / EBM ascent, gated, polished)
                         └──> Classifier.label / train (sample memory, filter update)

- the **search region** (:class:`~ebmtrack.tracking.search_region.SearchRegion`): the crops
  around the last position, the backbone's features of them, the localisation of a score map;
- the **classifier** (:class:`Classifier`): ATOM's Gauss-Newton classifier
  (:class:`~ebmtrack.tracking.atom.classifier.GaussNewtonClassifier`) or DiMP's learnt
  optimiser (:class:`~ebmtrack.tracking.dimp.classifier.LearntClassifier`);
- the **box estimator** (:class:`BoxEstimator`): ATOM's (:class:`~ebmtrack.tracking.atom.box.
  IoUBoxEstimator`, one per ``box_mode``) or DiMP's EBM ascent (:class:`~ebmtrack.tracking.dimp.
  box.EBMBoxEstimator`).

:class:`SearchRegionTracker` runs every frame as the same named phases: search (crops and
features), score, estimate, update, confidence. ``AtomTracker`` and ``DiMPTracker`` only build
their parts from their parameters. The phases after the backbone (:meth:`SearchRegionTracker.
_finish`) take the features as an argument, so one backbone call can serve several targets
(:mod:`ebmtrack.tracking.multi`).
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from ebmtrack.tracking.base import TrackResult, TrackStatus
from ebmtrack.tracking.box_head import BoxHead
from ebmtrack.tracking.confidence import ConfidenceEstimator
from ebmtrack.tracking.localize import Localization, best_scale
from ebmtrack.tracking.memory import SampleMemory
from ebmtrack.tracking.params import SearchRegionParams
from ebmtrack.tracking.search_region import FirstFrame, Region, SearchRegion, as_rgb, clamp_target

__all__ = ["BoxEstimator", "Classifier", "SearchRegionTracker", "TargetState"]


@dataclass
class TargetState:
    """What a tracker knows of its target between frames.

    Attributes:
        center, size: (2,) the target in frame px.
        min_size: (2,) the least size it may shrink to.
        frame_index: frames seen (1 after the first).
        memory: the classifier's training samples.
        model: the classifier's per-target model (ATOM: its projection and filter module;
            DiMP: the target filter tensor).
        modulation: the box head's modulation vectors from the first frame, None without one.
    """

    center: np.ndarray
    size: np.ndarray
    min_size: np.ndarray
    frame_index: int
    memory: SampleMemory
    model: Any
    modulation: list[Tensor] | None = None

    def box(self) -> np.ndarray:
        """(x, y, w, h) in frame px."""
        return np.concatenate([self.center - self.size / 2, self.size])


class Classifier(Protocol):
    """The classifier part: where in a search region the target is."""

    layer: str  # the backbone layer it reads
    stride: int  # of its score map, in crop px

    def samples(self, features: Tensor) -> Tensor:
        """First-frame samples of backbone ``features`` (N, C, H, W)."""

    def start(self, first: FirstFrame) -> tuple[Any, Tensor, Tensor]:
        """Learn the target from the first frame: (model, memory samples, memory labels)."""

    def score(self, model: Any, features: Tensor) -> tuple[Tensor, Tensor]:
        """(R, H, W) score maps of R regions' features, and their (R, ...) samples."""

    def position(self, found: Localization) -> np.ndarray:
        """(2,) the target centre in crop px of a localised peak."""

    def label(self, state: TargetState, region: Region) -> Tensor:
        """The memory label of this frame's sample, for the state's (updated) target."""

    def train(self, state: TargetState, status: TrackStatus) -> None:
        """Update ``state.model`` from the memory where this frame calls for it."""


class BoxEstimator(Protocol):
    """The box-estimator part: the target's size (and a refined centre) from the classifier's
    position."""

    head: BoxHead | None  # its box head (the modulation comes from the first frame)
    layers: tuple[str, ...]  # the backbone layers it reads (none without a box head)
    slots: int  # search regions per frame at most
    last_value: float  # the box head's value at its last box, NaN without one

    def side_factors(self, frame_index: int) -> tuple[float, ...]:
        """Side factors of the search regions of the frame after ``frame_index``."""

    def estimate(
        self,
        state: TargetState,
        position: np.ndarray,
        region: Region,
        factor: float,
        feats: dict[str, Tensor],
        refine: bool,
    ) -> np.ndarray | None:
        """Move ``state`` (centre, size) to this frame's estimate, from the classifier's
        ``position`` (crop px) in ``region`` (the best of the frame's; ``factor`` the scale
        between its peaks, ``feats`` its features). ``refine``: the size may change. Returns
        the box to report where it is not the state's, else None."""


class SearchRegionTracker:
    """A tracker composed of a search region, a classifier and a box estimator.

    Args:
        params: the tracker's parameters.
        search: the search region part.
        classifier: the classifier part.
        box_estimator: the box estimator part.
        calibrator: maps the per-frame features of :mod:`ebmtrack.tracking.confidence` to
            ``TrackResult.confidence``; None: the confidence is NaN.

    After each :meth:`track` call ``last_timings`` holds the seconds spent in ``crop``,
    ``backbone``, ``classifier`` (scores and localisation), ``box`` (the box estimator),
    ``update`` (memory and classifier training) and ``confidence``; on CUDA they include no
    synchronisation, so they are CPU-side times. ``confidence_estimator.last_features`` holds
    the frame's confidence features.
    """

    name = "search-region"

    def __init__(
        self,
        params: SearchRegionParams,
        search: SearchRegion,
        classifier: Classifier,
        box_estimator: BoxEstimator,
        calibrator=None,
    ) -> None:
        self.params = params
        self.device = search.device
        self.search = search
        self.classifier = classifier
        self.box_estimator = box_estimator
        self.confidence_estimator = ConfidenceEstimator(calibrator)
        self.last_timings: dict[str, float] = {}
        self._state: TargetState | None = None

    @property
    def backbone_runtime(self) -> str:
        """The backbone's resolved runtime: ``torch``, ``onnx`` or ``onnx-int8``."""
        return self.search.runtime.name

    @property
    def dtype(self) -> torch.dtype:
        """The eager backbone's and the matrix products' floating-point type."""
        return self.search.runtime.dtype

    # ------------------------------------------------------------------ tracker interface
    def initialize(self, frame: np.ndarray, box: np.ndarray) -> None:
        """Learn the classifier and the box head's modulation from the augmented first frame."""
        classifier, params = self.classifier, self.params
        first = self.search.first_frame(frame, box, classifier.samples, classifier.layer)
        head = self.box_estimator.head
        modulation = None if head is None else head.modulation(first, params.search_size)
        model, samples, labels = classifier.start(first)
        memory = SampleMemory(
            samples, labels, params.memory_size, params.init_samples_minimum_weight
        )
        self._state = TargetState(
            center=first.center,
            size=first.size,
            min_size=np.minimum(params.min_target_size, first.size),
            frame_index=1,
            memory=memory,
            model=model,
            modulation=modulation,
        )
        self._clamp(self._state, first.frame.shape)
        self.confidence_estimator.reset()

    def track(self, frame: np.ndarray) -> TrackResult:
        """Locate the target in ``frame`` (any size, RGB or grayscale)."""
        timings: dict[str, float] = {}
        tic = time.perf_counter()
        state, frame, regions = self._next_frame(frame)
        toc = time.perf_counter()
        timings["crop"], tic = toc - tic, toc
        feats = self.search.features(regions)
        timings["backbone"] = time.perf_counter() - tic
        result = self._finish(state, frame, regions, feats, timings)
        self.last_timings = timings
        return result

    def spawn(self) -> SearchRegionTracker:
        """A tracker for another target that shares this one's networks (backbone, heads,
        parameters) and has its own state (classifier model, memory, box, peak history)."""
        other = copy.copy(self)
        other._state = None
        other.last_timings = {}
        other.search = self.search.spawn()
        other.confidence_estimator = ConfidenceEstimator(self.confidence_estimator.calibrator)
        return other

    # ------------------------------------------------------------------ the frame's phases
    def _next_frame(self, frame: np.ndarray) -> tuple[TargetState, np.ndarray, list[Region]]:
        """Begin ``frame``: the state (frame counter advanced), the frame as RGB and its search
        regions around the last position, one per side factor of the box estimator."""
        state = self._state
        if state is None:
            raise ValueError("track() called before initialize(frame, box)")
        factors = self.box_estimator.side_factors(state.frame_index)
        frame = as_rgb(frame)
        self._clamp(state, frame.shape)
        state.frame_index += 1
        return state, frame, self.search.crop(frame, state.center, state.size, factors)

    def _finish(
        self,
        state: TargetState,
        frame: np.ndarray,
        regions: list[Region],
        feats: dict[str, Tensor],
        timings: dict[str, float],
    ) -> TrackResult:
        """The frame after the backbone, ``feats`` of ``regions`` (one batch row each): score,
        estimate, update, confidence."""
        params = self.params
        # score: the classifier on every region; the best region's peak localised.
        tic = time.perf_counter()
        scores, samples = self.classifier.score(state.model, feats[self.classifier.layer])
        peaks = scores.flatten(1).amax(dim=1).tolist()
        best, factor = best_scale(tuple(region.factor for region in regions), peaks)
        region = regions[best]
        target_crop = state.size * region.scale
        found = self.search.localize(scores[best], self.classifier.stride, target_crop)
        toc = time.perf_counter()
        timings["classifier"], tic = toc - tic, toc
        # estimate: the box estimator moves the state.
        status = found.status
        reported = None
        self.box_estimator.last_value = math.nan
        if status != TrackStatus.NOT_FOUND:
            refine = status != TrackStatus.UNCERTAIN or params.update_scale_when_uncertain
            region_feats = {
                layer: feats[layer][best : best + 1] for layer in self.box_estimator.layers
            }
            reported = self.box_estimator.estimate(
                state, self.classifier.position(found), region, factor, region_feats, refine
            )
            self._clamp(state, frame.shape)
        toc = time.perf_counter()
        timings["box"], tic = toc - tic, toc
        # update: a confident frame becomes a sample; the classifier trains when due.
        if status in (TrackStatus.NORMAL, TrackStatus.HARD_NEGATIVE):
            learning_rate = (
                params.hard_negative_learning_rate
                if status == TrackStatus.HARD_NEGATIVE
                else params.learning_rate
            )
            label = self.classifier.label(state, region)
            state.memory.add(samples[best], label, learning_rate)
        self.classifier.train(state, status)
        timings["update"] = time.perf_counter() - tic
        # confidence: reads what the frame computed and changes nothing.
        confidence = self.confidence_estimator(
            scores[best],
            found,
            params.search_size,
            target_crop,
            peaks,
            self.box_estimator.last_value,
        )
        timings["confidence"] = self.confidence_estimator.last_seconds
        box = state.box() if reported is None else reported
        return TrackResult(box, found.score, status, confidence)

    def _clamp(self, state: TargetState, frame_shape: tuple[int, ...]) -> None:
        state.center, state.size = clamp_target(
            state.center, state.size, state.min_size, frame_shape
        )
