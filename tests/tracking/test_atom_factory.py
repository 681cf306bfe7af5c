import pytest

from ebmtrack.tracking.atom.factory import ATOM, ATOM_IOUNET, CLASSIFIER_ONLY, create_atom_tracker
from ebmtrack.tracking.registry import create_tracker
from ebmtrack.weights import default_model, pack_box_head


def test_atom_is_the_classifier_with_its_scale_search():
    tracker = create_tracker("atom", search_size=96)
    assert tracker.iou_net is None
    for name, value in CLASSIFIER_ONLY.items():
        assert getattr(tracker.params, name) == value
    # The caller's options win over the parameter set's.
    kept = create_tracker("atom", search_size=96, scale_factors=())
    assert kept.params.scale_factors == () and kept.params.size_update_rate == 0.6


def test_atom_iounet_sizes_the_box_with_the_shipped_iou_net():
    tracker = create_tracker("atom-iounet", search_size=96)
    assert tracker.iou_net is not None and tracker.params.use_iou_net
    assert tracker.params.scale_factors == () and tracker.params.size_update_rate == 1.0
    given = create_tracker("atom-iounet", weights=default_model().iou_net, search_size=96)
    assert given.iou_net is not None


def test_atom_gated_is_the_scale_search_with_the_pack_head_behind_a_margin():
    tracker = create_tracker("atom-gated", search_size=96)
    assert tracker.iou_net is not None
    for name, value in CLASSIFIER_ONLY.items():
        if name != "use_iou_net":
            assert getattr(tracker.params, name) == value
    assert tracker.params.iou_accept_margin == 0.1 and tracker.params.iou_step_length == 0.03
    shipped = create_tracker("atom-iounet", weights=pack_box_head(), search_size=96)
    for (name, a), b in zip(
        tracker.iou_net.state_dict().items(), shipped.iou_net.state_dict().values()
    ):
        assert a.equal(b), name
    with pytest.raises(ValueError, match="iou_accept_margin needs use_iou_net=True"):
        create_tracker("atom-gated", scale_factors=(), search_size=96)


def test_atom_polished_reports_the_pack_heads_box_and_keeps_the_scale_search():
    tracker = create_tracker("atom-polished", search_size=96)
    assert tracker.iou_net is not None and tracker.params.iou_box_feedback is False
    for name, value in CLASSIFIER_ONLY.items():
        if name != "use_iou_net":
            assert getattr(tracker.params, name) == value
    assert tracker.params.iou_accept_margin is None and tracker.params.iou_step_length == 0.1
    gated = create_tracker("atom-gated", search_size=96)
    for (name, a), b in zip(
        tracker.iou_net.state_dict().items(), gated.iou_net.state_dict().values()
    ):
        assert a.equal(b), name


def test_weights_without_an_iou_net_are_refused():
    with pytest.raises(ValueError, match="use tracker 'atom-iounet'"):
        create_tracker("atom", weights=default_model().iou_net, search_size=96)
    with pytest.raises(ValueError, match="no box-head weights ship for backbone 'resnet18'"):
        create_tracker("atom-iounet", backbone="resnet18")


def test_variants_share_the_factory_and_differ_in_their_parameter_sets():
    assert ATOM.factory is ATOM_IOUNET.factory is create_atom_tracker
    assert ATOM.params["use_iou_net"] is False and ATOM_IOUNET.params["use_iou_net"] is True


def test_unknown_parameter_is_named():
    with pytest.raises(ValueError, match=r"unknown ATOM parameter\(s\) \['scale_factor'\]"):
        create_atom_tracker(scale_factor=1.05)
    typo = r"tracker 'atom' takes no option.s. scale_factor \(did you mean 'scale_factors'"
    with pytest.raises(ValueError, match=typo):
        create_tracker("atom", scale_factor=1.05)


def test_auto_runs_int8_for_the_classifier_alone_and_float32_under_a_box_head():
    from ebmtrack.models.backbones.int8 import int8_available

    alone = create_tracker("atom", precision="float32", search_size=96)
    gated = create_tracker("atom-gated", precision="float32", search_size=96)
    assert gated.backbone_runtime == "onnx"
    expected = "onnx-int8" if int8_available(alone.backbone) else "onnx"
    assert alone.backbone_runtime == expected
