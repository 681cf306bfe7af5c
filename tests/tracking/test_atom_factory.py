import pytest

from ebmtrack.tracking.atom.factory import CLASSIFIER_ONLY_DEFAULTS, create_atom_tracker
from ebmtrack.weights import default_model


def test_without_iou_net_the_classifier_searches_scale():
    tracker = create_atom_tracker(search_size=96)
    assert tracker.iou_net is None
    for name, value in CLASSIFIER_ONLY_DEFAULTS.items():
        assert getattr(tracker.params, name) == value
    # The caller's parameters win over those defaults.
    kept = create_atom_tracker(search_size=96, scale_factors=())
    assert kept.params.scale_factors == () and kept.params.size_update_rate == 0.6


def test_with_iou_net_weights_the_iou_net_sizes_the_box():
    weights = default_model().iou_net
    tracker = create_atom_tracker(weights=weights, search_size=96)
    assert tracker.iou_net is not None
    assert tracker.params.scale_factors == () and tracker.params.size_update_rate == 1.0
    switched_off = create_atom_tracker(weights=weights, search_size=96, use_iou_net=False)
    assert switched_off.iou_net is None
    assert switched_off.params.scale_factors == CLASSIFIER_ONLY_DEFAULTS["scale_factors"]


def test_unknown_parameter_is_named():
    with pytest.raises(ValueError, match=r"unknown ATOM parameter\(s\) \['scale_factor'\]"):
        create_atom_tracker(scale_factor=1.05)
