"""ebmtrack: generic visual object tracking with energy-based regression."""

__version__ = "0.1.0"

# OpenCV-style trackers (ebmtrack.TrackerATOM.create(), init, update): tracking/cv_style.py.
OPENCV_STYLE = (
    "TrackerATOM",
    "TrackerATOMIoUNet",
    "TrackerATOMPolished",
    "TrackerATOMLT",
    "TrackerDiMPNCEPlus",
)

__all__ = ["__version__", "load_multi_tracker", "load_tracker", *OPENCV_STYLE]


def __getattr__(name: str):
    # Lazy, so that ``import ebmtrack`` (and ``ebmtrack --help``) does not import torch.
    if name in ("load_tracker", "load_multi_tracker"):
        from ebmtrack import api

        return getattr(api, name)
    if name in OPENCV_STYLE:
        from ebmtrack.tracking.cv_style import OPENCV_STYLE as classes

        return classes[name]
    raise AttributeError(f"module 'ebmtrack' has no attribute {name!r}")
