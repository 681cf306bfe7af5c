"""ebmtrack: generic visual object tracking with energy-based regression."""

__version__ = "0.1.0"

__all__ = ["__version__", "load_tracker"]


def __getattr__(name: str):
    # Lazy, so that ``import ebmtrack`` (and ``ebmtrack --help``) does not import torch.
    if name == "load_tracker":
        from ebmtrack.api import load_tracker

        return load_tracker
    raise AttributeError(f"module 'ebmtrack' has no attribute {name!r}")
