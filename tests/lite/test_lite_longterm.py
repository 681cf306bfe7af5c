"""The long-term mode in the torch-free runtime (``atom-lt``'s shipped export): lost while the
target is away, re-acquired where it comes back, its models frozen and its cost bounded while
lost, the same boxes and statuses as the torch tracker; its decisions (:mod:`ebmtrack.lite.
longterm`) one definition for both runtimes."""

import importlib
import math

import numpy as np
import pytest

import ebmtrack
from ebmtrack.lite.longterm import (
    LOST_CONFIDENCE,
    LongTermParams,
    LostState,
    is_lost,
    long_term_params,
    reacquire,
)
from ebmtrack.lite.result import TrackResult, TrackStatus
from ebmtrack.lite.siamese import SiameseFrame

BEFORE, ABSENT, AFTER = 8, 6, 8


def _texture(rng, height, width, cell):
    small = rng.integers(0, 256, (height // cell + 1, width // cell + 1, 3), dtype=np.uint8)
    return np.kron(small, np.ones((cell, cell, 1), dtype=np.uint8))[:height, :width]


def jump_sequence(size=(240, 320), side=40):
    """A textured square on a calmer background near the top-left corner, absent for ``ABSENT``
    frames, then back near the bottom-right corner, far outside the search region it left.
    Frames (uint8 RGB) and boxes (NaN while absent)."""
    rng = np.random.default_rng(7)
    height, width = size
    background = _texture(rng, height, width, 40) // 4 + 90
    target = _texture(rng, side, side, 8)
    frames, boxes = [], []
    for t in range(BEFORE + ABSENT + AFTER):
        frame = background.copy()
        if BEFORE <= t < BEFORE + ABSENT:
            boxes.append(np.full(4, np.nan))
        else:
            x, y = (30 + 2 * t, 40 + t) if t < BEFORE else (width - 70 + t - BEFORE, height - 70)
            frame[y : y + side, x : x + side] = target
            boxes.append(np.array([x, y, side, side], dtype=np.float64))
        frames.append(frame)
    return frames, boxes


def _iou(a, b) -> float:
    x1, y1 = np.maximum(a[:2], b[:2])
    x2, y2 = np.minimum(a[:2] + a[2:], b[:2] + b[2:])
    inter = max(x2 - x1, 0) * max(y2 - y1, 0)
    return float(inter / (a[2] * a[3] + b[2] * b[3] - inter))


def _models(tracker):
    state = tracker._state
    memory = state.memory
    return [memory.samples, memory.weights, memory.labels, state.filter, state.projection,
            state.template, np.array([memory.num_stored])]  # fmt: skip


def test_the_torch_mode_reads_the_runtimes_decisions():
    """tracking.longterm names lite.longterm's pieces, not copies of them (the refactor that
    moved them left atom-lt's boxes bit-identical)."""
    pytest.importorskip("torch")
    lite = importlib.import_module("ebmtrack.lite.longterm")
    torch_side = importlib.import_module("ebmtrack.tracking.longterm")
    for name in ("LongTermParams", "LostSearch", "LostState", "is_found", "is_lost"):
        assert getattr(torch_side, name) is getattr(lite, name), name


@pytest.mark.slow
def test_the_runtime_is_lost_while_the_target_is_away_frozen_and_bounded_then_reacquires():
    frames, boxes = jump_sequence()
    tracker = ebmtrack.load_tracker("atom-lt")
    assert isinstance(tracker, ebmtrack.lite.LiteTracker) and tracker.one_pass
    crops = tracker.long_term.lost_crops
    calls = []
    features = tracker.siamese.features

    def counted(images):
        calls.append(len(images))
        return features(images)

    tracker.siamese.features = counted
    tracker.initialize(frames[0], boxes[0])
    results, frozen = [], None
    for index in range(1, len(frames)):
        calls.clear()
        was_lost = tracker._state.lost.lost
        results.append(tracker.track(frames[index]))
        if was_lost:  # the lost frame's backbone passes, each of one crop
            assert 1 <= len(calls) <= crops and set(calls) == {1}, calls
        if tracker._state.lost.lost:
            frozen = frozen or [array.copy() for array in _models(tracker)]
            for before, now in zip(frozen, _models(tracker), strict=True):
                np.testing.assert_array_equal(before, now)
    statuses = [result.status for result in results]
    back = BEFORE + ABSENT
    assert statuses[BEFORE - 1 : back - 1] == [TrackStatus.LOST] * ABSENT
    last = results[BEFORE - 2].box
    for result in results[BEFORE - 1 : back - 1]:  # the last box while lost, flagged
        np.testing.assert_array_equal(result.box, last)
        assert result.confidence == LOST_CONFIDENCE
    assert all(s != TrackStatus.LOST for s in statuses[back - 1 :])
    ious = [_iou(results[i - 1].box, boxes[i]) for i in range(back, len(frames))]
    assert min(ious) > 0.7, ious  # re-acquired on the frame it came back, and followed
    assert tracker._state.memory.num_stored > frozen[-1][0]  # updates resumed


@pytest.mark.slow
def test_the_runtime_and_the_torch_tracker_agree():
    """Free-running on the jump sequence: the same statuses, boxes within 0.1 px."""
    pytest.importorskip("torch")
    frames, boxes = jump_sequence()
    runs = []
    for runtime in ("lite", "torch"):
        tracker = ebmtrack.load_tracker("atom-lt", runtime=runtime)
        tracker.initialize(frames[0], boxes[0])
        runs.append([tracker.track(frame) for frame in frames[1:]])
    ours, theirs = runs
    assert [r.status for r in ours] == [r.status for r in theirs]
    assert TrackStatus.LOST in {r.status for r in ours}
    mine, reference = (np.array([r.box for r in run]) for run in runs)
    np.testing.assert_allclose(mine, reference, atol=0.1)


def _map(peak, at=(3, 3), size=8):
    scores = np.zeros((size, size), np.float32)
    scores[at] = peak
    return scores


def test_a_candidate_is_taken_where_the_classifier_passes_and_the_head_confirms():
    params = LongTermParams(
        redetect_threshold=0.5, redetect_near_threshold=0.3, lost_siamese_threshold=0.6
    )
    matrices = [np.array([[1.0, 0, -10 * i], [0, 1.0, 0]]) for i in range(3)]  # crop i at x 10i
    # region 1 passes the classifier best, region 2 too, region 0 the near bar only
    scores = np.stack([_map(0.35), _map(0.9), _map(0.7)])
    heads = {1: 0.2, 2: 0.95, 0: 0.99}
    asked = []

    def decode(index, point):
        asked.append(index)
        return SiameseFrame(point + 1.0, np.array([5.0, 6.0]), np.array([5.0, 6.0]), heads[index])

    lost = LostState.of(params)
    lost.lost = True
    score, found = reacquire(lost, params, scores, 1, 16, matrices, decode)
    assert asked == [1, 2]  # the best peak first; the head refused it
    assert found is not None and not lost.lost and score == pytest.approx(0.7)
    np.testing.assert_allclose(found.center, [3 * 16 + 20 + 1, 3 * 16 + 1])
    np.testing.assert_allclose(found.size, [5, 6])
    heads[2] = 0.1  # no far candidate confirmed: the last position's, on its lower bar
    lost.lost = True
    score, found = reacquire(lost, params, scores, 1, 16, matrices, decode)
    assert found is not None and score == pytest.approx(0.35)
    heads[0] = 0.5  # none confirmed: still lost, the best peak reported
    lost.lost = True
    score, found = reacquire(lost, params, scores, 1, 16, matrices, decode)
    assert found is None and lost.lost and score == pytest.approx(0.9)
    # threshold 0: the head is not read as evidence (its box is still taken)
    plain = LongTermParams(redetect_threshold=0.5)
    _, found = reacquire(LostState.of(plain), plain, scores, 1, 16, matrices, decode)
    assert found is not None and found.score == pytest.approx(0.9)


def test_lost_reads_the_classifier_or_the_head():
    normal = TrackResult(np.array([0.0, 0, 5, 5]), 0.9, TrackStatus.NORMAL)
    missing = TrackResult(np.array([0.0, 0, 5, 5]), 0.1, TrackStatus.NOT_FOUND)
    assert is_lost(missing) and is_lost(missing, 0.99, 0.5)
    assert is_lost(normal, 0.3, 0.5) and not is_lost(normal, 0.7, 0.5)
    assert not is_lost(normal, 0.3, 0.0)  # 0: the head unread
    assert not is_lost(normal, math.nan, 0.5)  # no head decoded: no evidence


def test_the_export_runs_the_mode_when_its_params_hold_all_of_it():
    assert long_term_params({"seed": 0}) is None
    fields = {"lost_after": 2, "redetect_threshold": 0.4, "redetect_near_threshold": None,
              "lost_crops": 3, "tile_overlap": 0.25, "lost_siamese_threshold": 0.5}  # fmt: skip
    assert long_term_params(fields) == LongTermParams(**fields)
    with pytest.raises(ValueError, match="lacks lost_siamese_threshold"):
        long_term_params({k: v for k, v in fields.items() if k != "lost_siamese_threshold"})
    with pytest.raises(ValueError, match="needs one backbone pass"):
        ebmtrack.load_tracker("atom-lt", classifier_features="backbone", lost_siamese_threshold=0.5)


def test_atom_lt_reports_atoms_calibrated_confidence_while_tracking():
    # the same classifier and box while tracking: atom's calibrator, the same confidences
    from ebmtrack.evaluation.demo import demo_sequence

    clip = demo_sequence(6)
    results = {}
    for name in ("atom", "atom-lt"):
        tracker = ebmtrack.load_tracker(name)
        tracker.initialize(clip.frame(0), clip.init_box)
        results[name] = [tracker.track(clip.frame(i)) for i in range(1, 6)]
    assert all(r.status != TrackStatus.LOST for r in results["atom-lt"])
    confidences = [r.confidence for r in results["atom-lt"]]
    assert all(0.0 <= c <= 1.0 for c in confidences)
    assert confidences == [r.confidence for r in results["atom"]]
