"""A search-region tracker is three parts and one frame loop.

::

    frame ──> SearchRegion ──crops, features──> Classifier ──score map──> SearchRegion.localize
                                                                               │ position, status
                     TargetState <──centre, size── BoxEstimator <──────────────┘
                         │                    (scale search, IoU / EBM ascent, gated, polished)
                         └──> Classifier.label / train (sample memory, filter update)

- the **search region** (:class:`~ebmtrack.tracking.search_region.SearchRegion`): the crops
  around the last position, the backbone's features of them, the localisation of a score map
  (or, with one backbone pass, :class:`~ebmtrack.tracking.search_region.SiameseSearchRegion`:
  the siamese box estimator's search crop and its features, which its head decodes too);
- the **classifier** (:class:`Classifier`): ATOM's Gauss-Newton classifier
  (:class:`~ebmtrack.tracking.atom.classifier.GaussNewtonClassifier`) or DiMP's learnt
  optimiser (:class:`~ebmtrack.tracking.dimp.classifier.LearntClassifier`);
- the **box estimator** (:class:`BoxEstimator`): one class per ``box_mode``, ATOM's
  (:data:`~ebmtrack.tracking.atom.box.BOX_ESTIMATORS`: position, scale search, IoU ascent, gated,
  polished) or DiMP's (:data:`~ebmtrack.tracking.dimp.box.BOX_ESTIMATORS`: position, EBM
  ascent), built by :func:`build_box_estimator`.

Each part reads a small config of its own (a dataclass), filled from the tracker's parameters by
field name (:func:`~ebmtrack.tracking.params.part_config`).

:class:`SearchRegionTracker` runs every frame as the same named phases: search (crops and
features), score, estimate, update, confidence. ``AtomTracker`` and ``DiMPTracker`` only build
their parts from their parameters.

:meth:`SearchRegionTracker.step` is the one frame loop, and it is batched: it takes the states of
any number of targets (:class:`TargetState`, made by :meth:`SearchRegionTracker.start`), cuts
every target's regions, runs the backbone once on all of them and finishes each target on its
rows of the features. One target is a batch of one (:meth:`~SearchRegionTracker.track`), several
are :mod:`ebmtrack.tracking.multi`. A :class:`Mode`, a fourth, optional part, may take over a
target's frame (the long-term mode of :mod:`ebmtrack.tracking.longterm` searches the whole frame
while the target is lost) and review the results of the others.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from ebmtrack.lite.frames import as_rgb, clamp_target
from ebmtrack.lite.position import ClassifierEvidence
from ebmtrack.tracking.base import TrackResult, TrackStatus, check_frame_size
from ebmtrack.tracking.box_head import BoxHead
from ebmtrack.tracking.confidence import ConfidenceEstimator
from ebmtrack.tracking.localize import Localization, best_scale
from ebmtrack.tracking.memory import SampleMemory
from ebmtrack.tracking.params import SearchRegionParams, part_config
from ebmtrack.tracking.search_region import FirstFrame, Region, SearchRegion

__all__ = [
    "PHASES",
    "BoxEstimator",
    "Classifier",
    "Mode",
    "SearchRegionTracker",
    "TargetFrame",
    "TargetState",
    "build_box_estimator",
    "split_features",
]

PHASES = ("crop", "backbone", "classifier", "box", "update", "confidence")
"""The phases of a frame, in order, as :attr:`SearchRegionTracker.last_timings` names them."""


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
        box_model: what the box estimator keeps of the target from the first frame
            (:meth:`BoxEstimator.start`; the siamese estimator's template features), or None.
        confidence_estimator: the target's confidence features and the running level of its
            peaks (:class:`~ebmtrack.tracking.confidence.ConfidenceEstimator`).
        mode: the per-target state of the tracker's :class:`Mode` (the long-term mode's
            :class:`~ebmtrack.tracking.longterm.LostState`), None without one.
        box_score: the box estimator's own score of the last frame's box (the siamese head's
            target probability, which the long-term mode reads), NaN where none decoded one.
        frame_size: (height, width) of the first frame; every frame must have it.
    """

    center: np.ndarray
    size: np.ndarray
    min_size: np.ndarray
    frame_index: int
    memory: SampleMemory
    model: Any
    modulation: list[Tensor] | None = None
    box_model: Any = None
    confidence_estimator: ConfidenceEstimator = field(default_factory=ConfidenceEstimator)
    mode: Any = None
    frame_size: tuple[int, ...] = ()
    box_score: float = math.nan

    def box(self) -> np.ndarray:
        """(x, y, w, h) in frame px."""
        return np.concatenate([self.center - self.size / 2, self.size])

    def clamp(self, frame_shape: tuple[int, ...]) -> None:
        """Keep the target sane in a frame of ``frame_shape`` (:func:`~ebmtrack.lite.frames.
        clamp_target`)."""
        self.center, self.size = clamp_target(self.center, self.size, self.min_size, frame_shape)


@dataclass
class TargetFrame:
    """One target's frame after the backbone: what :meth:`SearchRegionTracker._finish` and a
    :class:`Mode` that takes the frame turn into the target's result.

    Attributes:
        state: the target's state (updated in place).
        frame: the frame, uint8 RGB.
        regions: the target's regions of the frame.
        feats: their features, one batch row per region.
        timings: the frame's seconds per phase (:data:`PHASES`), added to.
    """

    state: TargetState
    frame: np.ndarray
    regions: list[Region]
    feats: dict[str, Tensor]
    timings: dict[str, float]


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

    def start(self, frame: np.ndarray, center: np.ndarray, size: np.ndarray) -> Any:
        """What it keeps of a new target at ``center``, ``size`` (frame px) in the first
        ``frame`` (:attr:`TargetState.box_model`; None for most)."""

    def estimate(
        self,
        state: TargetState,
        position: np.ndarray,
        region: Region,
        factor: float,
        feats: dict[str, Tensor],
        refine: bool,
        frame: np.ndarray,
        evidence: ClassifierEvidence | None = None,
    ) -> np.ndarray | None:
        """Move ``state`` (centre, size) to this frame's estimate, from the classifier's
        ``position`` (crop px) in ``region`` (the best of the frame's; ``factor`` the scale
        between its peaks, ``feats`` its features) of ``frame`` (uint8 RGB). ``refine``: the
        size may change; ``evidence``: the classifier's score map and status, for the rule by which
        it bounds the box (:mod:`ebmtrack.lite.position`). Returns the box to report where it is
        not the state's, else None."""


def build_box_estimator(
    estimators: dict[str, type], mode: str, params, head: BoxHead | None
) -> BoxEstimator:
    """The box estimator of ``mode`` from a tracker's table of them by ``box_mode`` (classes with
    ``needs_head`` and ``configs``, the config dataclasses they take in order, then ``head=``),
    its configs filled from ``params`` (:func:`~ebmtrack.tracking.params.part_config`). The one
    check that a mode gets a box head exactly when it reads one (ValueError)."""
    kind = estimators[mode]
    if kind.needs_head and head is None:
        others = " or ".join(repr(m) for m, k in estimators.items() if not k.needs_head)
        raise ValueError(f"box_mode={mode!r} needs a box_head, or pass box_mode={others}")
    if head is not None and not kind.needs_head:
        raise ValueError(f"box_mode={mode!r} reads no box_head: pass none")
    return kind(*(part_config(config, params) for config in kind.configs), head=head)


class Mode(Protocol):
    """An optional part that may take over a target's frame and review the others' results (the
    long-term mode, :class:`~ebmtrack.tracking.longterm.LongTermMode`)."""

    def start(self) -> Any:
        """The per-target state of a new target (kept in :attr:`TargetState.mode`)."""

    def takes(self, state: TargetState) -> bool:
        """Whether the mode runs this target's frame instead of the usual phases."""

    def crop(
        self, tracker: SearchRegionTracker, state: TargetState, frame: np.ndarray
    ) -> list[Region]:
        """The regions of a frame it takes (they join the frame's one backbone batch)."""

    def finish(self, tracker: SearchRegionTracker, target: TargetFrame) -> TrackResult:
        """The result of a frame it takes, from the features of its regions."""

    def review(self, state: TargetState, result: TrackResult) -> TrackResult:
        """The result of a usual frame, as the mode reports it."""


def split_features(feats: dict[str, Tensor], counts: Sequence[int]) -> list[dict[str, Tensor]]:
    """Features of a batch ``{layer: (sum(counts), C, H, W)}`` -> one dict per target with its
    ``counts[i]`` consecutive rows (views, no copy)."""
    parts: list[dict[str, Tensor]] = []
    start = 0
    for count in counts:
        parts.append({layer: value[start : start + count] for layer, value in feats.items()})
        start += count
    return parts


class SearchRegionTracker:
    """A tracker composed of a search region, a classifier and a box estimator (and optionally a
    :class:`Mode`).

    Args:
        params: the tracker's parameters.
        search: the search region part.
        classifier: the classifier part.
        box_estimator: the box estimator part.
        calibrator: maps the per-frame features of :mod:`ebmtrack.tracking.confidence` to
            ``TrackResult.confidence``; None: the confidence is NaN.
        mode: a mode that may take over some of a target's frames; None: every frame is usual.

    The frame loop is :meth:`step` (any number of targets, one backbone call); the
    :class:`~ebmtrack.tracking.base.Tracker` interface (:meth:`initialize`, :meth:`track`) is
    that loop on one target, whose state :attr:`state` gives. After each frame ``last_timings``
    holds the seconds spent in each of :data:`PHASES` (summed over the targets); on CUDA they
    include no synchronisation, so they are CPU-side times.
    """

    name = "search-region"

    def __init__(
        self,
        params: SearchRegionParams,
        search: SearchRegion,
        classifier: Classifier,
        box_estimator: BoxEstimator,
        calibrator=None,
        mode: Mode | None = None,
    ) -> None:
        self.params = params
        self.device = search.device
        self.search = search
        self.classifier = classifier
        self.box_estimator = box_estimator
        self.calibrator = calibrator
        self.mode = mode
        self.last_timings: dict[str, float] = {}
        self.states: list[TargetState] = []

    @property
    def backbone_runtime(self) -> str:
        """The backbone's resolved runtime: ``torch``, ``onnx`` or ``onnx-int8``."""
        return self.search.runtime.name

    @property
    def dtype(self) -> torch.dtype:
        """The eager backbone's and the matrix products' floating-point type."""
        return self.search.runtime.dtype

    @property
    def state(self) -> TargetState | None:
        """The target's state after :meth:`initialize` (None before)."""
        return self.states[0] if self.states else None

    @property
    def confidence_estimator(self) -> ConfidenceEstimator | None:
        """The target's confidence estimator (its ``last_features``: the last frame's features;
        None before :meth:`initialize`)."""
        state = self.state
        return None if state is None else state.confidence_estimator

    # ------------------------------------------------------------------ tracker interface
    def initialize(self, frame: np.ndarray, box: np.ndarray) -> None:
        """Start the one target of :meth:`track` (:meth:`start`)."""
        self.states = [self.start(frame, box)]

    def track(self, frame: np.ndarray) -> TrackResult:
        """Locate the target in ``frame`` (any size, RGB or grayscale): :meth:`step` on it."""
        if not self.states:
            raise ValueError("track() called before initialize(frame, box)")
        return self.step(frame, self.states)[0]

    # ------------------------------------------------------------------ the frame loop
    def start(self, frame: np.ndarray, box: np.ndarray) -> TargetState:
        """A new target's state: the classifier learnt and the box head's modulation computed
        from the augmented first frame, the target at ``box`` (x, y, w, h)."""
        classifier, params = self.classifier, self.params
        first = self.search.first_frame(frame, box, classifier.samples, classifier.layer)
        head = self.box_estimator.head
        modulation = None if head is None else head.modulation(first, self.search.size)
        model, samples, labels = classifier.start(first)
        memory = SampleMemory(
            samples, labels, params.memory_size, params.init_samples_minimum_weight
        )
        state = TargetState(
            center=first.center,
            size=first.size,
            min_size=np.minimum(params.min_target_size, first.size),
            frame_index=1,
            memory=memory,
            model=model,
            modulation=modulation,
            box_model=self.box_estimator.start(first.frame, first.center, first.size),
            confidence_estimator=ConfidenceEstimator(self.calibrator),
            mode=None if self.mode is None else self.mode.start(),
            frame_size=first.frame.shape[:2],
        )
        state.clamp(first.frame.shape)
        return state

    def step(self, frame: np.ndarray, states: Sequence[TargetState]) -> list[TrackResult]:
        """The frame loop: every target of ``states`` (updated in place) in ``frame``, the
        search regions of all of them in one backbone call; one result per state, in order."""
        timings = dict.fromkeys(PHASES, 0.0)
        tic = time.perf_counter()
        frame = as_rgb(frame)
        for state in states:
            check_frame_size(state.frame_size, frame)
        taken = [self.mode is not None and self.mode.takes(state) for state in states]
        regions = [
            self._regions(state, frame, mine) for state, mine in zip(states, taken, strict=True)
        ]
        toc = time.perf_counter()
        timings["crop"], tic = toc - tic, toc
        feats = self.search.features([region for own in regions for region in own])
        timings["backbone"] = time.perf_counter() - tic
        # One target reads the whole batch (no slicing); several, their own rows each.
        parts = [feats] if len(regions) == 1 else split_features(feats, [len(r) for r in regions])
        results = []
        for state, own, part, mine in zip(states, regions, parts, taken, strict=True):
            target = TargetFrame(state, frame, own, part, timings)
            if mine:
                result = self.mode.finish(self, target)
            else:
                result = self._finish(target)
                if self.mode is not None:
                    result = self.mode.review(state, result)
            results.append(result)
        self.last_timings = timings
        return results

    # ------------------------------------------------------------------ the frame's phases
    def _regions(self, state: TargetState, frame: np.ndarray, taken: bool) -> list[Region]:
        """Begin a target's frame: its frame counter advanced, its search regions around the
        last position (one per side factor of the box estimator), or the mode's."""
        factors = self.box_estimator.side_factors(state.frame_index)
        state.clamp(frame.shape)
        state.frame_index += 1
        if taken:
            return self.mode.crop(self, state, frame)
        return self.search.crop(frame, state.center, state.size, factors)

    def _finish(self, target: TargetFrame) -> TrackResult:
        """A target's usual frame after the backbone: score, estimate, update, confidence
        (seconds added to its ``timings``)."""
        state, regions, feats, timings = target.state, target.regions, target.feats, target.timings
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
        timings["classifier"] += toc - tic
        tic = toc
        # estimate: the box estimator moves the state.
        status = found.status
        reported = None
        self.box_estimator.last_value = math.nan
        state.box_score = math.nan
        if status != TrackStatus.NOT_FOUND:
            refine = status != TrackStatus.UNCERTAIN or params.update_scale_when_uncertain
            region_feats = {
                layer: feats[layer][best : best + 1] for layer in self.box_estimator.layers
            }
            reported = self.box_estimator.estimate(
                state,
                self.classifier.position(found),
                region,
                factor,
                region_feats,
                refine,
                target.frame,
                ClassifierEvidence(
                    scores[best].detach().cpu().numpy(),
                    region.matrix,
                    self.classifier.stride,
                    status,
                    factor if len(regions) > 1 else None,
                ),
            )
            state.clamp(target.frame.shape)
        toc = time.perf_counter()
        timings["box"] += toc - tic
        tic = toc
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
        timings["update"] += time.perf_counter() - tic
        # confidence: reads what the frame computed and changes nothing.
        estimator = state.confidence_estimator
        confidence = estimator(
            scores[best],
            found,
            self.search.size,
            target_crop,
            peaks,
            self.box_estimator.last_value,
        )
        timings["confidence"] += estimator.last_seconds
        box = state.box() if reported is None else reported
        return TrackResult(box, found.score, status, confidence)
