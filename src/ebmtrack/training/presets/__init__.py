"""Data and settings of the named training presets that need more than a config (see
:mod:`ebmtrack.training.experiment` for the presets themselves)."""
