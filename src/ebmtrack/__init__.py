"""ebmtrack: generic visual object tracking with energy-based regression."""

__version__ = "0.1.0"

__all__ = ["__version__", "load_multi_tracker", "load_tracker"]


def __getattr__(name: str):
    # Lazy, so that ``import ebmtrack`` (and ``ebmtrack --help``) does not import torch.
    if name in ("load_tracker", "load_multi_tracker"):
        from ebmtrack import api

        return getattr(api, name)
    if name.startswith("Tracker"):
        # OpenCV-style trackers (ebmtrack.TrackerATOM.create(), init, update), one per variant
        # that names its class where it is registered: tracking/cv_style.py.
        from ebmtrack.tracking.cv_style import opencv_style_classes

        classes = opencv_style_classes()
        if name in classes:
            return classes[name]
    raise AttributeError(f"module 'ebmtrack' has no attribute {name!r}")


def __dir__() -> list[str]:
    from ebmtrack.tracking.cv_style import opencv_style_classes

    return sorted([*globals(), "load_multi_tracker", "load_tracker", *opencv_style_classes()])
