"""The ATOM tracker: online classifier + IoU-Net, behind the common tracker interface."""

from __future__ import annotations

import importlib

__all__ = ["AtomParams", "AtomTracker"]

# Imported on first use (PEP 562): the registry imports this package's light ``variants``
# module to list the trackers, and that must not import torch.
_LAZY = {
    "AtomParams": "ebmtrack.tracking.atom.params",
    "AtomTracker": "ebmtrack.tracking.atom.tracker",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
