"""ebmtrack.ops.windows: the windows a box head reads give the whole map's pooled values."""

import torch
from torch import nn

from ebmtrack.ops.prroi_pool import prroi_pool
from ebmtrack.ops.windows import box_cells, crop_windows


def test_box_cells_of_known_boxes():
    # Stride 16 on an 18 x 18 map: x 40..100 is cells 2.5..6.25, which pooling reads as 2..7;
    # grown by one cell: 1..8, half-open 1..9.
    boxes = torch.tensor([[[40.0, 8.0, 60.0, 30.0]], [[-50.0, 250.0, 500.0, 80.0]]])
    cells = box_cells(boxes, 16, (18, 18), border=1)
    assert cells[0].tolist() == [0, 5, 1, 9]  # rows 0.5..2.375 -> 0..3, grown: 0 (clipped)..5
    assert cells[1].tolist() == [14, 18, 0, 18]  # clipped to the map on three sides


def test_windows_hold_their_cells_and_move_inside_the_map():
    coarse = torch.arange(2 * 10 * 10, dtype=torch.float32).reshape(2, 1, 10, 10)
    fine = torch.randn(2, 3, 20, 20)
    cells = torch.tensor([[0, 3, 0, 2], [6, 10, 7, 10]])  # sizes 3 x 2 and 4 x 3
    (fine_w, coarse_w), origins = crop_windows([fine, coarse], cells, (2, 1))
    assert coarse_w.shape == (2, 1, 4, 3) and fine_w.shape == (2, 3, 8, 6)
    assert origins.tolist() == [[0, 0], [6, 7]]
    assert torch.equal(coarse_w[1, 0], coarse[1, 0, 6:10, 7:10])
    assert torch.equal(fine_w[0], fine[0, :, 0:8, 0:6])
    # A window that would cross the edge moves inside: row 0 needs 4 rows from 0.
    cells = torch.tensor([[8, 10, 8, 10], [0, 4, 0, 3]])
    (_, coarse_w), origins = crop_windows([fine, coarse], cells, (2, 1))
    assert origins.tolist() == [[6, 7], [0, 0]]
    assert torch.equal(coarse_w[0, 0], coarse[0, 0, 6:10, 7:10])


def test_two_convolutions_then_pooling_on_the_window_equal_the_whole_map():
    torch.manual_seed(0)
    convs = nn.Sequential(nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.Conv2d(6, 5, 3, padding=1))
    feats = torch.randn(3, 4, 18, 18)
    boxes = torch.tensor(
        [[[100.0, 90.0, 50.0, 70.0]], [[0.0, 3.0, 40.0, 20.0]], [[200.0, 230.0, 80.0, 58.0]]]
    )
    corners = [boxes[:, 0, :2], boxes[:, 0, :2] + boxes[:, 0, 2:]]
    rois = torch.cat([torch.arange(3.0)[:, None], *corners], 1)
    whole = prroi_pool(convs(feats), rois, 5, 1 / 16)
    cells = box_cells(boxes, 16, (18, 18), border=2)
    (window,), origins = crop_windows([feats], cells, (1,))
    assert window.shape[-1] < 18  # a real saving
    shift = origins.flip(1).float() * 16
    moved = rois.clone()
    moved[:, 1:3] -= shift
    moved[:, 3:5] -= shift
    torch.testing.assert_close(prroi_pool(convs(window), moved, 5, 1 / 16), whole)
    # One border cell fewer than the convolutions need changes the result.
    cells = box_cells(boxes, 16, (18, 18), border=0)
    (window,), origins = crop_windows([feats], cells, (1,))
    shift = origins.flip(1).float() * 16
    moved = rois.clone()
    moved[:, 1:3] -= shift
    moved[:, 3:5] -= shift
    assert not torch.allclose(prroi_pool(convs(window), moved, 5, 1 / 16), whole, atol=1e-4)
