"""ATOM with one backbone pass (``classifier_features="siamese"``): the options are checked as
the runtime checks them, the classifier reads the siamese estimator's search features on its
own crop, one crop a frame, and no backbone of ours is built or run."""

import numpy as np
import pytest
import torch

import ebmtrack
from ebmtrack.lite.siamese import INSTANCE_SIZE, SiameseBoxEstimator, template_side
from ebmtrack.models.backbones import create_backbone
from ebmtrack.tracking.atom import AtomParams, AtomTracker
from ebmtrack.tracking.atom import factory as atom_factory
from ebmtrack.tracking.augment import num_augmented_crops
from ebmtrack.tracking.option_docs import option_docs
from ebmtrack.tracking.search_region import SIAMESE_LAYER, SiameseSearchRegion
from ebmtrack.values import OptionError

ONE_PASS = {"box_mode": "siamese", "classifier_features": "siamese"}


def moving_block(count: int = 6):
    """A bright textured block moving right 3 px a frame over noise; its first box."""
    rng = np.random.default_rng(0)
    background = rng.integers(0, 120, (160, 200, 3), dtype=np.uint8)
    block = rng.integers(150, 256, (30, 40, 3), dtype=np.uint8)
    frames = []
    for t in range(count):
        frame = background.copy()
        frame[60:90, 50 + 3 * t : 90 + 3 * t] = block
        frames.append(frame)
    return frames, np.array([50.0, 60.0, 40.0, 30.0])


BOTH = ("classifier_features", "box_mode")


@pytest.mark.parametrize(
    ("options", "names", "said"),
    [
        (
            {"classifier_features": "cnn"},
            ("classifier_features",),
            "one of auto, backbone, siamese",
        ),
        ({"classifier_features": "siamese"}, BOTH, "box_mode 'refine' needs the classifier on"),
        ({"classifier_features": "siamese", "box_mode": "siamese-scale"}, BOTH, "'siamese-scale'"),
    ],
)
def test_a_bad_classifier_features_is_refused_in_one_line_naming_it(options, names, said):
    with pytest.raises(OptionError, match=said) as caught:
        AtomParams(**options)
    assert caught.value.options == names and "\n" not in str(caught.value)


def test_auto_is_one_pass_exactly_with_the_siamese_box_and_the_option_is_documented():
    assert AtomParams().classifier_features == "auto"
    assert AtomParams(box_mode="siamese").one_pass
    assert not AtomParams(box_mode="siamese", classifier_features="backbone").one_pass
    assert not any(AtomParams(box_mode=mode).one_pass for mode in ("refine", "scale", "polished"))
    (doc,) = [d for d in option_docs("atom") if d.name == "classifier_features"]
    assert doc.default == "auto" and doc.allowed == "one of auto, backbone, siamese" and doc.text


def test_one_pass_builds_no_backbone_of_ours(monkeypatch):
    built = []
    monkeypatch.setattr(
        atom_factory, "create_backbone", lambda *a, **k: built.append(a) or create_backbone(*a, **k)
    )
    tracker = ebmtrack.load_tracker("atom", runtime="torch", classifier_features="siamese")
    assert built == [] and tracker.backbone is None
    assert isinstance(tracker.search, SiameseSearchRegion)
    assert tracker.classifier.layer == SIAMESE_LAYER
    assert tracker.classifier.config.in_channels == tracker.search.siamese.channels


@pytest.fixture
def counted(monkeypatch):
    """Calls of the siamese estimator's backbone on search crops, and of its own crop-and-decode
    (``locate``, the two-pass path)."""
    calls = {"features": [], "locate": 0}
    features, locate = SiameseBoxEstimator.features, SiameseBoxEstimator.locate

    def count_features(self, images):
        calls["features"].append(images.shape)
        return features(self, images)

    def count_locate(self, *args, **kwargs):
        calls["locate"] += 1
        return locate(self, *args, **kwargs)

    monkeypatch.setattr(SiameseBoxEstimator, "features", count_features)
    monkeypatch.setattr(SiameseBoxEstimator, "locate", count_locate)
    return calls


def test_one_pass_runs_the_siamese_backbone_once_a_frame_and_never_the_backbone(counted):
    torch.manual_seed(0)
    backbone = create_backbone("mobilenetv2", pretrained=False)
    runs = []
    backbone.register_forward_hook(lambda *_: runs.append(1))
    params = AtomParams(**ONE_PASS)
    tracker = AtomTracker(backbone, None, params)
    frames, box = moving_block()
    tracker.initialize(frames[0], box)
    first = len(counted["features"])
    assert first == num_augmented_crops(params)  # the augmented crops, one a call
    results = [tracker.track(frame) for frame in frames[1:]]
    assert len(counted["features"]) - first == len(results)  # one crop a frame
    assert set(counted["features"]) == {(1, 3, INSTANCE_SIZE, INSTANCE_SIZE)}
    assert counted["locate"] == 0 and runs == []  # no second crop, no backbone of ours
    assert abs(results[-1].box[0] - (50 + 3 * len(results))) < 4  # and it follows the block


def test_the_region_is_the_siamese_search_crop_and_the_labels_keep_the_first_width():
    tracker = AtomTracker(None, None, AtomParams(**ONE_PASS))
    frames, box = moving_block(3)
    tracker.initialize(frames[0], box)
    size = box[2:]
    side = template_side(size, tracker.params.siamese_context) * INSTANCE_SIZE / 127
    assert tracker.search.side(size) == pytest.approx(side)
    (region,) = tracker.search.crop(frames[1], size + 10, size, (1.0,))
    assert region.patch.shape == (INSTANCE_SIZE, INSTANCE_SIZE, 3)
    assert region.scale == pytest.approx(INSTANCE_SIZE / side)
    sigma = tracker.params.sigma_factor * np.sqrt(40 * 30) * INSTANCE_SIZE / side
    assert tracker.state.model.label_sigma == pytest.approx(sigma)
    labels = tracker.state.memory.labels
    assert labels.shape[1:] == (16, 16)  # 255 px at stride 16
    tracker.track(frames[1])
    tracker.track(frames[2])
    assert tracker.state.model.label_sigma == pytest.approx(sigma)


def test_one_pass_refuses_a_backbone_runtime_it_would_not_run():
    with pytest.raises(OptionError, match="backbone_runtime 'onnx'.*runs no backbone of ours"):
        AtomParams(backbone_runtime="onnx", box_mode="siamese")
    assert not AtomParams(
        backbone_runtime="onnx", box_mode="siamese", classifier_features="backbone"
    ).one_pass
    with pytest.raises(ValueError, match="backbone_runtime 'onnx'.*runs no backbone of ours"):
        ebmtrack.load_tracker("atom", backbone_runtime="onnx")


def test_one_pass_refuses_a_box_head():
    with pytest.raises(ValueError, match="reads no box_head"):
        AtomTracker(None, object(), AtomParams(**ONE_PASS))
    with pytest.raises(ValueError, match="needs a backbone"):
        AtomTracker(None, None, AtomParams(box_mode="siamese", classifier_features="backbone"))
