"""ebmtrack.optim."""
