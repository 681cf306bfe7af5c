"""Backbone architectures, torchvision key names, weight loading and its errors (random weights)."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
import torch.nn.functional as F

from ebmtrack.models.backbones import (
    Backbone,
    FeatureInfo,
    FrozenBatchNorm2d,
    backbone_specs,
    create_backbone,
    file_sha256,
    load_backbone_weights,
)
from ebmtrack.models.backbones.efficientnet_lite import SamePadConv2d
from ebmtrack.models.backbones.inference import optimize_for_inference

# Known (stride-8, stride-16) layers and their channels per backbone.
EXPECTED_DEFAULTS = {
    "resnet18": (("layer2", 8, 128), ("layer3", 16, 256)),
    "resnet50": (("layer2", 8, 512), ("layer3", 16, 1024)),
    "mobilenetv2": (("features.6", 8, 32), ("features.13", 16, 96)),
    "efficientnet-lite0": (("reduction_3", 8, 40), ("reduction_4", 16, 112)),
}


@pytest.fixture(scope="module")
def random_backbones() -> dict[str, Backbone]:
    torch.manual_seed(0)
    modules = [name for name, spec in backbone_specs().items() if spec.weights_file is None]
    return {name: create_backbone(name, pretrained=False) for name in modules}


def _images(batch: int, height: int, width: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(batch, 3, height, width, generator=generator) * 255


def _randomize_batchnorm(backbone: Backbone, seed: int = 0) -> None:
    """Non-trivial BN statistics, so that folding them is actually exercised."""
    generator = torch.Generator().manual_seed(seed)
    for name, buffer in backbone.named_buffers():
        n = buffer.shape
        if name.endswith("running_var"):
            buffer.copy_(0.5 + torch.rand(n, generator=generator))
        elif name.endswith(("running_mean", "bias")) and "input_" not in name:
            buffer.copy_(0.1 * torch.randn(n, generator=generator))
        elif name.endswith("weight"):
            buffer.copy_(0.5 + torch.rand(n, generator=generator))


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match="resnet18.*resnet50|efficientnet-lite0"):
        create_backbone("vgg16")


@pytest.mark.parametrize("name", sorted(EXPECTED_DEFAULTS))
def test_default_layers_are_the_stride_8_and_16_pair(random_backbones, name):
    backbone = random_backbones[name]
    (l8, s8, c8), (l16, s16, c16) = EXPECTED_DEFAULTS[name]
    assert backbone.default_layers == (l8, l16)
    assert backbone.classifier_layer == l16
    assert backbone.feature_info[l8] == FeatureInfo(s8, c8)
    assert backbone.feature_info[l16] == FeatureInfo(s16, c16)
    assert backbone.name == name


@pytest.mark.parametrize("name", sorted(EXPECTED_DEFAULTS))
@pytest.mark.parametrize("size", [(128, 128), (100, 68)])
def test_every_layer_has_the_shape_feature_info_states(random_backbones, name, size):
    backbone = random_backbones[name]
    height, width = size
    with torch.inference_mode():
        out = backbone(_images(1, height, width), backbone.feature_info)
    assert list(out) == list(backbone.feature_info)
    for layer, feats in out.items():
        info = backbone.feature_info[layer]
        expected = (1, info.channels, -(-height // info.stride), -(-width // info.stride))
        assert tuple(feats.shape) == expected, layer
        assert torch.isfinite(feats).all()


def test_forward_returns_requested_layers_in_order_and_stops_early(random_backbones):
    backbone = random_backbones["resnet18"]
    calls = []
    handle = backbone.layer3.register_forward_hook(lambda *args: calls.append(1))
    try:
        with torch.inference_mode():
            out = backbone(_images(1, 64, 64), ["layer2", "conv1", "layer2"])
    finally:
        handle.remove()
    assert list(out) == ["layer2", "conv1"]
    assert calls == []  # layer3 never ran
    with torch.inference_mode():
        default = backbone(_images(1, 64, 64))
    assert list(default) == ["layer2", "layer3"]


def test_bad_layers_and_images_raise_value_error(random_backbones):
    backbone = random_backbones["mobilenetv2"]
    with pytest.raises(ValueError, match="valid layers.*features.0"):
        backbone(_images(1, 32, 32), ["layer3"])
    with pytest.raises(ValueError, match=r"\(B, 3, H, W\)"):
        backbone(torch.zeros(1, 32, 32, 3))
    with pytest.raises(ValueError, match="float"):
        backbone(torch.zeros(1, 3, 32, 32, dtype=torch.uint8))


def test_input_normalisation_is_inside_the_backbone(random_backbones):
    # An image equal to the ImageNet mean (in [0, 255]) maps to exactly zero network input.
    backbone = random_backbones["resnet18"]
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
    assert backbone.normalize(mean.expand(1, 3, 4, 4)).abs().max() < 1e-5
    lite = random_backbones["efficientnet-lite0"]
    assert torch.allclose(lite.normalize(torch.full((1, 3, 2, 2), 255.0)), torch.tensor(1.0))


def _torchvision_bn(prefix: str) -> list[str]:
    return [
        f"{prefix}.{k}"
        for k in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")
    ]


def _torchvision_resnet_keys(depths: tuple[int, ...], convs_per_block: int) -> list[str]:
    """The well-known torchvision ResNet state-dict names, written out independently."""
    keys = ["conv1.weight", *_torchvision_bn("bn1")]
    for stage, depth in enumerate(depths, start=1):
        for block in range(depth):
            prefix = f"layer{stage}.{block}"
            for conv in range(1, convs_per_block + 1):
                keys += [f"{prefix}.conv{conv}.weight", *_torchvision_bn(f"{prefix}.bn{conv}")]
            if block == 0 and (stage > 1 or convs_per_block == 3):
                keys += [
                    f"{prefix}.downsample.0.weight",
                    *_torchvision_bn(f"{prefix}.downsample.1"),
                ]
    return keys + ["fc.weight", "fc.bias"]


@pytest.mark.parametrize(
    ("name", "depths", "convs", "count"),
    [("resnet18", (2, 2, 2, 2), 2, 122), ("resnet50", (3, 4, 6, 3), 3, 320)],
)
def test_resnet_state_dict_uses_torchvision_names(random_backbones, name, depths, convs, count):
    expected = _torchvision_resnet_keys(depths, convs)
    assert len(expected) == count  # torchvision's resnet18 / resnet50 state_dict() lengths
    ours = set(random_backbones[name].state_dict())
    assert ours == {k for k in expected if not k.endswith("num_batches_tracked")}
    assert "layer1.0.conv1.weight" in ours and "fc.weight" in ours


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".pth", ".safetensors"])
def test_torchvision_style_checkpoint_round_trip(random_backbones, tmp_path, suffix):
    source = random_backbones["resnet18"]
    state = {k: v.contiguous() for k, v in source.state_dict().items()}
    # Torchvision files carry BN counters; they must be accepted and ignored.
    for key in list(state):
        if key.endswith("running_var"):
            state[key.replace("running_var", "num_batches_tracked")] = torch.tensor(7)
    path = tmp_path / f"resnet18-test{suffix}"
    if suffix == ".pth":
        torch.save(state, path)
    else:
        from safetensors.torch import save_file

        save_file(state, str(path))
    torch.manual_seed(1)
    target = create_backbone("resnet18", weights=path)
    assert target.weights_sha256 == file_sha256(path)
    images = _images(1, 64, 64)
    with torch.inference_mode():
        for layer, feats in source(images, ["layer3"]).items():
            assert torch.equal(feats, target(images, [layer])[layer])
        assert torch.equal(source.classify(images), target.classify(images))


@pytest.mark.slow
def test_checkpoint_errors_name_the_offending_keys(random_backbones, tmp_path):
    state = dict(random_backbones["resnet18"].state_dict())
    state["layer2.0.conv1.weight"] = torch.zeros(128, 64, 5, 5)
    del state["layer3.1.bn2.running_mean"]
    state["layer9.weight"] = torch.zeros(1)
    path = tmp_path / "bad.pth"
    torch.save(state, path)
    with pytest.raises(ValueError) as info:
        create_backbone("resnet18", weights=path)
    message = str(info.value)
    assert "missing: layer3.1.bn2.running_mean" in message
    assert "unexpected: layer9.weight" in message
    assert "layer2.0.conv1.weight: file (128, 64, 5, 5) vs model (128, 64, 3, 3)" in message


@pytest.mark.slow
def test_wrong_sha256_is_refused(random_backbones, tmp_path):
    path = tmp_path / "resnet18.pth"
    torch.save(random_backbones["resnet18"].state_dict(), path)
    with pytest.raises(ValueError, match="sha256"):
        load_backbone_weights(create_backbone("resnet18", pretrained=False), path, "0" * 64)


def test_untrusted_pickles_are_refused(tmp_path):
    path = tmp_path / "evil.pth"
    # A pickled callable (a global): torch.load(weights_only=True) must refuse it.
    path.write_bytes(pickle.dumps(print, protocol=2))
    with pytest.raises(ValueError, match="weights_only"):
        create_backbone("resnet18", weights=path)
    not_tensors = tmp_path / "numbers.pth"
    torch.save({"conv1.weight": 1.5}, not_tensors)
    with pytest.raises(ValueError, match="state dict"):
        create_backbone("resnet18", weights=not_tensors)
    with pytest.raises(FileNotFoundError):
        create_backbone("resnet18", weights=tmp_path / "absent.pth")
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="safetensors"):
        create_backbone("resnet18", weights=broken)


@pytest.mark.parametrize("name", ["resnet18", "resnet50"])
def test_pretrained_resnet_without_file_says_to_pass_weights(name):
    with pytest.raises(ValueError, match="weights=PATH"):
        create_backbone(name)


def test_batchnorm_is_frozen_and_created_backbones_need_no_grad(random_backbones):
    backbone = random_backbones["resnet18"]
    assert not any(p.requires_grad for p in backbone.parameters())
    assert not any("bn" in name for name, _ in backbone.named_parameters())
    before = backbone.layer1[0].bn1.running_mean.clone()
    backbone.train()
    try:
        backbone(_images(2, 64, 64), ["layer1"])
    finally:
        backbone.eval()
    assert torch.equal(before, backbone.layer1[0].bn1.running_mean)


@pytest.mark.parametrize("name", sorted(EXPECTED_DEFAULTS))
def test_fold_batchnorm_and_channels_last_keep_outputs(random_backbones, name):
    backbone = copy.deepcopy(random_backbones[name])
    _randomize_batchnorm(backbone)
    fast = optimize_for_inference(backbone)
    assert not any("running_mean" in key for key in fast.state_dict())
    assert not any(isinstance(m, FrozenBatchNorm2d) for m in fast.modules())
    images = _images(1, 96, 80)
    with torch.inference_mode():
        layers = [next(iter(backbone.feature_info)), *backbone.default_layers]
        reference = backbone(images, layers)
        last = fast(images, layers)
    for layer, ref in reference.items():
        assert (last[layer] - ref).abs().max() <= 1e-4 * ref.abs().max(), layer
        assert last[layer].is_contiguous()  # callers may .view() it


@pytest.mark.parametrize(
    ("size", "kernel", "pads"),
    [(8, 3, (0, 1)), (9, 3, (1, 1)), (8, 5, (1, 2)), (9, 5, (2, 2))],
)
def test_same_padding_matches_tensorflow(size, kernel, pads):
    # TF "SAME" with stride 2: total = (ceil(n/2) - 1) * 2 + k - n, the odd pixel at the end.
    conv = SamePadConv2d(2, 3, kernel, stride=2)
    x = torch.randn(1, 2, size, size)
    expected = F.conv2d(F.pad(x, (*pads, *pads)), conv.weight, stride=2)
    out = conv(x)
    assert out.shape[-1] == -(-size // 2)
    assert torch.allclose(out, expected, atol=1e-6)
