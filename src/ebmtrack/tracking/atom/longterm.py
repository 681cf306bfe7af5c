"""``atom-lt``: ATOM with the long-term mode of :mod:`ebmtrack.tracking.longterm`.

While tracking, every frame is :class:`~ebmtrack.tracking.atom.tracker.AtomTracker`'s own (the
same numbers); :class:`~ebmtrack.tracking.longterm.LongTermMode`, a part of the one frame loop,
decides when the target is lost and runs its frames until it is back.
"""

from __future__ import annotations

from pathlib import Path

from ebmtrack.models.backbones.base import Backbone
from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.tracking.atom.factory import CLASSIFIER_ONLY, build_atom
from ebmtrack.tracking.atom.longterm_params import AtomLTParams
from ebmtrack.tracking.atom.tracker import AtomTracker
from ebmtrack.tracking.longterm import LongTermMode
from ebmtrack.tracking.registry import OUR_TRACKER, TrackerVariant

__all__ = ["ATOM_LT", "LONG_TERM", "AtomLTTracker", "create_atom_lt_tracker"]

# atom's parameters, a stricter not-found test (the lost decision: the classifier's peak below
# 0.35 instead of 0.25, so that fewer frames of an absent target train the classifier), a
# re-acquisition threshold of 0.45 anywhere in the frame and atom's own 0.25 in the search
# region at the last position, chosen on spliced training clips (docs/results/long-term.md).
LONG_TERM = {
    **CLASSIFIER_ONLY,
    "target_not_found_threshold": 0.35,
    "redetect_threshold": 0.45,
    "redetect_near_threshold": 0.25,
}


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
    ) -> None:
        params = params or AtomLTParams()
        super().__init__(backbone, box_head, params, calibrator, LongTermMode(params))

    @property
    def lost(self) -> bool:
        """Whether the target is lost (False before :meth:`initialize`)."""
        state = self.state
        return state is not None and state.mode.lost


def create_atom_lt_tracker(
    weights: str | Path | None = None,
    backbone: str = "mobilenetv2",
    backbone_weights: str | Path | None = None,
    **params,
) -> AtomLTTracker:
    """An :class:`AtomLTTracker` built as :func:`~ebmtrack.tracking.atom.factory.
    create_atom_tracker` builds ATOM; ``params`` are fields of :class:`AtomLTParams`."""
    return build_atom(AtomLTTracker, AtomLTParams, weights, backbone, backbone_weights, params)


ATOM_LT = TrackerVariant(
    create_atom_lt_tracker,
    LONG_TERM,
    AtomLTParams,
    "atom with a long-term mode: reports status 'lost' when the classifier loses the target, "
    "freezes its models, searches the whole frame and re-acquires the target",
    kind=OUR_TRACKER,
)
