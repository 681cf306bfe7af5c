"""The parameters of ``atom-lt``: ATOM's and the long-term mode's."""

from __future__ import annotations

from dataclasses import dataclass

from ebmtrack.lite.longterm import LongTermParams, siamese_threshold_error
from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.values import OptionError

__all__ = ["AtomLTParams"]


@dataclass(frozen=True)
class AtomLTParams(AtomParams, LongTermParams):
    """Parameters of :class:`~ebmtrack.tracking.atom.longterm.AtomLTTracker`: every field of
    :class:`~ebmtrack.tracking.atom.params.AtomParams` and of
    :class:`~ebmtrack.lite.longterm.LongTermParams` (``lost_after``, ``redetect_threshold``,
    ``redetect_near_threshold``, ``lost_crops``, ``tile_overlap``, ``lost_siamese_threshold``),
    checked with them; ``lost_siamese_threshold`` > 0 needs one backbone pass."""

    def __post_init__(self) -> None:
        super().__post_init__()
        wrong = siamese_threshold_error(self, self.one_pass)
        if wrong is not None:
            raise OptionError(wrong, "lost_siamese_threshold")
