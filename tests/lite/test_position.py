"""The rule by which the classifier bounds the siamese head's box (:mod:`ebmtrack.lite.position`):
its pieces against analytic values, and its effect on the decoding."""

import math

import numpy as np
import pytest

from ebmtrack.lite.position import (
    ClassifierEvidence,
    PositionRuleConfig,
    bounded_size,
    classifier_prior,
    sample_bilinear,
)
from ebmtrack.lite.result import TrackStatus
from ebmtrack.lite.siamese import SiameseBoxConfig, decode_box


def test_bilinear_sampling_is_exact_on_a_plane_and_clamped_outside():
    rows, cols = np.mgrid[0:5, 0:7]
    plane = 2.0 * cols - 3.0 * rows + 1.0
    u = np.array([0.0, 2.5, 6.0, 3.25, -4.0, 9.0])
    v = np.array([0.0, 1.5, 4.0, 0.75, 2.0, 10.0])
    expected = 2.0 * np.clip(u, 0, 6) - 3.0 * np.clip(v, 0, 4) + 1.0
    np.testing.assert_allclose(sample_bilinear(plane, u, v), expected)


def test_the_classifiers_factor_is_one_at_its_peak_and_falls_as_exp_of_the_score():
    scores = np.zeros((9, 9))
    scores[4, 6] = 1.0  # cell (row 4, column 6): crop px (96, 64) at stride 16
    scores[2, 2] = 0.5
    # frame -> crop: crop = 2 * frame + (10, -20)
    matrix = np.array([[2.0, 0.0, 10.0], [0.0, 2.0, -20.0]])
    evidence = ClassifierEvidence(scores, matrix, 16.0, TrackStatus.NORMAL)
    prior = classifier_prior(evidence, 3.0)
    points = np.array([[(96 - 10) / 2, (64 + 20) / 2], [(32 - 10) / 2, (32 + 20) / 2]])
    np.testing.assert_allclose(prior(points), [1.0, math.exp(-1.5)])
    assert classifier_prior(evidence, 0.0) is None  # the head alone


def test_a_uniform_prior_decodes_as_no_prior_and_a_peaked_one_moves_the_cell():
    rng = np.random.default_rng(0)
    cells = 16
    logits = np.zeros((2, cells, cells))
    logits[1, 8, 3] = logits[1, 8, 12] = 4.0  # two equally strong cells, off the window's centre
    sides = np.full((4, cells, cells), 20.0) + rng.uniform(0, 1, (4, cells, cells))
    config = SiameseBoxConfig(siamese_window=0.2)
    last = np.array([40.0, 40.0])
    alone = decode_box(logits, sides, last, config)
    uniform = decode_box(logits, sides, last, config, np.full((cells, cells), 0.3))
    np.testing.assert_array_equal(alone[0], uniform[0])
    for column in (3, 12):
        prior = np.full((cells, cells), 0.05)
        prior[8, column] = 1.0
        center = decode_box(logits, sides, last, config, prior)[0]
        x = (column - cells // 2) * 16.0  # the cell's point, crop px from the centre
        assert abs(center[0] - (x + (sides[2, 8, column] - sides[0, 8, column]) / 2)) < 1e-9


@pytest.mark.parametrize("status", list(TrackStatus))
def test_the_size_grows_beside_a_look_alike_only_where_allowed(status):
    last = np.array([40.0, 30.0])
    grown, shrunk = np.array([50.0, 36.0]), np.array([35.0, 33.0])
    held = PositionRuleConfig(distractor_growth=False)
    evidence = ClassifierEvidence(np.zeros((2, 2)), np.eye(2, 3), 16.0, status)
    distracted = status in (TrackStatus.HARD_NEGATIVE, TrackStatus.UNCERTAIN)
    np.testing.assert_array_equal(
        bounded_size(grown, last, evidence, held), last if distracted else grown
    )
    np.testing.assert_array_equal(
        bounded_size(shrunk, last, evidence, held), [35.0, 30.0] if distracted else shrunk
    )
    np.testing.assert_array_equal(bounded_size(grown, last, evidence, PositionRuleConfig()), grown)


@pytest.mark.parametrize(
    "head, classifier, kept",
    [(1.2, 1.05, 1.05), (1.2, 0.95, 1.0), (0.9, 0.95, 0.95), (0.97, 0.95, 0.97), (1.03, 1.05, 1.03),
     (0.9, 1.05, 1.0)],
)  # fmt: skip
def test_the_heads_change_of_scale_goes_no_further_than_the_classifiers(head, classifier, kept):
    last = np.array([40.0, 20.0])
    size = last * head * np.array([1.1, 1 / 1.1])  # the head's new aspect ratio, kept
    evidence = ClassifierEvidence(
        np.zeros((2, 2)), np.eye(2, 3), 16.0, TrackStatus.NORMAL, classifier
    )
    result = bounded_size(size, last, evidence, PositionRuleConfig())
    assert math.sqrt(result.prod() / last.prod()) == pytest.approx(kept)
    assert result[0] / result[1] == pytest.approx(size[0] / size[1])


@pytest.mark.parametrize(
    "field, value",
    [("classifier_weight", -1.0), ("classifier_weight", math.inf), ("classifier_weight", True),
     ("distractor_growth", 1), ("distractor_growth", "no")],
)  # fmt: skip
def test_the_rule_refuses_values_out_of_range(field, value):
    with pytest.raises(ValueError, match=field):
        PositionRuleConfig(**{field: value})


def _growing_target(frames: int = 16) -> tuple[list[np.ndarray], np.ndarray]:
    """A textured square growing from 40 to 64 px on a fixed textured background (uint8 RGB
    frames, 240 x 320), and its first box."""
    import cv2

    rng = np.random.default_rng(3)
    background = cv2.GaussianBlur(rng.integers(0, 255, (240, 320, 3), dtype=np.uint8), (0, 0), 3)
    pattern = rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)
    images = []
    for index in range(frames):
        side = round(40 + 24 * index / (frames - 1))
        image = background.copy()
        top, left = 120 - side // 2, 160 - side // 2
        image[top : top + side, left : left + side] = cv2.resize(
            pattern, (side, side), interpolation=cv2.INTER_NEAREST
        )
        images.append(image)
    return images, np.array([140.0, 100.0, 40.0, 40.0])


@pytest.mark.parametrize("box_mode", ["siamese", "siamese-scale"])
def test_the_runtimes_box_follows_a_target_that_grows(box_mode):
    """The rule leaves the siamese head's size free where no scale search bounds it (a scale
    of 1 passed as evidence froze it once), and bounds it where one does."""
    from ebmtrack import lite
    from ebmtrack.exports import shipped_export

    frames, box = _growing_target()
    tracker = lite.load(shipped_export("atom"), box_mode=box_mode)
    tracker.initialize(frames[0], box)
    for frame in frames[1:]:
        result = tracker.track(frame)
    assert result.box[2] > 52 and result.box[3] > 52, result.box  # the truth: 64
