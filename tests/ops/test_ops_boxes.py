import math

import pytest
import torch

from ebmtrack.ops import (
    box_iou,
    clip_xywh,
    cxcywh_to_xywh,
    elementwise_iou,
    iou_xywh,
    perturb_boxes,
    rel_to_xywh,
    xywh_to_cxcywh,
    xywh_to_rel,
    xywh_to_xyxy,
    xyxy_to_xywh,
)


def random_xywh(shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    xy = torch.rand(*shape, 2, generator=generator, dtype=torch.float64) * 100 - 20
    wh = torch.rand(*shape, 2, generator=generator, dtype=torch.float64) * 50 + 1
    return torch.cat([xy, wh], dim=-1)


def test_conversions_known_values_and_round_trips():
    box = torch.tensor([10.0, 20.0, 4.0, 6.0])
    assert xywh_to_xyxy(box).tolist() == [10, 20, 14, 26]
    assert xywh_to_cxcywh(box).tolist() == [12, 23, 4, 6]
    boxes = random_xywh((3, 5))
    torch.testing.assert_close(xyxy_to_xywh(xywh_to_xyxy(boxes)), boxes)
    torch.testing.assert_close(cxcywh_to_xywh(xywh_to_cxcywh(boxes)), boxes)
    torch.testing.assert_close(rel_to_xywh(xywh_to_rel(boxes)), boxes)


def test_rel_parametrisation():
    rel = xywh_to_rel(torch.tensor([10.0, 20.0, 4.0, 8.0], dtype=torch.float64))
    expected = torch.tensor([12 / 4, 24 / 8, math.log(4), math.log(8)], dtype=torch.float64)
    torch.testing.assert_close(rel, expected)


def test_iou_known_values():
    a = torch.tensor([0.0, 0.0, 2.0, 2.0])
    assert elementwise_iou(a, a).item() == 1.0
    assert elementwise_iou(a, torch.tensor([1.0, 0.0, 3.0, 2.0])).item() == pytest.approx(1 / 3)
    assert elementwise_iou(a, torch.tensor([2.0, 0.0, 3.0, 2.0])).item() == 0.0
    # Reversed corners are empty boxes; two empty boxes have IoU 0, not NaN.
    empty = torch.tensor([2.0, 2.0, 1.0, 1.0])
    assert elementwise_iou(empty, empty).item() == 0.0
    assert iou_xywh(
        torch.tensor([0.0, 0.0, 2.0, 2.0]), torch.tensor([1.0, 0.0, 2.0, 2.0])
    ).item() == pytest.approx(1 / 3)


def test_pairwise_iou_matches_elementwise_and_is_symmetric():
    a, b = random_xywh((4,), seed=1), random_xywh((6,), seed=2)
    pairwise = box_iou(a, b, fmt="xywh")
    assert pairwise.shape == (4, 6)
    for i in range(4):
        for j in range(6):
            assert pairwise[i, j] == iou_xywh(a[i], b[j])
    torch.testing.assert_close(box_iou(b, a, fmt="xywh"), pairwise.T)
    torch.testing.assert_close(box_iou(xywh_to_xyxy(a), xywh_to_xyxy(b)), pairwise)
    assert ((pairwise >= 0) & (pairwise <= 1)).all()
    # Batched over leading dimensions.
    assert box_iou(a.expand(2, 4, 4), b.expand(2, 6, 4), fmt="xywh").shape == (2, 4, 6)


def test_iou_rejects_unknown_format():
    with pytest.raises(ValueError, match="fmt"):
        elementwise_iou(torch.zeros(4), torch.zeros(4), fmt="cxcywh")


def test_clip_xywh():
    boxes = torch.tensor([[-5.0, -5, 10, 10], [75, 45, 10, 10], [100, 100, 5, 5], [5, 5, 2, 3]])
    clipped = clip_xywh(boxes, (50, 80))
    expected = [[0, 0, 5, 5], [75, 45, 5, 5], [80, 50, 0, 0], [5, 5, 2, 3]]
    assert clipped.tolist() == expected
    with pytest.raises(ValueError, match="image_size"):
        clip_xywh(boxes, (0, 10))


def test_perturb_boxes_respects_min_iou_and_is_reproducible():
    box = torch.tensor([50.0, 60.0, 40.0, 30.0])
    boxes, ious = perturb_boxes(box, 64, 0.5, generator=torch.Generator().manual_seed(3))
    assert boxes.shape == (64, 4) and ious.shape == (64,)
    assert (ious > 0.5).all()
    torch.testing.assert_close(ious, iou_xywh(boxes, box))
    assert torch.equal(boxes, boxes.round())  # whole pixels, as in ATOM
    assert (boxes[:, 2:] > 0).all()
    assert boxes.unique(dim=0).shape[0] > 10  # actually random
    again, _ = perturb_boxes(box, 64, 0.5, generator=torch.Generator().manual_seed(3))
    assert torch.equal(boxes, again)


def test_perturb_boxes_noise_grows_with_sigma():
    box = torch.tensor([100.0, 100.0, 50.0, 50.0])
    generator = torch.Generator().manual_seed(0)
    _, small = perturb_boxes(box, 200, 0.0, sigma_factors=(0.02,), generator=generator)
    _, large = perturb_boxes(box, 200, 0.0, sigma_factors=(0.3,), generator=generator)
    assert small.mean() > 0.9 > large.mean()


def test_perturb_boxes_rejects_bad_input():
    with pytest.raises(ValueError, match="box"):
        perturb_boxes(torch.tensor([0.0, 0.0, -1.0, 5.0]), 4, 0.1)
    with pytest.raises(ValueError, match="min_iou"):
        perturb_boxes(torch.tensor([0.0, 0.0, 1.0, 5.0]), 4, 1.0)
    assert perturb_boxes(torch.tensor([0.0, 0.0, 10.0, 5.0]), 0, 0.1)[0].shape == (0, 4)
