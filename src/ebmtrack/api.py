"""The top-level Python API: ``ebmtrack.load_tracker``."""

from __future__ import annotations

from ebmtrack.tracking.base import Tracker

__all__ = ["load_multi_tracker", "load_tracker"]


def load_tracker(name: str = "atom", threads: int | None = None, **options) -> Tracker:
    """A ready tracker by its registered name (:mod:`ebmtrack.tracking.registry`).

    >>> tracker = ebmtrack.load_tracker("atom")            # ImageNet MobileNetV2, CPU
    >>> tracker.initialize(first_frame, (x, y, w, h))
    >>> result = tracker.track(next_frame)                  # result.box, .score, .status

    Frames are **RGB** uint8 (H, W, 3), or grayscale (H, W). OpenCV reads BGR: convert
    (``cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)``), or use the OpenCV-style classes
    (``ebmtrack.TrackerATOM.create()``, :mod:`ebmtrack.tracking.cv_style`), which take BGR.

    Args:
        name: ``atom`` (the default), ``atom-iounet``, ``dimp-nce+`` (ours, docs/architecture.md
            lists what each is) or one of OpenCV's (``csrt``, ``kcf``, ``nanotrack``, ...).
        threads: CPU threads of this process's trackers (torch, ONNX Runtime, OpenCV): default
            one, which holds its speed on a busy machine; ``0``: a thread per core
            (:func:`ebmtrack.process.configure_threads`, process-wide). Not a tracker option.
        **options: the tracker's options, which override its parameter set: for ours the
            fields of its parameter dataclass (``AtomParams``, ``DiMPParams``: ``search_size``,
            ``device``, ...) and its files (``weights``, ``backbone``, ``backbone_weights``;
            ``classifier_weights`` for ``dimp-nce+``); for OpenCV's DNN trackers their model
            files or ``model_dir``. ``ebmtrack track`` and ``ebmtrack eval`` take the same.

    Raises:
        ValueError: unknown tracker, an option it cannot take (:class:`~ebmtrack.values.
            OptionError`, naming the valid ones; checked once, by the registry), or weights
            that do not match.
    """
    from ebmtrack.process import configure_threads
    from ebmtrack.tracking.registry import create_tracker

    configure_threads(threads)
    return create_tracker(name, **options)


def load_multi_tracker(name: str = "atom", threads: int | None = None, **options):
    """A tracker of several targets at once, by its registered name and options (as
    :func:`load_tracker`): a :class:`~ebmtrack.tracking.multi.MultiTargetTracker`.

    >>> multi = ebmtrack.load_multi_tracker("atom")
    >>> multi.initialize(first_frame, [(x1, y1, w1, h1), (x2, y2, w2, h2)])
    >>> results = multi.track(next_frame)                   # one TrackResult per target

    Ours (ATOM, DiMP) share one set of networks and run the backbone once per frame for all
    targets; each target keeps its own classifier and box. OpenCV's trackers run one instance
    per target. Frames are RGB, as for :func:`load_tracker`.
    """
    from ebmtrack.process import configure_threads
    from ebmtrack.tracking.multi import MultiTargetTracker
    from ebmtrack.tracking.registry import create_tracker

    configure_threads(threads)
    return MultiTargetTracker(lambda: create_tracker(name, **options))  # builds one at once
