import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig, boxes_to_rois
from ebmtrack.models.serialization import load_model, read_model_config, save_model

SMALL = IoUNetConfig(
    input_channels=(8, 12), pred_input_dim=(16, 16), pred_inter_dim=(16, 16), width=0.125
)


def _net(config=SMALL, seed=0):
    torch.manual_seed(seed)
    return AtomIoUNet(config).eval()


def _features(batch=2, size=64, config=SMALL, seed=1):
    gen = torch.Generator().manual_seed(seed)
    c8, c16 = config.input_channels
    return [
        torch.randn(batch, c8, size // 8, size // 8, generator=gen),
        torch.randn(batch, c16, size // 16, size // 16, generator=gen),
    ]


def test_reference_layer_sizes_for_resnet18():
    net = AtomIoUNet()
    assert net.ref_pool_conv_fine[0].weight.shape == (256, 128, 3, 3)
    assert net.ref_modulation_fine[0].weight.shape == (256, 512, 1, 1)
    assert net.predictor_fine[1].weight.shape == (256, 256 * 5 * 5)
    assert net.predictor_coarse[1].weight.shape == (256, 256 * 3 * 3)
    assert net.iou_predictor.weight.shape == (1, 512)
    bn_weights = torch.cat([m.weight for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)])
    assert bn_weights.min() >= 0 and bn_weights.max() <= 1


def test_shapes_and_nonnegative_modulation():
    net = _net()
    ref, test = _features(), _features(seed=2)
    ref_boxes = torch.tensor([[20.0, 18.0, 24.0, 20.0], [10.0, 12.0, 30.0, 28.0]])
    modulation = net.modulation(ref, ref_boxes)
    assert [m.shape for m in modulation] == [(2, 16), (2, 16)]
    assert all((m >= 0).all() for m in modulation)
    proposals = torch.rand(2, 7, 4) * 30 + torch.tensor([0.0, 0.0, 8.0, 8.0])
    iou = net(ref, test, ref_boxes, proposals)
    assert iou.shape == (2, 7)


def test_each_sample_and_each_proposal_is_predicted_on_its_own():
    """A batch gives each sample what it gets alone (its own reference and test features: the
    pooling reads the right batch row), and a proposal's IoU does not depend on the others."""
    net = _net()
    ref, test = _features(), _features(seed=2)
    ref_boxes = torch.tensor([[20.0, 18.0, 24.0, 20.0], [10.0, 12.0, 30.0, 28.0]])
    proposals = torch.rand(2, 7, 4, generator=torch.Generator().manual_seed(4)) * 30
    proposals[..., 2:] += 8.0
    together = net(ref, test, ref_boxes, proposals)
    for b in range(2):
        alone = net([f[b : b + 1] for f in ref], [f[b : b + 1] for f in test],
                    ref_boxes[b : b + 1], proposals[b : b + 1])  # fmt: skip
        torch.testing.assert_close(alone[0], together[b], rtol=1e-5, atol=1e-6)
    order = torch.tensor([6, 2, 0, 5, 1, 3, 4])
    shuffled = net(ref, test, ref_boxes, proposals[:, order])
    torch.testing.assert_close(shuffled, together[:, order], rtol=1e-5, atol=1e-6)
    first = net(ref, test, ref_boxes, proposals[:, :1])
    torch.testing.assert_close(first[:, 0], together[:, 0], rtol=1e-5, atol=1e-6)
    # The two samples differ (else the checks above would hold for a net that ignores them).
    assert not torch.allclose(together[0], together[1])


def test_a_proposal_reads_the_test_features_around_it_only():
    """Changing the test features far from a proposal (beyond its pooling window and the test
    branch's 3x3 convolutions) leaves its IoU as it was; changing them under it does not."""
    net = _net()
    ref, test = _features(batch=1, size=128), _features(batch=1, size=128, seed=5)
    ref_box = torch.tensor([[40.0, 40.0, 32.0, 32.0]])
    proposal = torch.tensor([[[4.0, 4.0, 20.0, 20.0]]])  # the top-left corner
    before = net(ref, test, ref_box, proposal)
    far = [f.clone() for f in test]
    far[0][..., 12:, 12:] += 5.0  # stride 8: pixels >= 96
    far[1][..., 6:, 6:] += 5.0  # stride 16: pixels >= 96
    torch.testing.assert_close(net(ref, far, ref_box, proposal), before, rtol=0, atol=1e-6)
    near = [f.clone() for f in test]
    near[0][..., :3, :3] += 5.0
    assert not torch.allclose(net(ref, near, ref_box, proposal), before, atol=1e-4)


def test_prediction_is_differentiable_in_the_boxes():
    net = _net()
    ref, test = _features(batch=1), _features(batch=1, seed=3)
    boxes = torch.tensor([[[20.0, 20.0, 20.0, 16.0]]], requires_grad=True)
    iou = net(ref, test, torch.tensor([[20.0, 20.0, 20.0, 16.0]]), boxes)
    (grad,) = torch.autograd.grad(iou.sum(), boxes)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0


def test_boxes_to_rois():
    boxes = torch.tensor([[[1.0, 2.0, 3.0, 4.0]], [[5.0, 6.0, 7.0, 8.0]]])
    expected = torch.tensor([[0.0, 1.0, 2.0, 4.0, 6.0], [1.0, 5.0, 6.0, 12.0, 14.0]])
    torch.testing.assert_close(boxes_to_rois(boxes), expected)


def test_bad_inputs_name_the_argument():
    net = _net()
    ref = _features()
    with pytest.raises(ValueError, match="ref_feats"):
        net.modulation(ref[:1], torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"ref_feats\[1\]"):
        net.modulation([ref[0], ref[0]], torch.zeros(2, 4))
    with pytest.raises(ValueError, match="ref_boxes"):
        net.modulation(ref, torch.zeros(3, 4))
    modulation = net.modulation(ref, torch.ones(2, 4))
    with pytest.raises(ValueError, match="proposals"):
        net.predict_iou(modulation, net.test_features(ref), torch.ones(2, 4))
    with pytest.raises(ValueError, match="width"):
        IoUNetConfig(width=0)
    with pytest.raises(ValueError, match="strides"):
        IoUNetConfig(strides=(8,))


def test_config_for_a_backbone():
    class Info:
        def __init__(self, stride, channels):
            self.stride, self.channels = stride, channels

    class FakeBackbone:
        name = "mobilenetv2"
        default_layers = ("features.6", "features.13")
        feature_info = {"features.6": Info(8, 32), "features.13": Info(16, 96)}

    config = IoUNetConfig.for_backbone(FakeBackbone())
    assert config.input_channels == (32, 96)
    assert config.strides == (8, 16)
    assert config.pred_input_dim == (128, 128) and config.width == 0.5
    assert config.feature_layers == ("features.6", "features.13")


def test_save_load_round_trip(tmp_path):
    config = IoUNetConfig(**{**SMALL.__dict__, "backbone": "mobilenetv2"})
    net = _net(config)
    path = save_model(net, tmp_path / "iou.safetensors")
    name, stored = read_model_config(path)
    assert name == "AtomIoUNet" and stored == config
    loaded = load_model(path, expected="AtomIoUNet")
    ref, test = _features(), _features(seed=4)
    boxes = torch.tensor([[20.0, 18.0, 24.0, 20.0], [10.0, 12.0, 30.0, 28.0]])
    proposals = boxes[:, None].repeat(1, 3, 1)
    with torch.no_grad():
        torch.testing.assert_close(
            loaded(ref, test, boxes, proposals), net(ref, test, boxes, proposals)
        )


def test_a_float16_file_is_half_the_bytes_and_loads_as_the_rounded_float32_model(tmp_path):
    net = _net(IoUNetConfig(**{**SMALL.__dict__, "backbone": "mobilenetv2"}))
    full = save_model(net, tmp_path / "full.safetensors")
    half = save_model(net, tmp_path / "half.safetensors", dtype=torch.float16)
    again = save_model(net, tmp_path / "again.safetensors", dtype=torch.float16)
    assert half.read_bytes() == again.read_bytes()  # the same model, the same file
    stored = load_file(str(half))
    assert {v.dtype for v in stored.values()} == {torch.float16, torch.int64}
    assert half.stat().st_size < 0.55 * full.stat().st_size
    loaded = load_model(half, expected="AtomIoUNet")
    for key, value in net.state_dict().items():  # float32 again, each value float16's rounding
        assert loaded.state_dict()[key].dtype == value.dtype
        torch.testing.assert_close(
            loaded.state_dict()[key], value.to(torch.float16).to(value.dtype), rtol=0, atol=0
        )


def test_load_names_the_bad_key(tmp_path):
    path = save_model(_net(), tmp_path / "iou.safetensors")
    tensors = load_file(str(path))
    with open(path, "rb") as handle:
        header_len = int.from_bytes(handle.read(8), "little")
        metadata = json.loads(handle.read(header_len))["__metadata__"]

    missing = dict(tensors)
    del missing["iou_predictor.bias"]
    save_file(missing, str(tmp_path / "missing.safetensors"), metadata=metadata)
    with pytest.raises(ValueError, match="missing tensor 'iou_predictor.bias'"):
        load_model(tmp_path / "missing.safetensors")

    wrong = dict(tensors)
    wrong["iou_predictor.weight"] = torch.zeros(1, 5)
    save_file(wrong, str(tmp_path / "wrong.safetensors"), metadata=metadata)
    with pytest.raises(ValueError, match="'iou_predictor.weight' has shape"):
        load_model(tmp_path / "wrong.safetensors")

    integer = dict(tensors)
    integer["iou_predictor.weight"] = torch.zeros_like(tensors["iou_predictor.weight"]).long()
    save_file(integer, str(tmp_path / "integer.safetensors"), metadata=metadata)
    with pytest.raises(ValueError, match="'iou_predictor.weight' has dtype torch.int64"):
        load_model(tmp_path / "integer.safetensors")

    extra = {**tensors, "extra.weight": torch.zeros(2)}
    save_file(extra, str(tmp_path / "extra.safetensors"), metadata=metadata)
    with pytest.raises(ValueError, match="unexpected tensor 'extra.weight'"):
        load_model(tmp_path / "extra.safetensors")

    with pytest.raises(ValueError, match="holds a AtomIoUNet"):
        load_model(path, expected="AtomClassifier")
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file at all")
    with pytest.raises(ValueError, match="not a safetensors file"):
        load_model(tmp_path / "junk.safetensors")
    save_file(tensors, str(tmp_path / "bare.safetensors"))
    with pytest.raises(ValueError, match="not an ebmtrack model file"):
        load_model(tmp_path / "bare.safetensors")
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "absent.safetensors")
