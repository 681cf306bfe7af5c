import math

import numpy as np
import pytest
import torch

from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig
from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.tracking.atom.refine import ascend_iou
from ebmtrack.tracking.box_refine import (
    blend_size,
    feature_window,
    fold_box_head,
    jitter_proposals,
    select_box,
)
from ebmtrack.tracking.iou_gradient import IoUGradient


@pytest.fixture(scope="module")
def net_and_features():
    torch.manual_seed(0)
    config = IoUNetConfig(
        input_channels=(8, 12), pred_input_dim=(16, 16), pred_inter_dim=(16, 16), width=0.125
    )
    net = AtomIoUNet(config).eval().requires_grad_(False)
    gen = torch.Generator().manual_seed(1)
    feats = [torch.randn(1, 8, 16, 16, generator=gen), torch.randn(1, 12, 8, 8, generator=gen)]
    modulation = net.modulation(feats, torch.tensor([[40.0, 40.0, 40.0, 40.0]]))
    return net, feats, modulation


def test_gradient_ascent_never_lowers_the_predicted_iou(net_and_features):
    net, feats, modulation = net_and_features
    test = net.test_features(feats)
    gen = torch.Generator().manual_seed(3)
    boxes = jitter_proposals(torch.tensor([40.0, 40.0, 40.0, 40.0]), 15, 0.5, 0.5, gen)
    with torch.no_grad():
        before = net.predict_iou(modulation, test, boxes[None])[0]
    # A long step overshoots: the rejection rule must still never lose.
    for step in (1.0, 50.0):
        after_boxes, after = ascend_iou(net, modulation, test, boxes, steps=5, step_length=step)
        assert torch.all(after >= before - 1e-6)
        with torch.no_grad():
            check = net.predict_iou(modulation, test, after_boxes[None])[0]
        torch.testing.assert_close(check, after, rtol=1e-4, atol=1e-5)
    assert (after > before).any()


def test_a_feature_window_gives_the_same_ious_as_the_whole_map(net_and_features):
    net, _, modulation = net_and_features
    gen = torch.Generator().manual_seed(5)
    feats = [torch.randn(1, 8, 32, 32, generator=gen), torch.randn(1, 12, 16, 16, generator=gen)]
    boxes = torch.tensor([[120.0, 114.0, 20.0, 24.0], [116.0, 120.0, 26.0, 20.0]])
    r0, r1, c0, c1 = feature_window(boxes, margin=4.0, stride=16, map_size=(16, 16))
    assert (r1 - r0) < 16 and (c1 - c0) < 16 and r0 > 0 and c0 > 0
    full = net.predict_iou(modulation, net.test_features(feats), boxes[None])
    window = [feats[0][..., 2 * r0 : 2 * r1, 2 * c0 : 2 * c1], feats[1][..., r0:r1, c0:c1]]
    offset = torch.tensor([c0 * 16.0, r0 * 16.0, 0.0, 0.0])
    part = net.predict_iou(modulation, net.test_features(window), (boxes - offset)[None])
    torch.testing.assert_close(part, full, rtol=1e-4, atol=1e-5)


def test_folded_iou_net_gives_the_same_features_ious_and_gradients(net_and_features):
    net, feats, modulation = net_and_features
    # Non-trivial BatchNorm statistics, so that folding has something to fold.
    trained = AtomIoUNet(net.config).eval().requires_grad_(False)
    trained.load_state_dict(net.state_dict())
    gen = torch.Generator().manual_seed(7)
    for module in trained.modules():
        if isinstance(module, torch.nn.BatchNorm2d | torch.nn.BatchNorm1d):
            module.running_mean.normal_(0.0, 0.5, generator=gen)
            module.running_var.uniform_(0.5, 2.0, generator=gen)
            module.bias.normal_(0.0, 0.2, generator=gen)
    folded = fold_box_head(trained)
    assert not any(
        isinstance(m, torch.nn.BatchNorm2d | torch.nn.BatchNorm1d) for m in folded.modules()
    )
    test, test_folded = trained.test_features(feats), folded.test_features(feats)
    for a, b in zip(test, test_folded):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    boxes = jitter_proposals(torch.tensor([40.0, 40.0, 40.0, 40.0]), 7, 0.5, 0.5, gen)
    grads = []
    for model, features in ((trained, test), (folded, test_folded)):
        leaf = boxes.clone().requires_grad_(True)
        with torch.enable_grad():
            ious = model.predict_iou(modulation, features, leaf[None])
            grads.append(torch.autograd.grad(ious.sum(), leaf)[0])
        grads.append(ious.detach())
    torch.testing.assert_close(grads[3], grads[1], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(grads[2], grads[0], rtol=1e-4, atol=1e-5)
    # The original is untouched (its weights are what gets saved).
    assert any(isinstance(m, torch.nn.BatchNorm1d) for m in trained.modules())


def test_closed_form_iou_gradient_equals_autograd(net_and_features):
    net, feats, modulation = net_and_features
    folded = fold_box_head(net)
    # A non-square map, so that the x and y axes cannot be swapped unnoticed.
    feats = [feats[0][..., :14], feats[1][..., :7]]
    modulated = folded.modulate(modulation, folded.test_features(feats))
    gen = torch.Generator().manual_seed(11)
    boxes = jitter_proposals(torch.tensor([40.0, 44.0, 36.0, 40.0]), 12, 0.5, 0.5, gen)
    # Partly outside the map, wholly outside, and of zero width (zero IoU term, zero gradient).
    extra = torch.tensor([[-10.0, 90.0, 50.0, 60.0], [300.0, 5.0, 20.0, 30.0], [50, 50, 0, 20]])
    boxes = torch.cat([boxes, extra])
    leaf = boxes.clone().requires_grad_(True)
    with torch.enable_grad():
        expected = folded.predict_iou_modulated(modulated, leaf[None])[0]
        (expected_grad,) = torch.autograd.grad(expected.sum(), leaf)
    ious, grad = IoUGradient(folded, modulated)(boxes)
    torch.testing.assert_close(ious, expected.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-7)
    assert grad[:12].abs().min() > 0 and (grad[-2:-1] == 0).all()
    with pytest.raises(ValueError, match="fold_box_head"):
        IoUGradient(net, modulated)
    # The ascent takes the same steps either way.
    test = folded.test_features(feats)
    slow = ascend_iou(folded, modulation, test, boxes[:12], steps=5, step_length=2.0)
    fast = ascend_iou(folded, modulation, test, boxes[:12], 5, 2.0, closed_form=True)
    torch.testing.assert_close(fast, slow, rtol=1e-4, atol=1e-4)


def test_feature_window_covers_the_boxes_plus_margin():
    boxes = torch.tensor([[100.0, 120.0, 40.0, 30.0]])
    # x in [90, 150] px -> cells 5 .. 10 (5.6 .. 9.4), y in [110, 160] -> cells 6 .. 10; plus 2.
    assert feature_window(boxes, margin=10.0, stride=16, map_size=(18, 18)) == (4, 13, 3, 13)
    assert feature_window(boxes, 1000.0, 16, (18, 18)) == (0, 18, 0, 18)


def test_jitter_proposals_and_select_box():
    gen = torch.Generator().manual_seed(0)
    box = torch.tensor([10.0, 20.0, 30.0, 60.0])
    proposals = jitter_proposals(box, 9, 0.1, 0.5, gen)
    assert proposals.shape == (10, 4)
    torch.testing.assert_close(proposals[0], box)
    scale = math.sqrt(30 * 60)
    centers = proposals[1:, :2] + proposals[1:, 2:] / 2
    assert ((centers - torch.tensor([25.0, 50.0])).abs() <= 0.05 * scale + 1e-4).all()
    assert (proposals[:, 2:] >= 10.0 - 1e-6).all()
    boxes = torch.tensor([[0.0, 0, 10, 10], [2, 2, 10, 10], [4, 4, 10, 10], [0, 0, 100, 10]])
    ious = torch.tensor([0.5, 0.7, 0.9, 1.0])
    # The 10:1 box is discarded, the other three averaged.
    torch.testing.assert_close(select_box(boxes, ious, 3, 6.0), torch.tensor([2.0, 2, 10, 10]))
    assert select_box(boxes[3:], ious[3:], 3, 6.0) is None


def test_blend_size_moves_the_given_fraction_of_the_way_in_log_space():
    previous, refined = np.array([40.0, 10.0]), np.array([10.0, 40.0])
    np.testing.assert_allclose(blend_size(previous, refined, 1.0), refined)
    np.testing.assert_allclose(blend_size(previous, refined, 0.5), [20.0, 20.0])  # geometric mean
    # Two half steps towards a fixed size cover 3/4 of the log distance.
    twice = blend_size(blend_size(previous, refined, 0.5), refined, 0.5)
    np.testing.assert_allclose(np.log(twice / previous), 0.75 * np.log(refined / previous))
    with pytest.raises(ValueError, match="size_update_rate"):
        AtomParams(size_update_rate=0.0)
