"""ebmtrack: generic visual object tracking with energy-based regression."""

__version__ = "0.1.0"

__all__ = ["__version__", "load_multi_tracker", "load_tracker"]


def __getattr__(name: str):
    # Lazy, so that ``import ebmtrack`` (and ``ebmtrack --help``) does not import torch.
    if name in ("load_tracker", "load_multi_tracker"):
        from ebmtrack import api

        return getattr(api, name)
    raise AttributeError(f"module 'ebmtrack' has no attribute {name!r}")
