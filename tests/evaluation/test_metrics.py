"""Metrics on hand-made boxes with known answers."""

import numpy as np
import pytest

from ebmtrack.evaluation import metrics as M


def test_iou_known_values():
    gt = np.array([[0, 0, 10, 10]] * 5, dtype=float)
    pred = np.array(
        [
            [0, 0, 10, 10],  # identical
            [5, 0, 10, 10],  # half shifted: 50 / 150
            [20, 20, 5, 5],  # disjoint
            [0, 0, 5, 5],  # inside: 25 / 100
            [np.nan, 0, 10, 10],  # a NaN prediction fails
        ]
    )
    np.testing.assert_allclose(M.box_iou(pred, gt), [1, 1 / 3, 0, 0.25, 0])
    with pytest.raises(ValueError, match="same shape"):
        M.box_iou(pred[:2], gt)


def test_success_curve_is_strict_and_auc_is_its_mean():
    curve = M.success_curve([0.5, 1.0])
    # IoU 0.5 passes thresholds 0 .. 0.45 (10 of them), not 0.5 (strict); IoU 1.0 fails at 1.0.
    expected = np.where(M.SUCCESS_THRESHOLDS < 0.5, 1.0, 0.5)
    expected[-1] = 0.0
    np.testing.assert_allclose(curve, expected)
    assert M.area_under_curve(curve) == pytest.approx((10 * 1.0 + 10 * 0.5) / 21)
    assert M.curve_at(curve, M.SUCCESS_THRESHOLDS, 0.5) == 0.5
    assert M.area_under_curve(M.success_curve(np.ones(7))) == pytest.approx(20 / 21)
    assert np.isnan(M.success_curve([])).all()


def test_center_errors_precision_and_normalization():
    gt = np.array([[0, 0, 10, 20], [0, 0, 10, 20]], dtype=float)
    pred = np.array([[3, 4, 10, 20], [20, 0, 10, 20]], dtype=float)
    errors = M.center_error(pred, gt)
    np.testing.assert_allclose(errors, [5, 20])
    curve = M.precision_curve(errors)
    assert curve[4] == 0 and curve[5] == 0.5 and curve[19] == 0.5 and curve[20] == 1.0
    # Normalised: divide x by 10 and y by 20.
    np.testing.assert_allclose(M.normalized_center_error(pred, gt), [np.hypot(0.3, 0.2), 2.0])
    assert M.center_error(np.array([[np.nan] * 4]), gt[:1])[0] == np.inf
    # A size change alone moves the centre by half the change (x + w/2 convention).
    np.testing.assert_allclose(M.center_error(np.array([[0, 0, 14, 20.0]]), gt[:1]), [2.0])


def test_clip_to_image_ao_sr_fps():
    clipped = M.clip_to_image(np.array([[-5, 2, 10, 10], [95, 95, 10, 10]]), 100, 100)
    # GOT-10k's rule: the corner is clamped first (moving the box in), then the size.
    np.testing.assert_array_equal(clipped, [[0, 2, 10, 10], [95, 95, 5, 5]])
    ious = np.array([0.2, 0.5, 0.8, 0.9])
    assert M.average_overlap(ious) == pytest.approx(0.6)
    assert M.success_rate(ious, 0.5) == 0.5  # strict
    assert M.success_rate(ious, 0.75) == 0.5
    assert M.frames_per_second([0.5, 0.25, 0.25]) == pytest.approx(3.0)
