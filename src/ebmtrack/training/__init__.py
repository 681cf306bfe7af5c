"""ebmtrack.training."""
