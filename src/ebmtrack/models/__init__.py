"""ebmtrack.models."""
