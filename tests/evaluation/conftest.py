"""Fixtures of the evaluation tests."""

import pytest
from eval_helpers import drift

from ebmtrack.tracking import registry


@pytest.fixture
def drift_tracker(monkeypatch):
    """Registers ``drift`` (``step`` and ``model_dir`` options) for the test."""
    monkeypatch.setattr(registry, "TRACKERS", dict(registry.TRACKERS))
    registry.register_tracker("drift", registry.TrackerVariant(drift, summary="test tracker"))
    return "drift"
