"""The top-level Python API: ``ebmtrack.load_tracker``."""

from __future__ import annotations

from pathlib import Path

from ebmtrack.tracking.base import Tracker

__all__ = ["load_tracker"]


def load_tracker(
    name: str = "atom",
    weights: str | Path | None = None,
    backbone: str = "mobilenetv2",
    **params,
) -> Tracker:
    """A ready tracker by name.

    >>> tracker = ebmtrack.load_tracker("atom")            # ImageNet MobileNetV2, CPU
    >>> tracker.initialize(first_frame, (x, y, w, h))
    >>> result = tracker.track(next_frame)                  # result.box, .score, .status

    Args:
        name: ``atom`` (ours); OpenCV's trackers (``csrt``, ``kcf``, ...) by their registry
            names, with ``params`` as their options.
        weights: for ``atom``, the IoU-Net weights file; see
            :func:`ebmtrack.tracking.atom.factory.create_atom_tracker` for what happens without.
        backbone: for ``atom``, the backbone name.
        **params: the tracker's parameters (for ``atom``, fields of ``AtomParams`` such as
            ``search_size``, ``device``, ``use_iou_net``).

    Raises:
        ValueError: unknown tracker or parameter, or weights that do not match.
    """
    if name == "atom":
        from ebmtrack.tracking.atom.factory import create_atom_tracker

        return create_atom_tracker(weights=weights, backbone=backbone, **params)
    from ebmtrack.tracking.registry import create_tracker

    if weights is not None:
        raise ValueError(f"tracker {name!r} takes no weights file")
    return create_tracker(name, **params)
