"""Trackers behind one interface: ours and OpenCV's peers."""

from ebmtrack.tracking.base import Tracker, TrackResult, TrackStatus, validate_box

__all__ = ["Tracker", "TrackResult", "TrackStatus", "validate_box"]
