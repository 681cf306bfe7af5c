"""The top-level Python API: ``ebmtrack.load_tracker``."""

from __future__ import annotations

from ebmtrack.tracking.base import Tracker

__all__ = ["load_multi_tracker", "load_tracker"]


def load_tracker(
    name: str = "atom", threads: int | None = None, runtime: str | None = None, **options
) -> Tracker:
    """A ready tracker by its registered name (:mod:`ebmtrack.tracking.registry`).

    The trackers that ship as exports (``atom``, ``atom-iounet``, ``atom-polished``:
    :mod:`ebmtrack.exports`) run in the torch-free runtime by default (:mod:`ebmtrack.lite`,
    ONNX Runtime and NumPy); ``runtime="torch"`` builds the torch tracker they are exported
    from (``pip install 'ebmtrack[train]'``). The others run as registered
    (:mod:`ebmtrack.tracking.runtime`).

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
        runtime: ``lite`` (the default where the tracker ships an export) or ``torch``.
        **options: the tracker's options, which override its parameter set; the runtime
            takes its export's parameters (``seed``, ``box_mode``, thresholds, ...) and
            ``backbone_runtime`` (files, search size, device, precision: ``runtime="torch"``).
            For the torch trackers the
            fields of its parameter dataclass (``AtomParams``, ``DiMPParams``: ``search_size``,
            ``device``, ...) and its files (``weights``, ``backbone``, ``backbone_weights``;
            ``classifier_weights`` for ``dimp-nce+``); for OpenCV's DNN trackers their model
            files or ``model_dir``. ``ebmtrack track`` and ``ebmtrack eval`` take the same.

    Raises:
        ValueError: unknown tracker or runtime, an option it cannot take (:class:`~ebmtrack.
            values.OptionError`, naming the valid ones), weights that do not match, or a torch
            tracker where PyTorch is not installed (one line naming the extra).
    """
    from ebmtrack.process import configure_threads
    from ebmtrack.tracking.runtime import build_tracker

    threads = configure_threads(threads)
    return build_tracker(name, runtime, threads=threads, **options)


def load_multi_tracker(
    name: str = "atom", threads: int | None = None, runtime: str | None = None, **options
):
    """A tracker of several targets at once, by its registered name and options (as
    :func:`load_tracker`): a :class:`~ebmtrack.tracking.multi.MultiTargetTracker`.

    >>> multi = ebmtrack.load_multi_tracker("atom")
    >>> multi.initialize(first_frame, [(x1, y1, w1, h1), (x2, y2, w2, h2)])
    >>> results = multi.track(next_frame)                   # one TrackResult per target

    The torch trackers (ATOM, DiMP: ``runtime="torch"``) share one set of networks and run the
    backbone once per frame for all targets; each target keeps its own classifier and box. The
    runtime's trackers and OpenCV's run one instance per target. Frames are RGB, as for
    :func:`load_tracker`.
    """
    from ebmtrack.process import configure_threads
    from ebmtrack.tracking.multi import MultiTargetTracker
    from ebmtrack.tracking.runtime import build_tracker

    threads = configure_threads(threads)
    # builds one at once
    return MultiTargetTracker(lambda: build_tracker(name, runtime, threads=threads, **options))
