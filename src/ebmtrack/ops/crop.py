"""Square image crops around a target: the search regions of tracking and training.

The code lives in :mod:`ebmtrack.lite.crop` (NumPy, and OpenCV where installed), so that the
torch-free runtime cuts exactly the crops the trackers cut; this module is its name beside the
other ops.
"""

# Every public name of ebmtrack.lite.crop, __all__ included.
from ebmtrack.lite.crop import *  # noqa: F403
from ebmtrack.lite.crop import __all__  # noqa: F401
