"""The parameters of ``atom-lt``: ATOM's and the long-term mode's."""

from __future__ import annotations

from dataclasses import dataclass

from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.tracking.longterm import LongTermParams

__all__ = ["AtomLTParams"]


@dataclass(frozen=True)
class AtomLTParams(AtomParams, LongTermParams):
    """Parameters of :class:`~ebmtrack.tracking.atom.longterm.AtomLTTracker`: every field of
    :class:`~ebmtrack.tracking.atom.params.AtomParams` and of
    :class:`~ebmtrack.tracking.longterm.LongTermParams` (``lost_after``,
    ``redetect_threshold``, ``lost_crops``, ``tile_overlap``), checked with them."""
