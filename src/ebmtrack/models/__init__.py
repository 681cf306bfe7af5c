"""ebmtrack.models: backbones (``ebmtrack.models.backbones``) and the ATOM heads.

The heads are imported lazily, so that importing the backbones alone stays cheap.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "AtomIoUNet": "iou_net",
    "IoUNetConfig": "iou_net",
    "AtomClassifier": "atom_classifier",
    "ClassifierConfig": "atom_classifier",
    "load_model": "serialization",
    "save_model": "serialization",
    "read_model_config": "serialization",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"ebmtrack.models.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'ebmtrack.models' has no attribute {name!r}")
