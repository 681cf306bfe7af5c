"""ebmtrack.ebm."""
