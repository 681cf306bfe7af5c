"""ebmtrack.lite: the trackers exported by ``ebmtrack export``, run without PyTorch.

>>> import ebmtrack.lite
>>> tracker = ebmtrack.lite.load("atom-export")      # a folder written by ``ebmtrack export``
>>> tracker.initialize(first_frame, (x, y, w, h))     # frames: RGB uint8 (H, W, 3) or grayscale
>>> result = tracker.track(frame)                     # a TrackResult: box, score, status, ...

It needs NumPy and ONNX Runtime only (docs/lite.md): where OpenCV is installed, the crops take
its resize, warp and blur, elsewhere their NumPy versions (:mod:`ebmtrack.lite.imageops`, within a
grey level of OpenCV's). The package imports no other ebmtrack package (the rest of ebmtrack
imports PyTorch); the torch side imports its NumPy pieces instead (the crops,
:mod:`ebmtrack.lite.crop`, and the result types, :mod:`ebmtrack.lite.result`), so both cut the
same crops and return the same types. Attributes load lazily: importing a piece does not start
ONNX Runtime.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "load": "tracker",
    "LiteTracker": "tracker",
    "OpenCVStyleTracker": "cv_style",
    "TrackResult": "result",
    "TrackStatus": "result",
    "TargetPresence": "result",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"ebmtrack.lite.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'ebmtrack.lite' has no attribute {name!r}")
