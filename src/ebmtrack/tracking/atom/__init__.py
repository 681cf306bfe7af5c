"""The ATOM tracker: online classifier + IoU-Net, behind the common tracker interface."""

from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.tracking.atom.tracker import AtomTracker

__all__ = ["AtomParams", "AtomTracker"]
