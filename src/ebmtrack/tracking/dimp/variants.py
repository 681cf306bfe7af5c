"""The registered DiMP variant, defined and registered here: its name, its parameter set (fields
of :class:`~ebmtrack.tracking.dimp.params.DiMPParams` and the factory's files), a summary and its
OpenCV-style class; :func:`~ebmtrack.tracking.dimp.factory.create_dimp_tracker` builds it. A
light module: the registry imports it to list the names, without torch.
"""

from __future__ import annotations

from ebmtrack.tracking.registry import OUR_TRACKER, TrackerVariant, register_tracker

__all__ = ["DIMP_NCE_PLUS"]

DIMP_NCE_PLUS = register_tracker(
    "dimp-nce+",
    TrackerVariant(
        "ebmtrack.tracking.dimp.factory:create_dimp_tracker",
        {"calibrator": "dimp-nce+", "box_head_tag": "pack"},
        "ebmtrack.tracking.dimp.params:DiMPParams",
        "DiMP's classifier with the box refined by an EBM head trained with NCE+ (both shipped "
        "for MobileNetV2, trained on the training pack)",
        kind=OUR_TRACKER,
        opencv_class="TrackerDiMPNCEPlus",
    ),
)
