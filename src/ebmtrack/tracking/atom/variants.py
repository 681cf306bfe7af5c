"""The registered ATOM variants, each defined and registered here: a name, one parameter set
(fields of :class:`~ebmtrack.tracking.atom.params.AtomParams`, or of
:class:`~ebmtrack.tracking.atom.longterm_params.AtomLTParams` for ``atom-lt``), a summary and
its OpenCV-style class. Their factories build them (:mod:`ebmtrack.tracking.atom.factory`,
:mod:`ebmtrack.tracking.atom.longterm`). A light module: the registry imports it to list the
names, without torch.
"""

from __future__ import annotations

from ebmtrack.tracking.registry import OUR_TRACKER, TrackerVariant, register_tracker

__all__ = [
    "ATOM",
    "ATOM_IOUNET",
    "ATOM_LT",
    "ATOM_POLISHED",
    "CLASSIFIER_ONLY",
    "IOUNET",
    "LONG_TERM",
    "POLISHED",
    "SIAMESE",
]

_FACTORY = "ebmtrack.tracking.atom.factory:create_atom_tracker"
_PARAMS = "ebmtrack.tracking.atom.params:AtomParams"

# Without an IoU-Net the classifier also searches scale: three search regions 5 % apart, the
# scale interpolated between them and damped. Chosen on validation sequences
# (docs/results/tracking.md).
CLASSIFIER_ONLY = {"box_mode": "scale", "size_update_rate": 0.6}

# The scale search tracks as in atom; the IoU-Net refines the box that is reported for each
# frame, and its box never becomes the next frame's state. The ascent's step was chosen on the
# same sequences (benchmarks/head_one_step.py; docs/results/data-scaling.md).
POLISHED = {**CLASSIFIER_ONLY, "box_mode": "polished", "box_step_length": 0.1}

# The default: ATOM's classifier finds the target, a tracking-trained siamese box estimator
# (NanoTrack v3's networks, shipped) decodes its box there; no scale search. One backbone pass a
# frame: the classifier (its projection 32-dimensional) reads the siamese backbone's features of
# the siamese search crop. The siamese box by the rule of docs/results/box-estimator.md, one pass,
# v3 and the projection by that of docs/results/one-pass.md, on the training pack's held-out
# clips and their look-alike versions.
SIAMESE = {"box_mode": "siamese", "projection_dim": 32}  # siamese_model v3: AtomParams' own

# atom's parameters with the long-term mode (docs/results/long-term.md): a stricter not-found
# test (the classifier's peak below 0.35 instead of 0.25, so that fewer frames of an absent target
# train the classifier), re-acquisition at a peak of 0.55 anywhere in the frame and 0.25 in the
# search region at the last position, the siamese head's bound lost_siamese_threshold left at 0
# (unread: it changed nothing there); chosen for the one-pass classifier on spliced training
# clips by the rule committed before the test sequences.
LONG_TERM = {
    **SIAMESE,
    "target_not_found_threshold": 0.35,
    "redetect_threshold": 0.55,
    "redetect_near_threshold": 0.25,
}

ATOM = register_tracker(
    "atom",
    TrackerVariant(
        _FACTORY,
        {**SIAMESE, "calibrator": "atom"},
        _PARAMS,
        "ATOM's online classifier finds the target, a tracking-trained siamese box estimator "
        "(NanoTrack v3's networks) decodes its box there, both from one backbone pass (the "
        "default)",
        kind=OUR_TRACKER,
        opencv_class="TrackerATOM",
    ),
)
# The step of the shipped head (MSE, the sample engine), chosen on the training pack's held-out
# clips and tracks by benchmarks/choose_default_box.py (docs/results/head-training-scale.md).
IOUNET = {"box_mode": "refine", "box_step_length": 0.3}

ATOM_IOUNET = register_tracker(
    "atom-iounet",
    TrackerVariant(
        _FACTORY,
        IOUNET,
        _PARAMS,
        "ATOM as in the paper: the classifier's position, the box refined by an IoU-Net "
        "(default: the one shipped for MobileNetV2)",
        kind=OUR_TRACKER,
        opencv_class="TrackerATOMIoUNet",
    ),
)
# The head of atom-polished: the NCE+ IoU-Net trained on the training pack.
ATOM_POLISHED = register_tracker(
    "atom-polished",
    TrackerVariant(
        _FACTORY,
        POLISHED | {"box_head_tag": "pack"},
        _PARAMS,
        "ATOM's classifier and scale search track; an IoU-Net refines the reported box only, so "
        "its errors never carry to the next frame (default: the pack-trained NCE+ head)",
        kind=OUR_TRACKER,
        opencv_class="TrackerATOMPolished",
    ),
)
ATOM_LT = register_tracker(
    "atom-lt",
    TrackerVariant(
        "ebmtrack.tracking.atom.longterm:create_atom_lt_tracker",
        {**LONG_TERM, "calibrator": "atom"},
        "ebmtrack.tracking.atom.longterm_params:AtomLTParams",
        "atom with a long-term mode: reports status 'lost' when the classifier loses the target, "
        "freezes its models, searches the whole frame and re-acquires the target",
        kind=OUR_TRACKER,
        opencv_class="TrackerATOMLT",
    ),
)
