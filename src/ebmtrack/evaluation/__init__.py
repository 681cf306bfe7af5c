"""ebmtrack.evaluation."""
