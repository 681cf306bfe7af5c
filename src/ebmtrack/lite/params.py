"""The parameters of an export as the torch-free tracker reads them: the box modes (rows of
:data:`BOX_MODES`: whether the classifier's scale search sizes the box, whether the box head runs,
whether its box becomes the state or is only reported, whether a gate on its predicted gain
decides; a new mode made of these is one row), the parameters an export must hold, and the
options a caller may change (:func:`merge_options`)."""

from __future__ import annotations

from dataclasses import dataclass

from ebmtrack.lite.augment import num_augmented_crops
from ebmtrack.lite.files import Export
from ebmtrack.lite.option_checks import TRAIN_EXTRA, check_kind, check_ranges, kind_of
from ebmtrack.lite.siamese import SIAMESE_MODELS

__all__ = [
    "BOX_MODES",
    "CLASSIFIER_FEATURES",
    "FIXED",
    "POSITION_RULE",
    "REQUIRED",
    "SIAMESE",
    "SIAMESE_MODES",
    "BoxMode",
    "backbone_runtime_error",
    "classifier_features_error",
    "merge_options",
    "one_pass",
]


@dataclass(frozen=True)
class BoxMode:
    """What one ``box_mode`` does.

    Attributes:
        scale_search: the classifier's scale search (regions cropped ``scale_factors`` wider)
            sizes the box.
        head: the box head refines the box from the classifier's position.
        head_state: the head's box becomes the state (without a scale search and with a damped
            size, ``size_update_rate`` < 1, the head's own box is reported); else it is only
            reported for the frame.
        gate: the head's box is taken only where the head predicts a gain of at least
            ``box_accept_margin`` over the start box.
        siamese: the siamese box estimator (:mod:`ebmtrack.lite.siamese`) decodes centre and
            size around the classifier's position, and its box becomes the state (a head then
            refines the reported box only; a scale search bounds its change of scale,
            :mod:`ebmtrack.lite.position`).
    """

    scale_search: bool
    head: bool = False
    head_state: bool = False
    gate: bool = False
    siamese: bool = False


BOX_MODES: dict[str, BoxMode] = {
    "position": BoxMode(scale_search=False),
    "scale": BoxMode(scale_search=True),
    "refine": BoxMode(scale_search=False, head=True, head_state=True),
    "gated": BoxMode(scale_search=True, head=True, head_state=True, gate=True),
    "polished": BoxMode(scale_search=True, head=True),
    "siamese": BoxMode(scale_search=False, siamese=True),
    "siamese-polished": BoxMode(scale_search=False, head=True, siamese=True),
    "siamese-scale": BoxMode(scale_search=True, siamese=True),
}

SIAMESE_MODES = tuple(name for name, mode in BOX_MODES.items() if mode.siamese)
"""The box modes of the siamese box estimator."""

SIAMESE = (
    "siamese_window",
    "siamese_penalty",
    "siamese_size_rate",
    "siamese_context",
    "siamese_model",
)
"""The siamese decoding's parameters (:class:`~ebmtrack.lite.siamese.SiameseBoxConfig`), read
by the siamese modes only; ``siamese_model`` picks the networks among the export's (its
manifest's ``siamese.models``)."""

CLASSIFIER_FEATURES = ("auto", "backbone", "siamese")
"""Where the classifier's features come from (``classifier_features``): ``backbone``, the
export's own backbone on ATOM's search region (two backbone passes a frame with the siamese box
estimator); ``siamese``, the siamese estimator's backbone on its search crop, one pass serving
the classifier and the box (box mode ``siamese`` only); ``auto``: ``siamese`` with box mode
``siamese``, else ``backbone`` (:func:`one_pass`)."""

POSITION_RULE = ("classifier_weight", "distractor_growth")
"""How the classifier's evidence bounds the siamese box (:class:`~ebmtrack.lite.position.
PositionRuleConfig`), read by the siamese modes; an export without them runs the head alone."""

# The parameters the runtime reads (the torch tracker's AtomParams fields); an export that
# lacks one is refused.
REQUIRED = (
    "search_area_scale",
    "search_size",
    "score_upsample",
    "train_skipping",
    "memory_size",
    "learning_rate",
    "hard_negative_learning_rate",
    "init_samples_minimum_weight",
    "aug_relative_shift",
    "aug_random_shift_factor",
    "aug_blur_sigmas",
    "aug_rotations",
    "aug_flip",
    "aug_dropout",
    "target_not_found_threshold",
    "distractor_threshold",
    "hard_negative_threshold",
    "target_neighborhood_scale",
    "displacement_scale",
    "update_scale_when_uncertain",
    "size_update_rate",
    "num_random_proposals",
    "proposal_center_jitter",
    "proposal_size_jitter",
    "max_aspect_ratio",
    "min_target_size",
    "seed",
    "projection_dim",
    "filter_size",
    "pelu_alpha",
    "filter_reg",
    "projection_reg",
    "sigma_factor",
    "init_gn_iters",
    "init_cg_iters",
    "update_cg_iters",
    "box_mode",
    "box_steps",
    "box_step_length",
    "box_top_k",
    "box_accept_margin",
    "scale_factors",
    "scale_search_interval",
)
# Fixed by the exported graphs: an override is refused.
FIXED = ("search_size", "backbone", "device", "precision")


def one_pass(features: str | None, box_mode: str) -> bool:
    """Whether ``classifier_features`` ``features`` with ``box_mode`` runs one backbone pass
    (:data:`CLASSIFIER_FEATURES`; None: an export from before the option, two passes)."""
    return features == "siamese" or (features == "auto" and box_mode == "siamese")


def backbone_runtime_error(one_pass: bool, backbone_runtime: str) -> str | None:
    """Why ``backbone_runtime`` cannot be chosen (one line), None where it can: one backbone
    pass runs no backbone of the export's, so only ``auto`` applies."""
    if not one_pass or backbone_runtime == "auto":
        return None
    return (
        f"backbone_runtime {backbone_runtime!r}: one backbone pass (box_mode 'siamese', "
        "classifier_features auto or siamese) runs no backbone of ours; add "
        "classifier_features=backbone for two passes"
    )


def classifier_features_error(features: str | None, box_mode: str) -> str | None:
    """Why ``classifier_features`` cannot be ``features`` with ``box_mode`` (one line, for the
    runtime's and the torch tracker's refusals), None where it can (None: an export from before
    the option, two passes)."""
    if features is None:
        return None
    if features not in CLASSIFIER_FEATURES:
        return (
            f"classifier_features must be one of {', '.join(CLASSIFIER_FEATURES)}, got {features!r}"
        )
    if features == "siamese" and box_mode != "siamese":
        return (
            f"box_mode {box_mode!r} needs the classifier on the tracker's own backbone: add "
            "classifier_features=backbone or auto (one backbone pass, classifier_features="
            "siamese, runs with box_mode 'siamese' only)"
        )
    return None


def merge_options(export: Export, options: dict) -> dict:
    """The export's parameters with ``options`` applied (ValueError naming a bad one): each
    option of its default's kind, every number in its range (:mod:`ebmtrack.lite.option_checks`,
    the torch trackers' one check too)."""
    params = dict(export.params)
    missing = [name for name in REQUIRED if name not in params]
    if missing:
        raise ValueError(f"{export.folder}: params.json lacks {', '.join(missing)}")
    for name, value in options.items():
        if name in FIXED:
            raise ValueError(
                f"{name} is fixed by the exported graphs ({params.get(name)!r}): export again "
                f"with --option {name}=... (ebmtrack export, which needs PyTorch: {TRAIN_EXTRA})"
            )
        if name not in params:
            valid = ", ".join(sorted(set(params) - set(FIXED)))
            raise ValueError(f"unknown option {name!r}; valid: {valid}")
        old = params[name]
        value = tuple(value) if isinstance(value, list) else value
        check_kind(name, value, kind_of(old))
        params[name] = value
    if params["box_mode"] not in BOX_MODES:
        raise ValueError(
            f"box_mode must be one of {', '.join(BOX_MODES)}, got {params['box_mode']!r}"
        )
    if BOX_MODES[params["box_mode"]].head and export.manifest.get("head") is None:
        heads = ", ".join(name for name, mode in BOX_MODES.items() if not mode.head)
        raise ValueError(
            f"box_mode {params['box_mode']!r} needs a box head, and this export has none "
            f"(its modes: {heads}): export a tracker with one (atom-polished, atom-iounet)"
        )
    siamese = export.manifest.get("siamese")
    if BOX_MODES[params["box_mode"]].siamese:
        if siamese is None:
            raise ValueError(
                f"box_mode {params['box_mode']!r} needs the siamese box estimator, and this "
                "export has none: export a tracker with a siamese box_mode (atom)"
            )
        model = params.get("siamese_model")
        if model is not None and model not in SIAMESE_MODELS:
            raise ValueError(
                f"siamese_model must be one of {', '.join(SIAMESE_MODELS)}, got {model!r}"
            )
        if any(name not in params for name in SIAMESE) or "models" not in siamese:
            raise ValueError(
                f"{export.folder}: its siamese box estimator predates siamese_model (its "
                "manifest names no networks per model): export it again (ebmtrack export)"
            )
        if model not in siamese["models"]:
            raise ValueError(
                f"siamese_model {model!r}: this export holds the networks of "
                f"{', '.join(siamese['models'])} only: export it again (ebmtrack export)"
            )
    wrong = classifier_features_error(params.get("classifier_features"), params["box_mode"])
    if wrong is not None:
        raise ValueError(wrong)
    if params.get("box_climb", "iou") != "iou":
        raise ValueError(
            f"box_climb {params['box_climb']!r}: the lite runtime climbs the box head with ATOM's"
            " IoU ascent only ('iou')"
        )
    check_ranges(params)
    if params["memory_size"] <= num_augmented_crops(params) + params["aug_dropout"][0]:
        raise ValueError(
            f"memory_size must exceed the first-frame samples, got {params['memory_size']}"
        )
    return params
