"""What the ATOM and DiMP trackers share: the target state and its square search region.

The target is a centre and a size in frame pixels. Each frame, a square region of side
``search_area_scale * sqrt(w h)`` around the last centre is cropped and resized to
``search_size`` pixels (:func:`ebmtrack.ops.crop.crop_squares`: the regions of one frame share its
anti-aliasing pyramid); the classifier and the box head work in that crop's pixels.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ebmtrack.ops.crop import CropSpec, crop_squares, search_region_side
from ebmtrack.tracking.augment import augmented_crops, dropout_copies
from ebmtrack.tracking.base import TrackResult
from ebmtrack.tracking.init_box import clip_init_box
from ebmtrack.tracking.localize import Localization, localize, upsample_scores
from ebmtrack.tracking.memory import SampleMemory

# The target centre may leave the frame by this fraction of its size (reference: inside_ratio 0.2).
_CENTER_OUTSIDE = 0.3


def as_rgb(frame: np.ndarray) -> np.ndarray:
    """A uint8 (H, W, 3) view of a uint8 (H, W), (H, W, 1), (H, W, 3) or (H, W, 4) frame."""
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8:
        raise ValueError(
            f"frame must be a uint8 numpy array, "
            f"got {getattr(frame, 'dtype', type(frame).__name__)}"
        )
    if frame.ndim == 2:
        frame = frame[:, :, None]
    if frame.ndim != 3 or frame.shape[2] not in (1, 3, 4) or min(frame.shape[:2]) < 1:
        raise ValueError(f"frame must have shape (H, W), (H, W, 3) or (H, W, 4), got {frame.shape}")
    if frame.shape[2] == 1:
        return np.repeat(frame, 3, axis=2)
    return frame[:, :, :3]


def clamp_target(
    center: np.ndarray, size: np.ndarray, min_size: np.ndarray, frame_shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """The target's (centre, size) in frame px kept sane: the size between ``min_size`` and the
    frame's, the centre at most ``_CENTER_OUTSIDE`` sizes outside the frame."""
    height, width = frame_shape[:2]
    limit = np.array([width, height], dtype=np.float64)
    size = np.clip(size, min_size, np.maximum(limit, min_size))
    margin = _CENTER_OUTSIDE * size
    return np.clip(center, -margin, limit + margin), size


@dataclass
class FirstFrame:
    """The first frame, augmented (:mod:`ebmtrack.tracking.augment`): what both trackers learn
    their classifier and box head from.

    Attributes:
        frame: the frame as uint8 RGB.
        center, size: the target in frame px, (2,) each.
        side: side of the search region in frame px.
        feats: backbone features of the augmented crops, the identity crop first.
        samples: (N, ...) classifier samples of the crops, then ``aug_dropout`` copies of the first.
        centers: (N, 2) the target centre in each sample's crop px.
        generator: the tracker's torch generator, after the dropout draws.
    """

    frame: np.ndarray
    center: np.ndarray
    size: np.ndarray
    side: float
    feats: dict[str, Tensor]
    samples: Tensor
    centers: np.ndarray
    generator: torch.Generator


@dataclass
class SearchRegion:
    """One frame's search region: the (S, S, 3) crop, the 2x3 frame -> crop ``matrix``, the
    ``scale`` in crop px per frame px and the side ``factor`` it was cropped with."""

    patch: np.ndarray
    matrix: np.ndarray
    scale: float
    factor: float = 1.0


class SearchRegionTracker:
    """Base of the trackers that search a square region around the last target position.

    Subclasses set ``params`` (:class:`~ebmtrack.tracking.params.SearchRegionParams`),
    ``device``, ``classifier_layer`` (the backbone layer the classifier reads), ``_state``
    (with ``center``, ``size``, ``min_size``, ``frame_index``), the backbone call ``_extract``
    and its (N, 3, S, S) input buffer ``_image``, one slot per search region of a frame.
    """

    params: Any
    device: torch.device
    classifier_layer: str
    _state: Any
    _extract: Callable[[Tensor], dict[str, Tensor]]
    _image: Tensor

    def _side(self, size: np.ndarray) -> float:
        return search_region_side(size, self.params.search_area_scale)

    def _to_tensor(self, crops: np.ndarray) -> Tensor:
        return torch.from_numpy(crops).to(self.device).permute(0, 3, 1, 2).float()

    def _clamp_state(self, state, frame_shape: tuple[int, ...]) -> None:
        state.center, state.size = clamp_target(
            state.center, state.size, state.min_size, frame_shape
        )

    def _box(self, state) -> np.ndarray:
        return np.concatenate([state.center - state.size / 2, state.size])

    def _first_frame(
        self, frame: np.ndarray, box: np.ndarray, to_samples: Callable[[Tensor], Tensor]
    ) -> FirstFrame:
        """Check the first frame and box, crop the augmented search regions, run the backbone
        on them and turn the classifier layer's features into samples with ``to_samples``
        (without autograd), adding the channel-dropout copies of the first."""
        params = self.params
        frame = as_rgb(frame)
        box = clip_init_box(box, frame.shape, "init box")
        rng = np.random.default_rng(params.seed)
        generator = torch.Generator().manual_seed(params.seed)
        center, size = box[:2] + box[2:] / 2, box[2:].copy()
        side = self._side(size)
        crops, centers = augmented_crops(frame, tuple(center), side, params, rng)
        with torch.no_grad():
            feats = self._extract(self._to_tensor(crops))
            samples = to_samples(feats[self.classifier_layer])
            copies, probability = params.aug_dropout
            if copies:
                dropped = dropout_copies(samples[:1], copies, probability, generator)
                samples = torch.cat([samples, dropped])
                centers = np.concatenate([centers, np.repeat(centers[:1], copies, axis=0)])
        return FirstFrame(frame, center, size, side, feats, samples, centers, generator)

    def _start(
        self, first: FirstFrame, state_type, samples: Tensor, labels: Tensor, **fields: Any
    ) -> None:
        """Begin tracking: ``_state = state_type(center, size, min_size, frame_index=1,
        memory, **fields)`` with the sample memory filled by the first frame's ``samples`` and
        ``labels``, and ``fields`` the tracker's own (its classifier, the box head's
        modulation)."""
        params = self.params
        memory = SampleMemory(
            samples, labels, params.memory_size, params.init_samples_minimum_weight
        )
        self._state = state_type(
            center=first.center,
            size=first.size,
            min_size=np.minimum(params.min_target_size, first.size),
            frame_index=1,
            memory=memory,
            **fields,
        )
        self._clamp_state(self._state, first.frame.shape)

    def _next_frame(
        self, frame: np.ndarray, side_factors: tuple[float, ...] = (1.0,)
    ) -> tuple[Any, np.ndarray, list[SearchRegion]]:
        """Start tracking ``frame``: the state (frame counter advanced), the frame as RGB and
        its search regions around the last position, one per side factor (1: the usual
        search region; 1.05: 5 % wider, so that the target appears 5 % smaller)."""
        state = self._state
        if state is None:
            raise ValueError("track() called before initialize(frame, box)")
        frame = as_rgb(frame)
        self._clamp_state(state, frame.shape)
        state.frame_index += 1
        size = self.params.search_size
        center, side = tuple(state.center), self._side(state.size)
        specs = [CropSpec(center, side * factor) for factor in side_factors]
        patches, matrices = crop_squares(frame, specs, size)
        regions = [
            SearchRegion(patch, matrix, size / spec.side, factor)
            for patch, matrix, spec, factor in zip(
                patches, matrices, specs, side_factors, strict=True
            )
        ]
        return state, frame, regions

    def _search_features(
        self, frame: np.ndarray, timings: dict[str, float], side_factors: tuple[float, ...] = (1.0,)
    ) -> tuple[Any, np.ndarray, list[SearchRegion], dict[str, Tensor]]:
        """:meth:`_next_frame`, then the backbone's features of the search regions in one batch
        (``_image`` holds at least one slot per region, the first ones are used; no autograd
        history, though a refinement may still differentiate functions of them). Records the
        ``crop`` and ``backbone`` seconds in ``timings``."""
        tic = time.perf_counter()
        state, frame, regions = self._next_frame(frame, side_factors)
        images = self._image[: len(regions)]
        fill_images(images, regions)
        toc = time.perf_counter()
        timings["crop"], tic = toc - tic, toc
        with torch.no_grad():
            feats = self._extract(images)
        timings["backbone"] = time.perf_counter() - tic
        return state, frame, regions, feats

    # -------------------------------------------------- one frame in two halves (several targets)
    def _frame_factors(self) -> tuple[float, ...]:
        """The side factors of the next frame's search regions (:meth:`_next_frame`)."""
        return (1.0,)

    def _finish(
        self,
        state: Any,
        frame: np.ndarray,
        regions: list[SearchRegion],
        feats: dict[str, Tensor],
        timings: dict[str, float],
    ) -> TrackResult:
        """The frame after the backbone: ``feats`` of ``regions`` (one batch row per region)
        -> the target's result, the state updated."""
        raise NotImplementedError

    def track(self, frame: np.ndarray) -> TrackResult:
        """Locate the target in ``frame`` (any size, RGB or grayscale)."""
        timings: dict[str, float] = {}
        found = self._search_features(frame, timings, self._frame_factors())
        result = self._finish(*found, timings)
        self.last_timings = timings
        return result

    def spawn(self) -> SearchRegionTracker:
        """A tracker for another target that shares this one's networks (backbone, feature
        extractor, heads, parameters) and has its own state (classifier, memory, box)."""
        other = copy.copy(self)
        other._state = None
        other.last_timings = {}
        other._image = torch.empty_like(self._image)
        estimator = getattr(self, "confidence_estimator", None)
        if estimator is not None:  # per-target state kept outside _state: the peak's history
            other.confidence_estimator = type(estimator)(estimator.calibrator)
        return other


    def _localize(self, scores: Tensor, stride: int, target_size: np.ndarray) -> Localization:
        """The target in a (H, W) score map of ``stride``-pixel cells, upsampled by
        ``params.score_upsample``, judged by the parameters' thresholds (reference B.1);
        ``target_size`` (w, h) in crop pixels."""
        params = self.params
        return localize(
            upsample_scores(scores, params.score_upsample),
            cell_px=stride / params.score_upsample,
            crop_size=params.search_size,
            target_size=tuple(target_size),
            not_found_threshold=params.target_not_found_threshold,
            distractor_threshold=params.distractor_threshold,
            hard_negative_threshold=params.hard_negative_threshold,
            neighborhood_scale=params.target_neighborhood_scale,
            displacement_scale=params.displacement_scale,
        )

    def _proposal_generator(self) -> torch.Generator:
        # One stream per frame, so that a sequence replays identically.
        return torch.Generator().manual_seed(self.params.seed * 100_003 + self._state.frame_index)


def fill_images(images: Tensor, regions: list[SearchRegion]) -> None:
    """Copy the regions' (S, S, 3) uint8 patches into ``images`` (N, 3, S, S), one per slot."""
    with torch.no_grad():
        for slot, region in zip(images, regions, strict=True):
            slot.copy_(torch.from_numpy(region.patch).permute(2, 0, 1))
