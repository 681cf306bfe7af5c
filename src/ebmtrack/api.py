"""The top-level Python API: ``ebmtrack.load_tracker``."""

from __future__ import annotations

from ebmtrack.tracking.base import Tracker

__all__ = ["load_tracker"]


def load_tracker(name: str = "atom", threads: int | None = None, **options) -> Tracker:
    """A ready tracker by its registered name (:mod:`ebmtrack.tracking.registry`).

    >>> tracker = ebmtrack.load_tracker("atom")            # ImageNet MobileNetV2, CPU
    >>> tracker.initialize(first_frame, (x, y, w, h))
    >>> result = tracker.track(next_frame)                  # result.box, .score, .status

    Args:
        name: ``atom`` (the default), ``atom-iounet``, ``dimp-nce+`` (ours, docs/architecture.md
            lists what each is) or one of OpenCV's (``csrt``, ``kcf``, ``nanotrack``, ...).
        threads: CPU threads of this process's trackers (torch, ONNX Runtime, OpenCV): default
            one, which holds its speed on a busy machine; ``0``: a thread per core
            (:func:`ebmtrack.runtime.configure_threads`, process-wide). Not a tracker option.
        **options: the tracker's options, which override its parameter set: for ours the
            fields of its parameter dataclass (``AtomParams``, ``DiMPParams``: ``search_size``,
            ``device``, ...) and its files (``weights``, ``backbone``, ``backbone_weights``;
            ``classifier_weights`` for ``dimp-nce+``); for OpenCV's DNN trackers their model
            files or ``model_dir``. ``ebmtrack track`` and ``ebmtrack eval`` take the same.

    Raises:
        ValueError: unknown tracker or option (naming the valid ones), or weights that do not
            match.
    """
    from ebmtrack.runtime import configure_threads
    from ebmtrack.tracking.registry import create_tracker

    configure_threads(threads)
    return create_tracker(name, **options)
