"""ebmtrack: generic visual object tracking with energy-based regression."""

__version__ = "0.1.0"
