"""VOT-LT scores on constructed cases whose values are worked out by hand."""

import numpy as np
import pytest

from ebmtrack.data.datasets import Sequence
from ebmtrack.evaluation.longterm import (
    LongTermRun,
    determine_thresholds,
    f_score,
    frames_to_reacquire,
    precision_recall,
    score_long_term,
    track_long_term,
)
from ebmtrack.tracking.base import TrackResult, TrackStatus


def test_precision_recall_and_f_by_hand():
    overlaps = np.array([0.8, 0.6, 0.3, 0.0])
    present = np.array([True, True, False, False])
    confidence = np.array([0.9, 0.5, 0.7, 0.1])
    thresholds = np.array([np.inf, 0.8, 0.6, 0.0, -np.inf])
    precision, recall = precision_recall(overlaps, present, confidence, thresholds)
    # inf: nothing predicted. 0.8: frame 0. 0.6: frames 0 and 2 (absent: overlap 0, not 0.3).
    # 0.0 and -inf: all four.
    np.testing.assert_allclose(precision, [1.0, 0.8, 0.4, 0.35, 0.35])
    np.testing.assert_allclose(recall, [0.0, 0.4, 0.4, 0.7, 0.7])
    np.testing.assert_allclose(
        f_score(precision, recall), [0.0, 0.64 / 1.2, 0.4, 0.49 / 1.05, 0.49 / 1.05]
    )
    assert f_score(np.array([0.0]), np.array([0.0]))[0] == 0.0


def test_thresholds_are_quantiles_between_infinities():
    scores = np.arange(1000, dtype=np.float64)
    thresholds = determine_thresholds(np.append(scores, np.nan), resolution=12)
    assert len(thresholds) == 12 and thresholds[0] == np.inf and thresholds[-1] == -np.inf
    assert np.all(np.diff(thresholds) < 0)
    # VOT's picks: every len // (resolution - 2) = 100th of the decreasing scores from the 100th.
    assert thresholds[1] == 899 and thresholds[-2] == 99
    np.testing.assert_array_equal(
        determine_thresholds(np.array([0.2, 0.7])), [np.inf, 0.7, 0.2, -np.inf]
    )


def test_frames_to_reacquire_by_hand():
    present = np.array([1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 0, 1], dtype=bool)
    overlaps = np.array([0.9, 0.9, 0, 0, 0.1, 0.6, 0.7, 0, 0.8, 0.8, 0, 0.2])
    confidence = np.array([1, 1, 1, 1, 1, 0.2, 1, 1, 1, 1, 1, 1.0])
    # Return at 4: frame 5 overlaps but is below the threshold, frame 6 counts -> 2.
    # Return at 8: at once -> 0. Return at 11: never -> inf.
    assert frames_to_reacquire(overlaps, present, confidence, 0.5) == [2.0, 0.0, float("inf")]


def _sequence(name, boxes, visible):
    boxes = np.asarray(boxes, dtype=np.float64)
    return Sequence(name, tuple(f"{i}.jpg" for i in range(len(boxes))), boxes, np.asarray(visible))


def test_score_long_term_perfect_and_blind_trackers():
    truth = np.array([[10.0, 10, 20, 20]] * 10)
    truth[4:7] = np.nan
    visible = np.isfinite(truth[:, 0])
    sequence = _sequence("s", truth, visible)
    boxes = np.where(visible[:, None], truth, [[60.0, 60, 20, 20]])
    # Perfect: the true box when present, a low confidence elsewhere.
    perfect = LongTermRun(boxes, np.where(visible, 0.9, 0.1), np.array(["x"] * 10), np.ones(10))
    score = score_long_term([(sequence, perfect)])
    assert score.f_score == pytest.approx(1.0) and score.threshold == pytest.approx(0.9)
    assert score.reacquire == [0.0] and score.auc == pytest.approx(20 / 21)
    # Blind to absence: the same boxes, one confidence throughout. Frames 1-9: six present
    # with IoU 1, three absent predicted. Pr = 6/9, Re = 1, F = 0.8.
    blind = LongTermRun(boxes, np.full(10, 0.5), np.array(["x"] * 10), np.ones(10))
    score = score_long_term([(sequence, blind)])
    assert score.f_score == pytest.approx(0.8)
    # A tracker without scores (NaN) predicts at every threshold: the same numbers.
    nan = LongTermRun(boxes, np.full(10, np.nan), np.array(["x"] * 10), np.ones(10))
    assert score_long_term([(sequence, nan)]).f_score == pytest.approx(0.8)
    # Lost frames are no prediction, whatever their score: reporting lost while absent is
    # perfect too, and lost on a present frame (frame 7) costs recall: Pr 1, Re 5/6.
    statuses = np.where(visible, "normal", "lost")
    lost = LongTermRun(boxes, np.full(10, 0.5), statuses, np.ones(10))
    assert score_long_term([(sequence, lost)]).f_score == pytest.approx(1.0)
    statuses[7] = "lost"
    late = score_long_term(
        [(sequence, LongTermRun(boxes, np.full(10, 0.5), statuses, np.ones(10)))]
    )
    assert late.f_score == pytest.approx(2 * (5 / 6) / (1 + 5 / 6))
    assert late.reacquire == [1.0]
    # Curves are averaged over sequences before F: a second, all-present sequence.
    other = _sequence("o", np.array([[0.0, 0, 10, 10]] * 4), np.ones(4, dtype=bool))
    run = LongTermRun(other.ground_truth, np.full(4, 0.5), np.array(["x"] * 4), np.ones(4))
    both = score_long_term([(sequence, blind), (other, run)])
    precision, recall = (6 / 9 + 1) / 2, 1.0
    assert both.f_score == pytest.approx(2 * precision * recall / (precision + recall))
    assert [name for name, *_ in both.per_sequence] == ["s", "o"]


class _Replay:
    name = "replay"

    def __init__(self, results):
        self.results = iter(results)

    def initialize(self, frame, box):
        self.box = box

    def track(self, frame):
        return next(self.results)


def test_track_long_term_keeps_scores_and_statuses(tmp_path):
    import cv2

    paths = []
    for i in range(3):
        paths.append(tmp_path / f"{i}.png")
        cv2.imwrite(str(paths[-1]), np.zeros((20, 30, 3), np.uint8))
    sequence = Sequence("t", tuple(paths), np.array([[1.0, 1, 5, 5]] * 3))
    results = [
        TrackResult(np.array([2.0, 2, 5, 5]), 0.7, TrackStatus.NORMAL),
        TrackResult(np.array([3.0, 3, 5, 5]), 0.1, TrackStatus.LOST),
    ]
    run = track_long_term(_Replay(results), sequence)
    np.testing.assert_array_equal(run.boxes[1:], [[2, 2, 5, 5], [3, 3, 5, 5]])
    np.testing.assert_array_equal(run.scores[1:], [0.7, 0.1])
    assert list(run.statuses) == ["init", "normal", "lost"]
