"""The DiMP-NCE+ tracker: DiMP's target classifier + an energy-based box head (BMVC 2020)."""

from ebmtrack.tracking.dimp.params import DiMPParams
from ebmtrack.tracking.dimp.tracker import DiMPTracker

__all__ = ["DiMPParams", "DiMPTracker"]
