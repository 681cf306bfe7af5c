import re

import pytest

from ebmtrack.api import load_tracker
from ebmtrack.tracking.atom import AtomParams
from ebmtrack.tracking.atom.box import SiameseBox
from ebmtrack.tracking.atom.factory import create_atom_tracker
from ebmtrack.tracking.atom.variants import ATOM, ATOM_IOUNET, CLASSIFIER_ONLY
from ebmtrack.tracking.registry import create_tracker, tracker_names
from ebmtrack.values import OptionError
from ebmtrack.weights import default_model, pack_box_head


def test_atom_is_the_classifier_with_the_siamese_box_estimator():
    tracker = create_tracker("atom", search_size=96, classifier_features="backbone")
    assert tracker.box_head is None
    assert tracker.params.box_mode == "siamese" and tracker.box_estimator.slots == 1
    assert isinstance(tracker.box_estimator, SiameseBox)
    # by default one backbone pass: the siamese estimator's (tests/tracking/test_atom_one_pass.py)
    assert create_tracker("atom").backbone is None
    # The caller's options win over the parameter set's: the scale search of the earlier default.
    kept = create_tracker("atom", search_size=96, **CLASSIFIER_ONLY)
    assert kept.params.box_mode == "scale" and kept.params.size_update_rate == 0.6
    assert kept.box_estimator.slots == 3


def test_atom_iounet_sizes_the_box_with_the_shipped_iou_net():
    tracker = create_tracker("atom-iounet", search_size=96)
    assert tracker.box_head is not None and tracker.params.box_mode == "refine"
    assert tracker.box_estimator.slots == 1 and tracker.params.size_update_rate == 1.0
    given = create_tracker("atom-iounet", weights=default_model().box_head, search_size=96)
    assert given.box_head is not None


def test_the_gated_box_mode_is_the_scale_search_with_a_head_behind_a_margin():
    # Not a registered variant (it scored below atom): a box mode of atom-polished's parts.
    tracker = create_tracker("atom-polished", box_mode="gated", box_accept_margin=0.1)
    assert tracker.box_head is not None and tracker.params.box_mode == "gated"
    for name, value in CLASSIFIER_ONLY.items():
        if name != "box_mode":
            assert getattr(tracker.params, name) == value
    assert tracker.params.box_accept_margin == 0.1 and tracker.params.box_step_length == 0.1
    assert "atom-gated" not in tracker_names()
    # The NCE+ head in atom-iounet's mode is climbed as an energy (tests/tracking/test_head_climb).
    shipped = create_tracker(
        "atom-iounet", weights=pack_box_head(), box_climb="ebm", search_size=96
    )
    for (name, a), b in zip(
        tracker.box_head.state_dict().items(), shipped.box_head.state_dict().values()
    ):
        assert a.equal(b), name
    # The variant's own fields are refused under a box mode that would not read them.
    with pytest.raises(ValueError, match="box_step_length applies to box_mode refine or gated"):
        create_tracker("atom-polished", box_mode="position", search_size=96)
    with pytest.raises(ValueError, match="box_accept_margin applies to box_mode gated, not"):
        create_tracker("atom-polished", box_accept_margin=0.2)


def test_atom_polished_reports_the_pack_heads_box_and_keeps_the_scale_search():
    tracker = create_tracker("atom-polished", search_size=96)
    assert tracker.box_head is not None and tracker.params.box_mode == "polished"
    for name, value in CLASSIFIER_ONLY.items():
        if name != "box_mode":
            assert getattr(tracker.params, name) == value
    assert tracker.params.box_step_length == 0.1
    # The NCE+ head in atom-iounet's mode is climbed as an energy (tests/tracking/test_head_climb).
    shipped = create_tracker(
        "atom-iounet", weights=pack_box_head(), box_climb="ebm", search_size=96
    )
    for (name, a), b in zip(
        tracker.box_head.state_dict().items(), shipped.box_head.state_dict().values()
    ):
        assert a.equal(b), name


def test_weights_without_an_iou_net_are_refused():
    for mode in ("scale", "position"):  # the box modes without an IoU-Net
        said = f"tracker 'atom' with box_mode={mode!r} reads no box-head weights"
        with pytest.raises(OptionError, match=said) as error:
            create_tracker("atom", box_mode=mode, weights=default_model().box_head, search_size=96)
        assert error.value.options == ("weights", "box_mode")
    with pytest.raises(ValueError, match="no box-head weights ship for backbone 'resnet18'"):
        create_tracker("atom-iounet", backbone="resnet18")


def test_variants_share_the_factory_and_differ_in_their_parameter_sets():
    assert ATOM.build_function is ATOM_IOUNET.build_function is create_atom_tracker
    assert ATOM.params["box_mode"] == "siamese" and ATOM_IOUNET.params["box_mode"] == "refine"


@pytest.mark.parametrize(
    "old, new",
    [
        ("use_iou_net", "box_mode ('refine', 'gated' or 'polished' with an IoU-Net"),
        ("iou_box_feedback", "box_mode ('polished'"),
        ("iou_accept_margin", "box_mode 'gated' with box_accept_margin"),
        ("iou_steps", "box_steps"),
        ("iou_step_length", "box_step_length"),
        ("iou_top_k", "box_top_k"),
    ],
)
def test_an_old_parameter_name_says_what_replaced_it(old, new):
    hint = AtomParams.renamed[old]
    assert hint.startswith(new)
    said = f"{old!r} was renamed {hint!r}" if hint.isidentifier() else f"{old!r} was renamed: use "
    for name in ("atom", "atom-iounet", "atom-polished", "atom-lt"):
        with pytest.raises(ValueError, match=re.escape(f"tracker {name!r}: option {said}")):
            create_tracker(name, **{old: 1})
    with pytest.raises(OptionError, match=re.escape(f"option {said}")) as error:
        load_tracker("atom", runtime="torch", **{old: 1})
    assert error.value.options == (old,)


def test_unknown_parameter_is_named():
    typo = r"tracker 'atom' takes no option.s. scale_factor \(did you mean 'scale_factors'"
    with pytest.raises(OptionError, match=typo) as error:
        create_tracker("atom", scale_factor=1.05)
    assert error.value.options == ("scale_factor",)


def test_auto_runs_int8_for_the_classifier_alone_or_a_head_trained_on_int8_features(tmp_path):
    from safetensors.torch import load_file, safe_open, save_file

    from ebmtrack.models.backbones.runtime import int8_available
    from ebmtrack.models.serialization import trained_features

    alone = create_tracker(
        "atom", precision="float32", search_size=96, classifier_features="backbone"
    )
    expected = "onnx-int8" if int8_available(alone.backbone) else "onnx"
    assert alone.backbone_runtime == expected
    # The pack head was trained on the data workers' int8 features: auto keeps them.
    assert trained_features(pack_box_head()) == "onnx-int8"
    streamed = create_tracker("atom-polished", precision="float32", search_size=96)
    assert streamed.backbone_runtime == expected
    # The same head, its header saying it was trained on eager float32 features.
    with safe_open(str(pack_box_head()), "pt") as handle:
        metadata = handle.metadata()
    metadata["trained_on"] = "cpu: backbone eager float32, head float32"
    float32_head = tmp_path / "head.safetensors"
    save_file(load_file(str(pack_box_head())), str(float32_head), metadata=metadata)
    assert trained_features(float32_head) == "float32"
    cached = create_tracker(
        "atom-polished", weights=float32_head, precision="float32", search_size=96
    )
    assert cached.backbone_runtime == "onnx"  # its head read float32 features
