"""The torch-free tracker: an export of ``ebmtrack export`` (:mod:`ebmtrack.lite.files`) run with
ONNX Runtime and NumPy (and OpenCV where installed: :mod:`ebmtrack.lite.imageops`), frame by frame
as the torch trackers run (:mod:`ebmtrack.tracking.composition`): search (crops, backbone), score
(the classifier and its localisation), estimate (the box mode), update (the sample memory and the
classifier's CG steps), confidence.

The box modes and the export's parameters: :mod:`ebmtrack.lite.params`.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from ebmtrack.lite import classifier as cls
from ebmtrack.lite.augment import augmented_crops, dropout_copies
from ebmtrack.lite.confidence import Calibrator, ConfidenceEstimator
from ebmtrack.lite.crop import (
    CropSpec,
    apply_matrix,
    crop_squares,
    invert_affine,
    search_region_side,
)
from ebmtrack.lite.files import Export, read_export, read_json_object
from ebmtrack.lite.frames import as_rgb, clamp_target, clip_init_box
from ebmtrack.lite.head import blend_size, load_head, refine_box
from ebmtrack.lite.localize import Localization, best_scale, localize, upsample_scores
from ebmtrack.lite.longterm import LostState, long_term_params, review, siamese_threshold_error
from ebmtrack.lite.lost import LostFrames
from ebmtrack.lite.memory import SampleMemory
from ebmtrack.lite.onnx_session import Session
from ebmtrack.lite.params import (
    BOX_MODES,
    POSITION_RULE,
    SIAMESE,
    BoxMode,
    backbone_runtime_error,
    merge_options,
    one_pass,
)
from ebmtrack.lite.position import (
    ClassifierEvidence,
    PositionRuleConfig,
    bounded_size,
    classifier_prior,
)
from ebmtrack.lite.result import TrackResult, TrackStatus, check_frame_size
from ebmtrack.lite.siamese import (
    INSTANCE_SIZE,
    STRIDE,
    SiameseBoxConfig,
    SiameseBoxEstimator,
)
from ebmtrack.lite.state import Region, State
from ebmtrack.lite.torch_random import TorchGenerator

__all__ = ["BOX_MODES", "BoxMode", "LiteTracker", "load"]


BACKBONE_RUNTIMES = ("auto", "onnx", "onnx-int8")
TRAINING_DTYPES = ("float32", "float64")


class LiteTracker(LostFrames):
    """A tracker loaded from an export (:func:`load`), with the torch trackers' interface:
    ``initialize(frame, box)``, then ``track(frame)`` -> :class:`~ebmtrack.lite.result.
    TrackResult` per frame. Frames are RGB uint8 (H, W, 3), or grayscale (H, W).

    Attributes:
        name: the exported tracker's name.
        params: its parameters (options applied).
        backbone_runtime: ``onnx`` (float32) or ``onnx-int8``: the backbone's that runs (with
            one pass the siamese estimator's, ``onnx``).
        threads: ONNX Runtime's intra-op threads of each of its sessions.
        last_timings: seconds of the last :meth:`track` call's phases (``crop``, ``backbone``,
            ``classifier``, ``box``, ``update``, ``confidence``).
    """

    def __init__(
        self,
        export: Export,
        threads: int = 1,
        backbone_runtime: str = "auto",
        training_dtype: str = "float32",
        **options,
    ) -> None:
        manifest = export.manifest
        if training_dtype not in TRAINING_DTYPES:
            raise ValueError(
                f"training_dtype must be one of {', '.join(TRAINING_DTYPES)}, "
                f"got {training_dtype!r}"
            )
        self.training_dtype = np.dtype(training_dtype)
        self.export = export
        self.name = str(manifest.get("tracker", "lite"))
        self.params = params = merge_options(export, options)
        self.mode = BOX_MODES[params["box_mode"]]
        backbone = manifest["backbone"]
        if backbone_runtime not in BACKBONE_RUNTIMES:
            raise ValueError(
                f"backbone_runtime must be one of {', '.join(BACKBONE_RUNTIMES)}, "
                f"got {backbone_runtime!r}"
            )
        runtime = backbone["runtime"] if backbone_runtime == "auto" else backbone_runtime
        if runtime not in backbone["files"]:
            raise ValueError(
                f"backbone_runtime {runtime!r}: this export has "
                f"{', '.join(sorted(backbone['files']))} only"
            )
        self.one_pass = one_pass(params.get("classifier_features"), params["box_mode"])
        # one pass runs the siamese backbone, float32 in ONNX Runtime, not the export's
        self.backbone_runtime = "onnx" if self.one_pass else runtime
        # the long-term mode where the export's params hold its fields (lite.longterm)
        self.long_term = long_term_params(params)
        wrong = self.long_term and siamese_threshold_error(self.long_term, self.one_pass)
        if wrong:
            raise ValueError(wrong)
        self.head = load_head(export, threads) if self.mode.head else None
        self.siamese = None
        if self.mode.siamese:
            files = manifest["siamese"]["models"][params["siamese_model"]]
            self.siamese = SiameseBoxEstimator(
                export.source(files["backbone"]),
                export.source(files["head"]),
                SiameseBoxConfig(**{name: params[name] for name in SIAMESE}),
                threads,
            )
        wrong = backbone_runtime_error(self.one_pass, backbone_runtime)
        if wrong is not None:
            raise ValueError(wrong)
        if self.one_pass:  # the classifier on the siamese backbone's search features
            self._backbone = None
            self.layer = "search"
            self.layers = (self.layer,)
            self.stride, self.channels = STRIDE, self.siamese.channels
            self.search_size, self.threads = INSTANCE_SIZE, self.siamese.backbone.threads
        else:
            self.layers = tuple(backbone["layers"])
            self._backbone = Session(export.source(backbone["files"][runtime]), threads)
            self.threads = self._backbone.threads
            classifier = manifest["classifier"]
            self.layer, self.stride = classifier["layer"], int(classifier["stride"])
            self.channels = int(classifier["channels"])
            self.search_size = params["search_size"]
        self.map_size = math.ceil(self.search_size / self.stride)
        self.settings = cls.ClassifierSettings(
            params["pelu_alpha"], params["filter_reg"], params["projection_reg"]
        )
        self.position_rule = PositionRuleConfig(
            **{name: params[name] for name in POSITION_RULE if name in params}
        )
        calibrator = manifest.get("calibrator")
        self.confidence = ConfidenceEstimator(
            Calibrator(read_json_object(export, calibrator)) if calibrator else None
        )
        self.factors = (1.0, *params["scale_factors"]) if self.mode.scale_search else (1.0,)
        size = self.search_size
        self._images = np.empty((len(self.factors), 3, size, size), dtype=np.float32)
        # Images per backbone call: the first frame's crops go in batches of this many, so that
        # ONNX Runtime's buffers stay those of a frame's search regions (a batch of 23 crops
        # held about 400 MiB more at 288 px).
        self.batch = max(len(self.factors), 3)
        self.last_timings: dict[str, float] = {}
        self._sigma = params["sigma_factor"] * size / params["search_area_scale"]
        self._state: State | None = None

    # ------------------------------------------------------------------ interface
    def initialize(self, frame: np.ndarray, box) -> None:
        """Learn the classifier (and the box head's modulation) from the augmented first frame."""
        params = self.params
        frame = as_rgb(frame)
        box = clip_init_box(box, frame.shape, "init box")
        rng = np.random.default_rng(params["seed"])
        generator = TorchGenerator(params["seed"])
        center, size = box[:2] + box[2:] / 2, box[2:].copy()
        side = self._side(size)
        if self.one_pass:  # the label's width, fixed at the first frame
            self._sigma = cls.label_sigma(params["sigma_factor"], size, self.search_size, side)
        crops, centers = augmented_crops(
            frame, tuple(center), side, params | {"search_size": self.search_size}, rng
        )
        feats = self._features(np.ascontiguousarray(crops.transpose(0, 3, 1, 2), np.float32))
        samples = cls.normalize_features(feats[self.layer])
        copies, probability = params["aug_dropout"]
        if copies:
            dropped = dropout_copies(samples[:1], copies, probability, generator)
            samples = np.concatenate([samples, dropped])
            centers = np.concatenate([centers, np.repeat(centers[:1], copies, axis=0)])
        modulation = None
        if self.head is not None:
            crop_size = size * self.search_size / side
            ref_box = np.concatenate([centers[0] - crop_size / 2, crop_size])
            modulation = self.head.modulation({k: v[:1] for k, v in feats.items()}, ref_box)
        labels = self._labels(centers)
        weights = np.full(samples.shape[0], 1.0 / samples.shape[0], dtype=np.float32)
        dim, k = params["projection_dim"], params["filter_size"]
        projection = generator.randn(dim, self.channels) / np.float32(math.sqrt(self.channels))
        filt = generator.randn(dim, k, k) / np.float32(dim * k * k)
        wide = self.training_dtype
        filt, projection, _ = cls.fit_classifier(
            filt.astype(wide),
            projection.astype(wide),
            samples.astype(wide),
            labels.astype(wide),
            weights.astype(wide),
            self.settings,
            gn_iters=params["init_gn_iters"],
            cg_iters=params["init_cg_iters"],
        )
        filt, projection = filt.astype(np.float32), projection.astype(np.float32)
        memory = SampleMemory(
            cls.project(samples, projection),
            labels,
            params["memory_size"],
            params["init_samples_minimum_weight"],
        )
        self._state = State(
            center=center,
            size=size,
            min_size=np.minimum(params["min_target_size"], size),
            frame_index=1,
            memory=memory,
            projection=projection,
            filter=filt,
            modulation=modulation,
            template=None if self.siamese is None else self.siamese.template(frame, center, size),
            frame_size=frame.shape[:2],
            lost=None if self.long_term is None else LostState.of(self.long_term),
        )
        self._clamp(self._state, frame.shape)
        self.confidence.reset()

    def track(self, frame: np.ndarray) -> TrackResult:
        """Locate the target in ``frame`` (any size, RGB or grayscale)."""
        state = self._state
        if state is None:
            raise ValueError("track() called before initialize(frame, box)")
        params, timings = self.params, {}
        tic = time.perf_counter()
        search = (state.frame_index - 1) % params["scale_search_interval"] == 0
        factors = self.factors if search else (1.0,)
        frame = as_rgb(frame)
        check_frame_size(state.frame_size, frame)
        self._clamp(state, frame.shape)
        state.frame_index += 1
        if state.lost is not None and state.lost.lost:
            return self._lost_frame(frame, state, timings, tic)
        regions = self._crop(frame, state.center, state.size, factors)
        tic = self._lap(timings, "crop", tic)
        images = self._images[: len(regions)]
        for slot, region in zip(images, regions, strict=True):
            slot[...] = region.patch.transpose(2, 0, 1)
        feats = self._features(images)
        tic = self._lap(timings, "backbone", tic)
        # score: the classifier on every region; the best region's peak localised.
        projected = cls.project(cls.normalize_features(feats[self.layer]), state.projection)
        scores = cls.filter_response(projected, state.filter)
        peaks = scores.reshape(len(regions), -1).max(axis=1).tolist()
        best, factor = best_scale(tuple(region.factor for region in regions), peaks)
        region = regions[best]
        target_crop = state.size * region.scale
        found = self._localize(scores[best], target_crop)
        tic = self._lap(timings, "classifier", tic)
        status, reported, state.box_score = found.status, None, math.nan
        if status != TrackStatus.NOT_FOUND:
            refine = status != TrackStatus.UNCERTAIN or params["update_scale_when_uncertain"]
            position = np.asarray(found.position, dtype=np.float64)
            region_feats = {layer: feats[layer][best : best + 1] for layer in self.layers}
            evidence = ClassifierEvidence(
                scores[best],
                region.matrix,
                self.stride,
                status,
                factor if len(regions) > 1 else None,
            )
            reported = self._estimate(
                state, position, region, factor, region_feats, refine, frame, evidence
            )
            self._clamp(state, frame.shape)
        tic = self._lap(timings, "box", tic)
        if status in (TrackStatus.NORMAL, TrackStatus.HARD_NEGATIVE):
            rate = (
                params["hard_negative_learning_rate"]
                if status == TrackStatus.HARD_NEGATIVE
                else params["learning_rate"]
            )
            label = self._labels(apply_matrix(region.matrix, state.center)[None])[0]
            state.memory.add(projected[best], label, rate)
        if status == TrackStatus.HARD_NEGATIVE or (
            (state.frame_index - 1) % params["train_skipping"] == 0
        ):
            wide = self.training_dtype
            filt, _ = cls.update_filter(
                state.filter.astype(wide),
                *(array.astype(wide, copy=False) for array in state.memory.training_set()),
                self.settings,
                cg_iters=params["update_cg_iters"],
            )
            state.filter = filt.astype(np.float32)
        tic = self._lap(timings, "update", tic)
        confidence = self.confidence(
            scores[best], found, self.search_size, target_crop, peaks, math.nan
        )
        self._lap(timings, "confidence", tic)
        self.last_timings = timings
        box = state.box() if reported is None else reported
        result = TrackResult(box, found.score, status, confidence)
        if state.lost is None:
            return result
        return review(state.lost, self.long_term, result, state.box_score)

    # ------------------------------------------------------------------ pieces
    @staticmethod
    def _lap(timings: dict, name: str, tic: float) -> float:
        toc = time.perf_counter()
        timings[name] = toc - tic
        return toc

    def _features(self, images: np.ndarray) -> dict[str, np.ndarray]:
        """The backbone's layers of ``images`` (N, 3, S, S), in calls of at most ``batch`` (the
        siamese backbone's: one image a call)."""
        if self.one_pass:
            return {self.layer: self.siamese.features_each(images)}
        name, outputs = self._backbone.inputs[0], self._backbone.outputs
        parts = [
            self._backbone({name: images[start : start + self.batch]})
            for start in range(0, len(images), self.batch)
        ]
        return {
            layer: parts[0][output]
            if len(parts) == 1
            else np.concatenate([part[output] for part in parts])
            for layer, output in zip(self.layers, outputs, strict=True)
        }

    def _labels(self, centers_px: np.ndarray) -> np.ndarray:
        centers = np.asarray(centers_px / self.stride, dtype=np.float32)
        return cls.gaussian_labels(
            centers, self._sigma / self.stride, (self.map_size, self.map_size)
        )

    def _side(self, size: np.ndarray) -> float:
        """The search region's side (frame px) for a target of ``size``: ATOM's, or with one
        backbone pass the siamese estimator's search crop (:mod:`ebmtrack.lite.siamese`)."""
        if self.one_pass:
            return self.siamese.search_side(size)
        return search_region_side(size, self.params["search_area_scale"])

    def _crop(self, frame, center, size, factors) -> list[Region]:
        search_size = self.search_size
        side = self._side(size)
        specs = [CropSpec(tuple(center), side * factor) for factor in factors]
        patches, matrices = crop_squares(frame, specs, search_size)
        return [
            Region(patch, matrix, search_size / spec.side, factor)
            for patch, matrix, spec, factor in zip(patches, matrices, specs, factors, strict=True)
        ]

    def _localize(self, scores: np.ndarray, target_size: np.ndarray) -> Localization:
        params = self.params
        return localize(
            upsample_scores(scores, params["score_upsample"]),
            cell_px=self.stride / params["score_upsample"],
            crop_size=self.search_size,
            target_size=tuple(target_size),
            not_found_threshold=params["target_not_found_threshold"],
            distractor_threshold=params["distractor_threshold"],
            hard_negative_threshold=params["hard_negative_threshold"],
            neighborhood_scale=params["target_neighborhood_scale"],
            displacement_scale=params["displacement_scale"],
        )

    def _clamp(self, state: State, frame_shape) -> None:
        state.center, state.size = clamp_target(
            state.center, state.size, state.min_size, frame_shape
        )

    def _estimate(
        self, state, position, region, factor, feats, refine, frame, evidence
    ) -> np.ndarray | None:
        """Move the state to this frame's box (the box mode's rules); returns the box to report
        where it is not the state's."""
        params, mode, scale = self.params, self.mode, region.scale
        center_crop, reported = position, None
        inverse = invert_affine(region.matrix)
        if self.siamese is not None and refine:
            rule = self.position_rule
            prior = classifier_prior(evidence, rule.classifier_weight)
            if self.one_pass:  # the same crop's features, the window on the classifier's peak
                found = self.siamese.decode(
                    feats[self.layer],
                    state.template,
                    state.center,
                    state.size,
                    scale,
                    prior,
                    window_center=apply_matrix(inverse, position),
                )
            else:
                found = self.siamese.locate(
                    frame, apply_matrix(inverse, position), state.size, state.template, prior
                )
            state.size = bounded_size(found.size, state.size, evidence, rule)
            state.box_score = found.score
            center_crop = apply_matrix(region.matrix, found.center)
        elif factor != 1.0 and refine:
            state.size = blend_size(state.size, state.size * factor, params["size_update_rate"])
        if mode.head and refine:
            refined = refine_box(
                self.head,
                state.modulation,
                feats,
                center_crop,
                state.size * scale,
                params,
                TorchGenerator(params["seed"] * 100_003 + state.frame_index),
            )
            if refined is not None and (not mode.gate or refined[1] >= params["box_accept_margin"]):
                box_crop = refined[0]
                box_center = box_crop[:2] + box_crop[2:] / 2
                rate = params["size_update_rate"]
                if mode.head_state:
                    center_crop = box_center
                    state.size = blend_size(state.size, box_crop[2:] / scale, rate)
                if not mode.head_state or (not mode.scale_search and rate != 1.0):
                    # reported only, or (refine) the state's size damped: the head's own box
                    size = box_crop[2:] / scale
                    reported = np.concatenate([apply_matrix(inverse, box_center) - size / 2, size])
        state.center = apply_matrix(inverse, center_crop)
        return reported


def load(
    folder: str | Path,
    threads: int = 1,
    backbone_runtime: str = "auto",
    training_dtype: str = "float32",
    **options,
) -> LiteTracker:
    """The tracker of an export folder, every file checked against its manifest.

    Args:
        folder: written by ``ebmtrack export``.
        threads: ONNX Runtime's intra-op threads (0: one per core); NumPy's own matrix products
            follow its BLAS settings (``OPENBLAS_NUM_THREADS``, set before the process starts).
        backbone_runtime: ``auto`` (the exported tracker's: int8 where the torch tracker ran
            int8), ``onnx`` (float32) or ``onnx-int8``.
        training_dtype: of the classifier's Gauss-Newton / CG training: ``float32`` (the torch
            tracker's) or ``float64`` (the problem's answer without float32's rounding, which
            moves the torch tracker's own boxes by a few pixels; docs/results/runtime.md).
        **options: parameters to override (``seed``, ``box_mode``, thresholds, ...); those the
            graphs fix (``search_size``, ...) are refused.

    Raises:
        ValueError: not an export, a changed or missing file, a bad option (one line each).
    """
    return LiteTracker(read_export(folder), threads, backbone_runtime, training_dtype, **options)
