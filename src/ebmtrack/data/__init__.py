"""ebmtrack.data."""
