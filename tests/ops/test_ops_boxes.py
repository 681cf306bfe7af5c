import math

import pytest
import torch

from ebmtrack.ops import (
    BOX_FORMATS,
    box_convert,
    box_iou,
    clip_xywh,
    elementwise_iou,
    iou_xywh,
    perturb_boxes,
)


def random_xywh(shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    xy = torch.rand(*shape, 2, generator=generator, dtype=torch.float64) * 100 - 20
    wh = torch.rand(*shape, 2, generator=generator, dtype=torch.float64) * 50 + 1
    return torch.cat([xy, wh], dim=-1)


def test_conversions_known_values():
    box = torch.tensor([10.0, 20.0, 4.0, 6.0])
    assert box_convert(box, "xywh", "xyxy").tolist() == [10, 20, 14, 26]
    assert box_convert(box, "xywh", "cxcywh").tolist() == [12, 23, 4, 6]
    assert box_convert(box, "xywh", "xywh") is box


@pytest.mark.parametrize("out_fmt", BOX_FORMATS)
@pytest.mark.parametrize("in_fmt", BOX_FORMATS)
def test_conversions_round_trip_between_every_pair(in_fmt, out_fmt):
    norm = torch.rand(3, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64) + 5
    boxes = box_convert(random_xywh((3, 5)), "xywh", in_fmt, norm)
    there = box_convert(boxes, in_fmt, out_fmt, norm)
    torch.testing.assert_close(box_convert(there, out_fmt, in_fmt, norm), boxes)


def test_rel_parametrisation():
    rel = box_convert(torch.tensor([10.0, 20.0, 4.0, 8.0], dtype=torch.float64), "xywh", "rel")
    expected = torch.tensor([12 / 4, 24 / 8, math.log(4), math.log(8)], dtype=torch.float64)
    torch.testing.assert_close(rel, expected)


def test_ebm_parametrisation_is_relative_to_the_reference_size():
    size_norm = torch.tensor([[20.0, 10.0]])
    box = torch.tensor([[[30.0, 40.0, 20.0, 10.0]]])  # centre (40, 45)
    y = box_convert(box, "xywh", "ebm", size_norm)
    expected = torch.tensor([[[40 / 20, 45 / 10, math.log(20), math.log(10)]]])
    torch.testing.assert_close(y, expected)
    # A unit step in y[0] moves the centre by w0 pixels, whatever the box's own size.
    moved = box_convert(y + torch.tensor([1.0, 0.0, 0.0, 0.0]), "ebm", "xywh", size_norm)
    torch.testing.assert_close(moved - box, torch.tensor([[[20.0, 0.0, 0.0, 0.0]]]))


def test_convert_refuses_unknown_formats_and_ebm_without_size():
    box = torch.zeros(1, 1, 4)
    with pytest.raises(ValueError, match="box format must be one of"):
        box_convert(box, "xywh", "yxhw")
    with pytest.raises(ValueError, match="size_norm"):
        box_convert(box, "xywh", "ebm")


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
    torch.testing.assert_close(
        box_iou(box_convert(a, "xywh", "xyxy"), box_convert(b, "xywh", "xyxy")), pairwise
    )
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
