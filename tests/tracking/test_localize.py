import math

import pytest
import torch

from ebmtrack.tracking.base import TrackStatus
from ebmtrack.tracking.localize import best_scale, localize, upsample_scores


def _peaks(size, peaks, sigma=1.0):
    ys, xs = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    out = torch.zeros(size, size)
    for (x, y), height in peaks:
        out += height * torch.exp(-((xs - x) ** 2 + (ys - y) ** 2) / (2 * sigma**2))
    return out


@pytest.mark.parametrize(
    "peaks, status, position",
    [
        ([((9, 9), 1.0)], TrackStatus.NORMAL, (9, 9)),
        ([((9, 9), 0.2)], TrackStatus.NOT_FOUND, (9, 9)),
        # A far distractor almost as strong: keep the near peak.
        ([((9, 9), 1.0), ((17, 17), 0.9)], TrackStatus.HARD_NEGATIVE, (9, 9)),
        # The stronger peak is far, the other near: move to the near one.
        ([((1, 1), 1.0), ((10, 10), 0.9)], TrackStatus.HARD_NEGATIVE, (10, 10)),
        # Both near: uncertain.
        ([((6, 9), 1.0), ((13, 9), 0.95)], TrackStatus.UNCERTAIN, (6, 9)),
        # A weaker second peak: hard negative, keep the first.
        ([((9, 9), 1.0), ((16, 9), 0.6)], TrackStatus.HARD_NEGATIVE, (9, 9)),
    ],
)
def test_localize_statuses(peaks, status, position):
    scores = _peaks(19, peaks)
    found = localize(scores, cell_px=16.0, crop_size=288, target_size=(40.0, 40.0))
    assert found.status == status
    assert found.position == (position[0] * 16.0, position[1] * 16.0)


def test_bicubic_upsampling_keeps_the_samples_and_finds_a_subcell_peak():
    scores = _peaks(9, [((4.3, 3.6), 1.0)], sigma=1.5)
    fine = upsample_scores(scores, 4)
    assert fine.shape == (33, 33)
    torch.testing.assert_close(fine[::4, ::4], scores, rtol=1e-5, atol=1e-5)
    row, col = divmod(int(torch.argmax(fine)), 33)
    assert abs(col / 4 - 4.3) <= 0.25 and abs(row / 4 - 3.6) <= 0.25


def test_best_scale_finds_the_vertex_of_a_log_parabola():
    factors = (1.0, 1 / 1.05, 1.05)

    def peaks(true_factor, curvature=-3.0):
        return [curvature * (math.log(f) - math.log(true_factor)) ** 2 + 2.0 for f in factors]

    # Between the sampled scales: the exact vertex, with the nearest sampled scale as the best.
    best, factor = best_scale(factors, peaks(1.02))
    assert best == 0 and factor == pytest.approx(1.02, rel=1e-12)
    best, factor = best_scale(factors, peaks(0.97))
    assert best == 1 and factor == pytest.approx(0.97, rel=1e-12)
    # Beyond the sampled scales: the end scale.
    best, factor = best_scale(factors, peaks(1.2))
    assert best == 2 and factor == pytest.approx(1.05, rel=1e-12)
    # Not concave (a dip at the middle scale): the best sampled scale, no interpolation.
    assert best_scale(factors, [1.0, 1.5, 1.2]) == (1, 1 / 1.05)
    # Five scales, unsorted: the parabola through the best and its neighbours in scale.
    five = (1.0, 1.1, 0.9, 1.05, 1 / 1.05)
    values = [-((math.log(f) - math.log(1.07)) ** 2) for f in five]
    best, factor = best_scale(five, values)
    assert five[best] == 1.05 and factor == pytest.approx(1.07, rel=1e-12)
    assert best_scale((1.0,), [0.3]) == (0, 1.0)
