"""Fixtures of the evaluation tests."""

import pytest
from eval_helpers import drift

from ebmtrack.tracking import registry


@pytest.fixture
def drift_tracker(monkeypatch):
    """Registers ``drift`` (``step`` and ``model_dir`` options) for the test."""
    # The packages' variants registered first: registered into the copy, they would be gone
    # from the registry after the test, which imports them only once.
    registry.tracker_names()
    monkeypatch.setattr(registry, "TRACKERS", dict(registry.TRACKERS))
    registry.register_tracker("drift", registry.TrackerVariant(drift, summary="test tracker"))
    return "drift"
