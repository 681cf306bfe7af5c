"""The siamese box estimator: its decoding rule on hand-made head outputs (known optimum), its
checks, and the shipped networks following a target that moves and grows."""

import numpy as np
import pytest

from ebmtrack.lite.siamese import (
    INSTANCE_SIZE,
    STRIDE,
    SiameseBoxConfig,
    SiameseBoxEstimator,
    decode_box,
    template_side,
)
from ebmtrack.weights import shipped_file

CELLS = 16
PLAIN = SiameseBoxConfig(siamese_window=0.0, siamese_penalty=0.0, siamese_size_rate=1.0)


def _outputs(peak: tuple[int, int], sides=(20.0, 10.0, 30.0, 40.0), level: float = 6.0):
    """Logits with one target cell at ``peak`` (row, col) and the same sides everywhere."""
    logits = np.zeros((2, CELLS, CELLS))
    logits[1, peak[0], peak[1]] = level
    distances = np.broadcast_to(np.asarray(sides, float)[:, None, None], (4, CELLS, CELLS))
    return logits, distances.copy()


def test_the_best_cell_gives_its_box_relative_to_the_crop_centre():
    logits, sides = _outputs((5, 11))
    offset, size, rate, score = decode_box(logits, sides, np.array([50.0, 50.0]), PLAIN)
    # cell (row 5, col 11): point ((11 - 8) * 16, (5 - 8) * 16); sides 20, 10, 30, 40 around it
    np.testing.assert_allclose(offset, [48 + 5, -48 + 15])
    np.testing.assert_allclose(size, [50, 50])
    assert score == pytest.approx(np.exp(6) / (1 + np.exp(6)))
    assert rate == pytest.approx(score)  # penalty 1 (no change), size rate 1


def test_the_penalty_prefers_the_unchanged_size_and_the_window_the_centre():
    logits = np.zeros((2, CELLS, CELLS))
    logits[1, 3, 3] = logits[1, 12, 12] = 4.0  # two equal peaks
    sides = np.full((4, CELLS, CELLS), 25.0)  # 50 x 50 boxes ...
    sides[:, 12, 12] = 50.0  # ... but twice that at (12, 12)
    penalised = SiameseBoxConfig(siamese_window=0.0, siamese_penalty=0.5)
    offset, size, _, _ = decode_box(logits, sides, np.array([50.0, 50.0]), penalised)
    np.testing.assert_allclose(offset, [-5 * STRIDE, -5 * STRIDE])  # (3, 3): no size change
    windowed = SiameseBoxConfig(siamese_window=1.0)
    offset, _, _, _ = decode_box(logits, sides, np.array([50.0, 50.0]), windowed)
    assert np.abs(offset).max() <= STRIDE  # the window alone: a cell next to the centre


@pytest.mark.parametrize(
    "field, value", [("siamese_window", 1.5), ("siamese_size_rate", -0.1), ("siamese_penalty", -1)]
)
def test_the_decoding_refuses_values_out_of_range(field, value):
    with pytest.raises(ValueError, match=field):
        SiameseBoxConfig(**{field: value})


def _scene(center, size, rng_seed=0) -> np.ndarray:
    """A 360 x 480 frame of smooth noise with a textured ellipse target at ``center``, ``size``."""
    rng = np.random.default_rng(rng_seed)
    coarse = rng.integers(60, 120, (12, 16, 3)).astype(np.float64)
    frame = np.kron(coarse, np.ones((30, 30, 1)))
    yy, xx = np.mgrid[:360, :480]
    inside = ((xx - center[0]) / (size[0] / 2)) ** 2 + ((yy - center[1]) / (size[1] / 2)) ** 2 < 1
    stripes = 200 + 55 * np.sign(np.sin((xx - center[0]) / size[0] * 12))
    frame[inside] = np.stack([stripes, 40 + 0 * xx, 255 - stripes], -1)[inside]
    return frame.clip(0, 255).astype(np.uint8)


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    x0, y0 = np.maximum(a[:2], b[:2])
    x1, y1 = np.minimum(a[:2] + a[2:], b[:2] + b[2:])
    inter = max(x1 - x0, 0) * max(y1 - y0, 0)
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


def test_the_shipped_networks_follow_a_target_that_moves_and_grows():
    estimator = SiameseBoxEstimator(
        shipped_file("siamese-backbone", "nanotrack").checked_path(),
        shipped_file("siamese-head", "nanotrack").checked_path(),
        SiameseBoxConfig(siamese_size_rate=1.0),
    )
    start_center, start_size = np.array([200.0, 170.0]), np.array([60.0, 40.0])
    template = estimator.template(_scene(start_center, start_size), start_center, start_size)
    assert template.shape == (1, 48, 8, 8)
    true_center, true_size = np.array([222.0, 158.0]), np.array([72.0, 48.0])
    found = estimator.locate(_scene(true_center, true_size), start_center, start_size, template)
    # searched around the old box (IoU 0.32 with the new one), found near the new one
    truth = np.concatenate([true_center - true_size / 2, true_size])
    start = np.concatenate([start_center - start_size / 2, start_size])
    box = np.concatenate([found.center - found.raw_size / 2, found.raw_size])
    assert _iou(start, truth) < 0.4 and _iou(box, truth) > 0.75
    assert 0.5 < found.score <= 1


def test_the_search_crop_is_the_instance_multiple_of_the_template_side():
    # NanoTrack's geometry: context 0.5 (w + h) around the target; the search crop 255 / 127
    assert template_side(np.array([60.0, 40.0]), 0.5) == pytest.approx(np.sqrt(110 * 90))
    assert INSTANCE_SIZE / 127 == pytest.approx(2.008, abs=1e-3)
