"""ebmtrack.ops."""
