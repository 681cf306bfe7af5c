"""Several targets in one pass: one backbone call per frame, each target's boxes as alone."""

import cv2
import numpy as np
import pytest
import torch

from ebmtrack.models.backbones import create_backbone
from ebmtrack.tracking.atom import AtomParams, AtomTracker
from ebmtrack.tracking.base import TrackResult
from ebmtrack.tracking.multi import MultiTargetTracker, split_features
from ebmtrack.tracking.opencv import OpenCVTracker

SMALL = {
    "search_size": 96,
    "precision": "float32",
    "backbone_runtime": "torch",
    "box_mode": "scale",
}
BOXES = np.array([[20.0, 24.0, 24, 20], [100, 60, 20, 24], [60, 20, 16, 16]])


@pytest.fixture(scope="module")
def backbone():
    torch.manual_seed(0)
    return create_backbone("mobilenetv2", pretrained=False)


def moving_targets(frames: int = 6) -> list[np.ndarray]:
    """Three textured patches, each moving its own way over a smooth background."""
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:120, 0:160]
    background = np.stack([xx, yy, (xx + yy) // 2], axis=2).astype(np.uint8)
    textures = [
        cv2.resize(rng.integers(0, 256, (4, 4, 3), dtype=np.uint8), (int(w), int(h)),
                   interpolation=cv2.INTER_NEAREST)
        for _, _, w, h in BOXES
    ]  # fmt: skip
    steps = [(2, 1), (-2, 1), (1, 2)]
    out = []
    for t in range(frames):
        frame = background.copy()
        for (x, y, w, h), texture, (dx, dy) in zip(BOXES.astype(int), textures, steps):
            x, y = x + dx * t, y + dy * t
            frame[y : y + h, x : x + w] = texture
        out.append(frame)
    return out


def _run_alone(backbone, params, frames, box) -> list[np.ndarray]:
    tracker = AtomTracker(backbone, params=params)
    tracker.initialize(frames[0], box)
    return [tracker.track(frame).box for frame in frames[1:]]


@pytest.mark.parametrize("interval", [pytest.param(1, marks=pytest.mark.slow), 2])
def test_each_target_gets_the_boxes_it_gets_alone(backbone, interval):
    params = AtomParams(**SMALL, scale_search_interval=interval)
    frames = moving_targets()
    multi = MultiTargetTracker(lambda: AtomTracker(backbone, params=params))
    multi.initialize(frames[0], BOXES)
    together = [multi.track(frame) for frame in frames[1:]]
    for index, box in enumerate(BOXES):
        alone = _run_alone(backbone, params, frames, box)
        mine = [results[index].box for results in together]
        np.testing.assert_allclose(np.array(mine), np.array(alone), rtol=0, atol=1e-6)


def test_one_backbone_call_per_frame_for_all_targets(backbone, monkeypatch):
    frames = moving_targets(4)
    multi = MultiTargetTracker(lambda: AtomTracker(backbone, params=AtomParams(**SMALL)))
    multi.initialize(frames[0], BOXES)
    calls, batch = [], []
    extract = multi.prototype.search.extract

    def counted(images):
        calls.append(1)
        batch.append(len(images))
        return extract(images)

    monkeypatch.setattr(multi.prototype.search, "extract", counted)
    for frame in frames[1:]:
        results = multi.track(frame)
        assert len(results) == 3 and all(isinstance(r, TrackResult) for r in results)
    assert len(calls) == 3 == multi.backbone_calls
    # Scale search: three regions per target, all in one batch.
    assert batch == [9, 9, 9]


def test_targets_keep_their_own_state(backbone):
    frames = moving_targets(3)
    multi = MultiTargetTracker(lambda: AtomTracker(backbone, params=AtomParams(**SMALL)))
    multi.initialize(frames[0], BOXES[:2])
    first, second = multi.targets
    assert first.model is not second.model and first.memory is not second.memory
    assert first.confidence_estimator is not second.confidence_estimator
    multi.track(frames[1])
    assert not np.allclose(first.center, second.center)
    assert first.frame_index == second.frame_index == 2


def test_one_target_is_the_trackers_own_track(backbone):
    params = AtomParams(**SMALL)
    frames = moving_targets(4)
    multi = MultiTargetTracker(lambda: AtomTracker(backbone, params=params))
    multi.initialize(frames[0], BOXES[0])
    together = [multi.track(frame)[0] for frame in frames[1:]]
    alone = _run_alone(backbone, params, frames, BOXES[0])
    for result, box in zip(together, alone):
        assert result.box.tolist() == box.tolist()


def test_opencv_trackers_get_one_instance_per_target():
    frames = moving_targets(3)
    multi = MultiTargetTracker(lambda: OpenCVTracker("kcf"))
    multi.initialize(frames[0], BOXES[:2])
    assert not multi.shares_backbone and multi.targets[0] is not multi.targets[1]
    results = multi.track(frames[1])
    assert len(results) == 2


def test_split_features_and_bad_boxes(backbone):
    feats = {"a": torch.arange(6.0).view(6, 1, 1, 1)}
    parts = split_features(feats, [3, 1, 2])
    assert [p["a"].flatten().tolist() for p in parts] == [[0, 1, 2], [3], [4, 5]]
    multi = MultiTargetTracker(lambda: OpenCVTracker("kcf"))
    with pytest.raises(ValueError, match=r"boxes must be \(N, 4\)"):
        multi.initialize(moving_targets(1)[0], np.zeros((2, 3)))
    with pytest.raises(ValueError, match="before initialize"):
        multi.track(moving_targets(1)[0])


def test_no_boxes_is_said_so():
    import ebmtrack

    multi = ebmtrack.load_multi_tracker("kcf")
    for empty in ([], np.zeros((0, 4))):
        with pytest.raises(ValueError, match=r"^no boxes to track: give at least one"):
            multi.initialize(moving_targets(1)[0], empty)


def test_load_multi_tracker_checks_options_first():
    import ebmtrack

    multi = ebmtrack.load_multi_tracker("kcf")
    multi.initialize(moving_targets(1)[0], BOXES)
    assert len(multi.targets) == 3
    with pytest.raises(ValueError, match="takes no option"):
        ebmtrack.load_multi_tracker("kcf", search_size=96)


@pytest.mark.slow
def test_dimp_with_its_box_head_gets_the_boxes_it_gets_alone(backbone):
    from ebmtrack.models.dimp import DiMPClassifier, DiMPConfig
    from ebmtrack.models.serialization import load_model
    from ebmtrack.tracking.dimp import DiMPParams, DiMPTracker
    from ebmtrack.weights import pack_box_head

    path = pack_box_head("mobilenetv2")
    if path is None:
        pytest.skip("the NCE+ box head does not ship with this installation")
    head = load_model(path, expected="AtomIoUNet").requires_grad_(False)
    torch.manual_seed(0)
    classifier = DiMPClassifier(DiMPConfig.for_backbone(backbone)).eval()
    params = DiMPParams(search_size=128, target_not_found_threshold=-1e9)  # every frame refines
    frames = moving_targets(4)

    def build():
        return DiMPTracker(backbone, classifier, head, params)

    multi = MultiTargetTracker(build)
    multi.initialize(frames[0], BOXES[:2])
    together = [multi.track(frame) for frame in frames[1:]]
    for index, box in enumerate(BOXES[:2]):
        alone = build()
        alone.initialize(frames[0], box)
        for results, frame in zip(together, frames[1:]):
            np.testing.assert_allclose(results[index].box, alone.track(frame).box, atol=1e-6)


def test_each_target_gets_the_confidence_it_gets_alone(backbone):
    from ebmtrack.tracking.calibrator import resolve_calibrator

    calibrator = resolve_calibrator("atom", "mobilenetv2", "atom")
    params = AtomParams(**SMALL)
    frames = moving_targets(5)
    multi = MultiTargetTracker(lambda: AtomTracker(backbone, params=params, calibrator=calibrator))
    multi.initialize(frames[0], BOXES[:2])
    together = [multi.track(frame) for frame in frames[1:]]
    for k, box in enumerate(BOXES[:2]):
        alone = AtomTracker(backbone, params=params, calibrator=calibrator)
        alone.initialize(frames[0], box)
        confidences = [alone.track(frame).confidence for frame in frames[1:]]
        # The estimator's peak history is each target's own, not shared between copies.
        assert [results[k].confidence for results in together] == confidences
        assert all(0 <= c <= 1 for c in confidences)


def test_long_term_targets_share_the_backbone_call_and_each_is_lost_on_its_own(
    backbone, monkeypatch
):
    from ebmtrack.tracking.atom.longterm import AtomLTTracker
    from ebmtrack.tracking.atom.longterm_params import AtomLTParams

    params = AtomLTParams(**SMALL, lost_crops=3)
    frames = moving_targets(4)
    multi = MultiTargetTracker(lambda: AtomLTTracker(backbone, params=params))
    multi.initialize(frames[0], BOXES[:2])
    lost, kept = multi.targets
    lost.mode.lost = True  # the long-term mode takes the first target's next frame
    batches = []
    extract = multi.prototype.search.extract

    def counted(images):
        batches.append(len(images))
        return extract(images)

    monkeypatch.setattr(multi.prototype.search, "extract", counted)
    results = [multi.track(frame) for frame in frames[1:]]
    assert len(batches) == 3 == multi.backbone_calls
    # The lost target's last position and two whole-frame tiles, beside the other's 3 scales.
    assert batches[0] == 3 + 3 and not kept.mode.lost
    alone = AtomLTTracker(backbone, params=params)
    alone.initialize(frames[0], BOXES[1])
    for together, frame in zip(results, frames[1:]):
        np.testing.assert_allclose(together[1].box, alone.track(frame).box, rtol=0, atol=1e-6)
