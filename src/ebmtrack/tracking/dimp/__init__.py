"""The DiMP-NCE+ tracker: DiMP's target classifier + an energy-based box head (BMVC 2020)."""

from __future__ import annotations

import importlib

__all__ = ["DiMPParams", "DiMPTracker"]

# Imported on first use (PEP 562): the registry imports this package's light ``variants``
# module to list the trackers, and that must not import torch.
_LAZY = {
    "DiMPParams": "ebmtrack.tracking.dimp.params",
    "DiMPTracker": "ebmtrack.tracking.dimp.tracker",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
