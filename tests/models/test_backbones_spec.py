"""A backbone is one module: a toy backbone defined and registered in this test (its module, its
spec) builds, is named by the trackers' options, and sizes the heads that read it."""

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from torch import nn

import ebmtrack
from ebmtrack.models.backbones import (
    Backbone,
    BackboneSpec,
    FeatureInfo,
    backbone_names,
    backbone_spec,
    create_backbone,
    register_backbone,
)
from ebmtrack.models.backbones.spec import SPECS
from ebmtrack.models.dimp import DiMPClassifier, DiMPConfig
from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig
from ebmtrack.models.serialization import save_model
from ebmtrack.values import OptionError

# the torch tracker on its own backbone (the default runs one pass, the siamese one)
TWO_PASS = {"classifier_features": "backbone"}


class Toy(Backbone):
    """Two layers, stride 8 (12 channels) and 16 (20 channels), its own normalisation."""

    name = "toy"
    feature_info = {"s8": FeatureInfo(stride=8, channels=12), "s16": FeatureInfo(16, 20)}
    default_layers = ("s8", "s16")
    classifier_layer = "s16"
    classifier_prefixes = ()

    def __init__(self) -> None:
        super().__init__(mean_rgb=(120.0, 110.0, 100.0), std_rgb=(60.0, 60.0, 60.0))
        self.s8 = nn.Sequential(nn.Conv2d(3, 12, 8, stride=8), nn.ReLU())
        self.s16 = nn.Sequential(nn.Conv2d(12, 20, 3, stride=2, padding=1), nn.ReLU())

    def stages(self):
        return [("s8", self.s8), ("s16", self.s16)]

    def logits_from(self, last_features):
        raise ValueError("no ImageNet head")


@pytest.fixture
def toy(tmp_path):
    """The toy backbone registered (for this test only) and a file of its random weights."""
    backbone_names()  # the shipped backbones registered first
    spec = BackboneSpec("toy", Toy, iou_net_width=0.25, dimp_blocks=0, dimp_dim=24)
    assert register_backbone(spec) is spec
    torch.manual_seed(0)
    path = tmp_path / "toy.safetensors"
    save_file({k: v.contiguous() for k, v in Toy().state_dict().items()}, str(path))
    yield path
    del SPECS["toy"]


def _frames(count=4):
    rng = np.random.default_rng(0)
    background = rng.integers(60, 90, (96, 128, 3), dtype=np.uint8)
    texture = rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)
    frames = []
    for t in range(count):
        frame = background.copy()
        frame[30 + t : 54 + t, 40 + 2 * t : 64 + 2 * t] = texture
        frames.append(frame)
    return frames


FAST = {"search_size": 96, "backbone_runtime": "torch", "precision": "float32"}


def test_a_registered_backbone_is_built_named_and_refused_by_name(toy):
    assert "toy" in backbone_names() and backbone_spec("toy").iou_net_width == 0.25
    net = create_backbone("toy", weights=toy)
    assert isinstance(net, Toy) and net.weights_sha256 is not None
    feats = net(torch.zeros(1, 3, 96, 96))
    assert feats["s8"].shape == (1, 12, 12, 12) and feats["s16"].shape == (1, 20, 6, 6)
    with pytest.raises(ValueError, match="no ImageNet weights ship for 'toy'"):
        create_backbone("toy")  # its spec names no weights: a file is needed
    with pytest.raises(OptionError, match="unknown backbone 'tyo'; valid names: .*'toy'"):
        ebmtrack.load_tracker("atom", runtime="torch", backbone="tyo")
    with pytest.raises(ValueError, match="already registered"):
        register_backbone(BackboneSpec("toy", Toy))


def test_the_heads_size_themselves_from_the_spec(toy):
    net = create_backbone("toy", weights=toy)
    iou = IoUNetConfig.for_backbone(net)
    assert iou.input_channels == (12, 20) and iou.strides == (8, 16)
    assert iou.width == 0.25 and iou.pred_input_dim == (64, 64) and iou.backbone == "toy"
    dimp = DiMPConfig.for_backbone(net)
    assert (dimp.in_channels, dimp.stride, dimp.num_blocks, dimp.feature_dim) == (20, 16, 0, 24)
    # Another spec for the same module gives other heads: nothing reads the backbone's name.
    register_backbone(BackboneSpec("toy", Toy, iou_net_width=0.5, dimp_dim=40), replace=True)
    assert IoUNetConfig.for_backbone(net).width == 0.5
    assert DiMPConfig.for_backbone(net).feature_dim == 40


@pytest.mark.slow
def test_trackers_run_end_to_end_on_the_toy_backbone_and_its_heads(toy, tmp_path):
    frames = _frames()
    box = (40.0, 30.0, 24.0, 24.0)
    net = create_backbone("toy", weights=toy)
    torch.manual_seed(1)
    iou_net = AtomIoUNet(IoUNetConfig.for_backbone(net)).eval()
    head = save_model(iou_net, tmp_path / "head.safetensors")
    classifier = DiMPClassifier(DiMPConfig.for_backbone(net)).eval()
    classifier_file = save_model(classifier, tmp_path / "dimp.safetensors")
    built = [
        ebmtrack.load_tracker(
            "atom", runtime="torch", backbone="toy", backbone_weights=toy, **FAST, **TWO_PASS
        ),
        ebmtrack.load_tracker(
            "atom-iounet",
            runtime="torch",
            backbone="toy",
            backbone_weights=toy,
            weights=head,
            **FAST,
        ),
        ebmtrack.load_tracker(
            "dimp-nce+",
            backbone="toy",
            backbone_weights=toy,
            weights=head,
            classifier_weights=classifier_file,
            search_size=96,
            backbone_runtime="torch",
        ),
    ]
    for tracker in built:
        assert tracker.backbone.name == "toy"
        tracker.initialize(frames[0], box)
        for frame in frames[1:]:
            result = tracker.track(frame)
            assert np.all(np.isfinite(result.box)) and np.all(result.box[2:] > 0)
    assert built[1].box_head is not None and built[1].box_head.config.width == 0.25
