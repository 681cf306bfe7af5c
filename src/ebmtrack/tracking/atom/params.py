"""Every parameter of the ATOM tracker in one dataclass, with the paper's and reference's values."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

from ebmtrack.lite.params import (
    CLASSIFIER_FEATURES,
    backbone_runtime_error,
    classifier_features_error,
    one_pass,
)
from ebmtrack.lite.position import PositionRuleConfig
from ebmtrack.lite.siamese import SIAMESE_MODELS, SiameseBoxConfig
from ebmtrack.models.precision import PRECISIONS
from ebmtrack.tracking.atom.box import (
    BOX_CLIMBS,
    BOX_ESTIMATORS,
    BOX_MODES,
    HEAD_MODES,
    SCALE_MODES,
)
from ebmtrack.tracking.params import SearchRegionParams, mode_fields
from ebmtrack.values import OptionError

__all__ = ["BOX_CLIMBS", "BOX_MODES", "HEAD_MODES", "SCALE_MODES", "AtomParams"]


@dataclass(frozen=True)
class AtomParams(SearchRegionParams):
    """Parameters of :class:`~ebmtrack.tracking.atom.AtomTracker`: the shared ones of
    :class:`~ebmtrack.tracking.params.SearchRegionParams` (whose defaults are ATOM's) and these.

    Defaults follow the ATOM paper (section 3.3) and the reference implementation's
    ``parameter/atom/default.py``; docs/atom.md lists where the two disagree and what we chose.

    Features:
        precision: dtype of the backbone (eager runtime) and of the filter update's matrix
            products: ``float32``, ``bfloat16`` (8 significant bits, float32 accumulation; the
            heads and the optimisation stay float32) or ``auto``: float32 where the backbone runs
            in int8 (``backbone_runtime`` ``auto`` without a box head, or ``onnx-int8``), else
            bfloat16 exactly on CPUs with native bfloat16 instructions, where it is 1.5x
            (backbone) to 3x (update) faster
            (:func:`~ebmtrack.models.backbones.runtime.select_runtime`; docs/atom.md).
        classifier_features: which backbone's features the classifier reads: ``backbone``
            (the backbone's, on ATOM's search region; with the siamese box estimator, two
            backbone passes a frame), ``siamese`` (the siamese estimator's backbone's, on its
            search crop: side 255/127 times its template's, 255 px, stride 16; one pass serving
            the classifier and the box, the head's window centred on the classifier's peak;
            box mode ``siamese`` only; the backbone is then neither built nor run, and
            ``search_area_scale``, ``search_size`` and ``backbone_runtime`` are those of
            ``backbone``, whose backbone an export holds too, so that the runtime can run
            either) or ``auto`` (the default: ``siamese`` with box mode ``siamese``, else
            ``backbone``; :attr:`one_pass`).

    Classifier (eq. 2-3):
        projection_dim, filter_size, pelu_alpha, filter_reg, projection_reg: see
            :class:`~ebmtrack.models.atom_classifier.ClassifierConfig`.
        sigma_factor: label std = sigma_factor * sqrt(target area) in score cells.
        init_gn_iters, init_cg_iters: first-frame Gauss-Newton and CG (per GN) iterations.
        update_cg_iters: CG iterations of each filter update.

    Box estimation (``box_mode``, the box estimator's kind; docs/atom.md):
        box_mode: ``refine`` (ATOM, the default here): the IoU-Net refines the classifier's box
            and its box becomes the state (the next frame's search region and size).
            ``scale``: no IoU-Net; the scale search below sizes the box. ``position``: no
            IoU-Net, no scale search; only the position moves. ``gated``: the scale search
            sizes the box, and the IoU-Net's box replaces it where the mean predicted IoU of
            its ``box_top_k`` best boxes exceeds the predicted IoU of the scale search's box by
            at least ``box_accept_margin``. ``polished``: the scale search tracks; the IoU-Net
            refines the box reported for the frame only, so its errors never carry into the
            next frame. ``siamese``: no IoU-Net, no scale search; a tracking-trained siamese
            box estimator (NanoTrack's networks, v3 or v2, shipped) decodes centre and size,
            its window on the classifier's position (:mod:`ebmtrack.lite.siamese`), and its box
            becomes the state. ``siamese-polished``: ``siamese`` tracks and the IoU-Net's
            ascent refines the box reported for the frame only. ``siamese-scale``: ``siamese``,
            and the scale search bounds the siamese box's change of scale
            (:mod:`ebmtrack.lite.position`).
        box_climb: how the head's output is climbed (``refine``, ``gated`` and ``polished``):
            ``iou``, ATOM's gradient ascent on the predicted IoU, each step
            ``box_step_length`` times the gradient times w, h in crop pixels, a step that lowers
            the IoU rejected and halved; ``ebm``, DiMP-NCE+'s ascent on f(x, y) in
            y = (cx / w0, cy / h0, log w, log h), (w0, h0) the start box's size, Algorithm S1:
            steps of ``ebm_step_length`` (2.5e-3, the reference's), a step kept only where f
            rises, else its length times ``box_step_decay`` (0.5, the paper's): the climb of a
            head trained as an energy-based model (NCE+). Each climb reads its own step length,
            so a variant's IoU step never becomes an EBM step.
        box_steps, box_step_length: the ascent's steps; the IoU climb's step length.
        ebm_step_length, box_step_decay: the EBM climb's step length and decay (refused with
            ``box_climb="iou"``).
        box_top_k: boxes averaged at the end.
        box_accept_margin: the gate of ``gated`` (in the head's units: predicted IoU, or f with
            ``box_climb="ebm"``).

    Scale search (``scale``, ``gated`` and ``polished``; not in the paper):
        scale_factors: besides the search region itself, crop it these many times wider and
            run the classifier on all of them in one batch; the region whose score peak is
            highest gives the position, and the scale interpolated between the peaks
            (:func:`~ebmtrack.tracking.localize.best_scale`) a size change, taken at
            ``size_update_rate`` (the scale search of DSST / SiamFC).
        scale_search_interval: search scale on every this many frames, starting with the
            first tracked one; the frames between run the usual search region alone (one
            backbone pass instead of ``1 + len(scale_factors)``). 1: every frame.

    Siamese box estimator (``siamese``, ``siamese-polished``; NanoTrack's own decoding values,
    :class:`~ebmtrack.lite.siamese.SiameseBoxConfig`):
        siamese_model: which NanoTrack's shipped networks decode the box, ``v3`` (the default:
            its authors' later, larger networks) or ``v2``, each with its own decoding values.
        siamese_window: weight of the Hanning window against the penalised score (0-1).
        siamese_penalty: strength of the penalty on a change of scale and aspect ratio (None:
            the model's own, v2 0.055, v3 0.138).
        siamese_size_rate: how fast the size follows the decoded box, times penalty x score
            (None: the model's own, v2 0.37, v3 0.348).
        siamese_context: context around the target in the template crop, times (w + h).

    Where and how big (the siamese modes; :mod:`ebmtrack.lite.position`):
        classifier_weight: the classifier's score's weight as a log density on the siamese
            head's cells, a product of experts (>= 0; 0: the head alone picks its cell).
        distractor_growth: whether the size may grow in a frame where the classifier saw a
            second, target-like peak.
    """

    precision: str = "auto"
    classifier_features: str = "auto"

    projection_dim: int = 64
    filter_size: int = 4
    pelu_alpha: float = 0.05
    filter_reg: float = 0.1
    projection_reg: float = 1e-4
    sigma_factor: float = 0.25
    init_gn_iters: int = 6
    init_cg_iters: int = 10
    update_cg_iters: int = 5

    box_mode: str = "refine"
    box_climb: str = "iou"
    box_steps: int = 5
    box_step_length: float = 1.0
    ebm_step_length: float = 2.5e-3
    box_step_decay: float = 0.5
    box_top_k: int = 3
    box_accept_margin: float = 0.1
    scale_factors: tuple[float, ...] = (1 / 1.05, 1.05)
    scale_search_interval: int = 1
    # the siamese decoding's defaults are its config's (one source)
    siamese_window: float = SiameseBoxConfig.siamese_window
    siamese_penalty: float | None = SiameseBoxConfig.siamese_penalty
    siamese_size_rate: float | None = SiameseBoxConfig.siamese_size_rate
    siamese_context: float = SiameseBoxConfig.siamese_context
    siamese_model: str = "v3"
    classifier_weight: float = PositionRuleConfig.classifier_weight
    distractor_growth: bool = PositionRuleConfig.distractor_growth

    box_modes: ClassVar[tuple[str, ...]] = BOX_MODES
    head_modes: ClassVar[tuple[str, ...]] = HEAD_MODES
    scale_modes: ClassVar[tuple[str, ...]] = SCALE_MODES
    mode_fields: ClassVar[dict[str, tuple[str, ...]]] = mode_fields(BOX_ESTIMATORS)
    renamed: ClassVar[dict[str, str]] = {
        "use_iou_net": "box_mode ('refine', 'gated' or 'polished' with an IoU-Net, 'scale' or"
        " 'position' without)",
        "iou_box_feedback": "box_mode ('polished' reports the IoU-Net's box only)",
        "iou_accept_margin": "box_mode 'gated' with box_accept_margin",
        "iou_steps": "box_steps",
        "iou_step_length": "box_step_length",
        "iou_top_k": "box_top_k",
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_box_mode()
        self._check_climb()
        if self.siamese_model not in SIAMESE_MODELS:
            raise OptionError(
                f"siamese_model must be one of {', '.join(SIAMESE_MODELS)}, "
                f"got {self.siamese_model!r}",
                "siamese_model",
            )
        factors = self.scale_factors
        if not (
            factors and all(isinstance(f, int | float) and 0 < f < 10 and f != 1 for f in factors)
        ):
            raise OptionError(
                f"scale_factors must be numbers in (0, 10) other than 1, got {factors!r}",
                "scale_factors",
            )
        self._check_classifier_features()
        if self.precision not in PRECISIONS:
            raise OptionError(
                f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}",
                "precision",
            )

    @property
    def one_pass(self) -> bool:
        """Whether the classifier reads the siamese backbone's features: one backbone pass
        (``classifier_features``, :func:`ebmtrack.lite.params.one_pass`)."""
        return one_pass(self.classifier_features, self.box_mode)

    def _check_classifier_features(self) -> None:
        """``classifier_features`` is known, and ``siamese`` comes with box mode ``siamese``
        (the runtime's refusals, :func:`ebmtrack.lite.params.merge_options`)."""
        wrong = classifier_features_error(self.classifier_features, self.box_mode)
        if wrong is not None:
            names = ["classifier_features"]
            if self.classifier_features in CLASSIFIER_FEATURES:
                names.append("box_mode")
            raise OptionError(wrong, *names)
        wrong = backbone_runtime_error(self.one_pass, self.backbone_runtime)
        if wrong is not None:
            raise OptionError(wrong, "backbone_runtime")

    def _check_climb(self) -> None:
        """``box_climb`` is known, and the EBM climb's own fields keep their defaults unless it
        climbs (their ranges: :mod:`ebmtrack.lite.option_checks`)."""
        if self.box_climb not in BOX_CLIMBS:
            raise OptionError(
                f"box_climb must be one of {', '.join(BOX_CLIMBS)}, got {self.box_climb!r}",
                "box_climb",
            )
        defaults = {f.name: f.default for f in fields(self)}
        for name in ("ebm_step_length", "box_step_decay"):
            if self.box_climb != "ebm" and getattr(self, name) != defaults[name]:
                raise OptionError(
                    f"{name} applies to box_climb 'ebm', not {self.box_climb!r}", name, "box_climb"
                )
