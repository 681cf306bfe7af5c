"""``atom-lt``: ATOM with the long-term mode of :mod:`ebmtrack.tracking.longterm`.

While tracking, every frame is :class:`~ebmtrack.tracking.atom.tracker.AtomTracker`'s own (the
same numbers); :class:`~ebmtrack.tracking.longterm.LongTermMode`, a part of the one frame loop,
decides when the target is lost and runs its frames until it is back.
"""

from __future__ import annotations

from pathlib import Path

from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.tracking.atom.factory import build_atom
from ebmtrack.tracking.atom.longterm_params import AtomLTParams
from ebmtrack.tracking.atom.tracker import AtomTracker
from ebmtrack.tracking.longterm import LongTermMode

__all__ = ["AtomLTTracker", "create_atom_lt_tracker"]


class AtomLTTracker(AtomTracker):
    """ATOM with :class:`~ebmtrack.tracking.longterm.LongTermMode`: reports ``status="lost"``
    when its classifier loses the target, then searches the whole frame for it at a bounded
    cost and re-acquires it. ``lost`` (bool) says whether the (one) target is lost."""

    name = "atom-lt"

    def __init__(
        self,
        backbone: Backbone,
        box_head: AtomIoUNet | None = None,
        params: AtomLTParams | None = None,
        calibrator=None,
        head_features: str = "float32",
    ) -> None:
        params = params or AtomLTParams()
        super().__init__(
            backbone, box_head, params, calibrator, LongTermMode(params), head_features
        )

    @property
    def lost(self) -> bool:
        """Whether the target is lost (False before :meth:`initialize`)."""
        state = self.state
        return state is not None and state.mode.lost


def create_atom_lt_tracker(
    weights: str | Path | None = None,
    backbone: str = "mobilenetv2",
    backbone_weights: str | Path | None = None,
    calibrator: str | Path | None = None,
    **params,
) -> AtomLTTracker:
    """An :class:`AtomLTTracker` built as :func:`~ebmtrack.tracking.atom.factory.
    create_atom_tracker` builds ATOM (``calibrator`` as there); ``params`` are fields of
    :class:`AtomLTParams`."""
    return build_atom(
        AtomLTTracker, AtomLTParams, weights, backbone, backbone_weights, params, calibrator
    )
