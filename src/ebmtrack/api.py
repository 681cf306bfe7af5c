"""The top-level Python API: ``ebmtrack.load_tracker``."""

from __future__ import annotations

from pathlib import Path

from ebmtrack.tracking.base import Tracker

__all__ = ["load_tracker"]


def load_tracker(
    name: str = "atom",
    weights: str | Path | None = None,
    backbone: str = "mobilenetv2",
    threads: int | None = None,
    **params,
) -> Tracker:
    """A ready tracker by name.

    >>> tracker = ebmtrack.load_tracker("atom")            # ImageNet MobileNetV2, CPU
    >>> tracker.initialize(first_frame, (x, y, w, h))
    >>> result = tracker.track(next_frame)                  # result.box, .score, .status

    Args:
        name: ``atom`` or ``dimp-nce+`` (ours); OpenCV's trackers (``csrt``, ``kcf``, ...) by
            their registry names, with ``params`` as their options.
        weights: the box head's weights file: for ``atom`` the IoU-Net (see
            :func:`ebmtrack.tracking.atom.factory.create_atom_tracker` for what happens
            without), for ``dimp-nce+`` the EBM head (default: the shipped NCE+ head, see
            :func:`ebmtrack.tracking.dimp.factory.create_dimp_tracker`).
        backbone: for ``atom`` and ``dimp-nce+``, the backbone name.
        threads: CPU threads of this process's trackers (torch, ONNX Runtime, OpenCV): default
            one, which holds its speed on a busy machine; ``0``: a thread per core
            (:func:`ebmtrack.models.runtime.configure_threads`, process-wide).
        **params: the tracker's parameters (for ``atom`` fields of ``AtomParams`` such as
            ``search_size``, ``device``, ``use_iou_net``; for ``dimp-nce+`` fields of
            ``DiMPParams`` and ``classifier_weights``).

    Raises:
        ValueError: unknown tracker or parameter, or weights that do not match.
    """
    from ebmtrack.models.runtime import configure_threads

    configure_threads(threads)
    if name == "atom":
        from ebmtrack.tracking.atom.factory import create_atom_tracker

        return create_atom_tracker(weights=weights, backbone=backbone, **params)
    if name == "dimp-nce+":
        from ebmtrack.tracking.dimp.factory import create_dimp_tracker

        return create_dimp_tracker(weights=weights, backbone=backbone, **params)
    from ebmtrack.tracking.registry import create_tracker

    if weights is not None:
        raise ValueError(f"tracker {name!r} takes no weights file")
    return create_tracker(name, **params)
