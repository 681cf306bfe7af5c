"""The box head's NumPy pieces: PrRoIPool, the closed-form IoU and its gradient, the proposals,
the window and the box choice, each against the torch tracker's."""

import numpy as np
import pytest
import torch

from ebmtrack.lite import head as lite
from ebmtrack.lite.torch_random import TorchGenerator
from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig
from ebmtrack.ops.prroi_pool import prroi_pool
from ebmtrack.tracking import box_refine
from ebmtrack.tracking.iou_gradient import IoUGradient

CONFIG = IoUNetConfig(
    input_channels=(32, 96), pred_input_dim=(16, 16), pred_inter_dim=(16, 16), width=0.125
)


@pytest.mark.parametrize("bins", [1, 3, 5])
def test_prroi_pool_is_torchs(bins):
    rng = np.random.default_rng(bins)
    feature = rng.normal(size=(6, 9, 11)).astype(np.float32)
    for box in ([1.3, 2.2, 7.9, 6.1], [-0.7, 3.0, 4.0, 9.5], [2.0, 2.0, 2.0, 5.0]):
        got = lite.prroi_pool(feature, np.array(box, np.float32), bins)
        rois = torch.tensor([[0.0, *box]])
        want = prroi_pool(torch.from_numpy(feature)[None], rois, bins, 1.0)[0].numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def folded():
    torch.manual_seed(0)
    net = AtomIoUNet(CONFIG).eval()
    for module in net.modules():  # BatchNorm statistics away from the identity
        if isinstance(module, torch.nn.BatchNorm1d | torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.2, 0.2)
            module.running_var.uniform_(0.5, 2.0)
    return box_refine.fold_box_head(net)


def predictor(net) -> lite.Predictor:
    blocks = (net.predictor_fine, net.predictor_coarse)
    return lite.Predictor(
        tuple(b[1].weight.detach().numpy() for b in blocks),
        tuple(b[1].bias.detach().numpy() for b in blocks),
        net.iou_predictor.weight[0].detach().numpy(),
        float(net.iou_predictor.bias[0]),
    )


def test_closed_form_iou_and_gradient_are_the_torch_trackers(folded):
    rng = np.random.default_rng(1)
    modulated = [
        rng.normal(size=(1, 16, 10, 12)).astype(np.float32),
        np.abs(rng.normal(size=(1, 16, 5, 6))).astype(np.float32),
    ]
    boxes = np.concatenate(
        [rng.uniform(0, 40, size=(12, 2)), rng.uniform(8, 50, size=(12, 2))], axis=1
    ).astype(np.float32)
    ours = lite.IoUGradient(predictor(folded), [m[0] for m in modulated], (1 / 8, 1 / 16), (5, 3))
    theirs = IoUGradient(folded, [torch.from_numpy(m) for m in modulated])
    ious, grad = ours(boxes)
    want_ious, want_grad = theirs(torch.from_numpy(boxes))
    np.testing.assert_allclose(ious, want_ious.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grad, want_grad.numpy(), rtol=1e-4, atol=1e-5)
    assert np.abs(grad).max() > 1e-4  # a real gradient
    # and the ascent climbs it
    boxes2, ious2, start = lite.ascend_iou(ours, boxes, steps=5, step_length=1.0)
    assert np.all(ious2 >= start) and np.any(ious2 > start)


def test_proposals_are_the_torch_trackers():
    box = np.array([30.5, 40.25, 60.0, 35.0], dtype=np.float32)
    for seed in (0, 100_003 + 7):
        got = lite.jitter_proposals(box, 9, 0.1, 0.5, TorchGenerator(seed))
        want = box_refine.jitter_proposals(
            torch.from_numpy(box), 9, 0.1, 0.5, torch.Generator().manual_seed(seed)
        ).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)


def test_window_and_selection_are_the_torch_trackers():
    rng = np.random.default_rng(3)
    for _ in range(20):
        boxes = np.concatenate(
            [rng.uniform(-20, 250, size=(10, 2)), rng.uniform(5, 120, size=(10, 2))], axis=1
        ).astype(np.float32)
        margin = float(rng.uniform(0, 30))
        assert lite.feature_window(boxes, margin, 16, (18, 18)) == box_refine.feature_window(
            torch.from_numpy(boxes), margin, 16, (18, 18)
        )
        ious = rng.normal(size=10).astype(np.float32)
        got = lite.select_box(boxes, ious, 3, 3.0)
        want = box_refine.select_box(torch.from_numpy(boxes), torch.from_numpy(ious), 3, 3.0)
        if want is None:
            assert got is None
        else:
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-6)
