"""The one rule for the box a tracker starts from, applied by every tracker, ours and OpenCV's.

A box that overlaps the first frame but crosses its edge (a legal start: the target enters the
view) is clipped to the frame, with one warning. A box that does not overlap the frame, or that
is not four finite numbers with positive width and height, is refused with a ValueError.

The rule is NumPy only and lives in :mod:`ebmtrack.lite.frames`, so that the torch-free runtime
applies the same one; this module is its name beside the trackers.
"""

from ebmtrack.lite.frames import clip_init_box

__all__ = ["clip_init_box"]
