"""ebmtrack.studies."""
