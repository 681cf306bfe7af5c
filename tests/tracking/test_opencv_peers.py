"""OpenCV peers behind the Tracker interface, and the tracker registry."""

import numpy as np
import pytest

from ebmtrack.tracking.base import Tracker, TrackStatus
from ebmtrack.tracking.opencv import OPENCV_TRACKERS, OpenCVTracker, resolve_model_files
from ebmtrack.tracking.registry import (
    TRACKERS,
    TrackerVariant,
    accepted_options,
    create_tracker,
    register_tracker,
)


def _translating_square(num_frames=25, step=(3, 2), size=24):
    """Frames (H, W, 3) of a textured square moving ``step`` px per frame on a smooth
    background, and its true boxes."""
    rng = np.random.default_rng(1)
    texture = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
    yy, xx = np.mgrid[0:120, 0:160]
    background = np.stack([xx, yy, (xx + yy) // 2], axis=2).astype(np.uint8)
    frames, boxes = [], []
    for k in range(num_frames):
        x, y = 20 + step[0] * k, 30 + step[1] * k
        frame = background.copy()
        frame[y : y + size, x : x + size] = texture
        frames.append(frame)
        boxes.append([x, y, size, size])
    return frames, np.array(boxes, dtype=float)


def _iou(a, b):
    iw = max(0.0, min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1]))
    inter = iw * ih
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


@pytest.mark.parametrize(
    "kind,gray,step,min_iou",
    [
        ("csrt", False, (3, 2), 0.8),
        ("csrt", True, (3, 2), 0.8),
        # OpenCV 5's KCF reports the previous frame's position (a one-frame lag), so it keeps
        # up only with slow motion: 1 px per frame costs IoU 529 / 623.
        ("kcf", False, (1, 1), 0.8),
    ],
)
def test_peer_follows_a_translating_textured_square(kind, gray, step, min_iou):
    frames, boxes = _translating_square(step=step)
    if gray:
        frames = [f.mean(axis=2).astype(np.uint8) for f in frames]
    tracker = create_tracker(kind)
    assert isinstance(tracker, Tracker)
    tracker.initialize(frames[0], boxes[0])
    ious = []
    for frame, box in zip(frames[1:], boxes[1:]):
        result = tracker.track(frame)
        assert result.status == TrackStatus.NORMAL
        ious.append(_iou(result.box, box))
    assert min(ious) > min_iou, ious


class _FailingCV:
    def update(self, frame):
        return False, (0, 0, 0, 0)


def test_failure_keeps_the_last_box_with_status_not_found():
    frames, boxes = _translating_square(num_frames=3)
    tracker = OpenCVTracker("kcf")
    tracker.initialize(frames[0], boxes[0])
    good = tracker.track(frames[1])
    tracker._tracker = _FailingCV()  # OpenCV reporting a lost target
    lost = tracker.track(frames[2])
    assert lost.status == TrackStatus.NOT_FOUND
    np.testing.assert_array_equal(lost.box, good.box)


def test_dnn_peers_name_their_missing_model_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nanotrack_backbone_sim.onnx"):
        OpenCVTracker("nanotrack")
    with pytest.raises(FileNotFoundError, match=r"net: .*vitTracker\.onnx"):
        OpenCVTracker("vit", model_dir=tmp_path)
    (tmp_path / "vitTracker.onnx").write_bytes(b"not the model")
    with pytest.raises(ValueError, match="sha256"):
        resolve_model_files("vit", tmp_path)
    assert resolve_model_files("vit", net=tmp_path / "vitTracker.onnx") == {
        "net": str(tmp_path / "vitTracker.onnx")
    }
    with pytest.raises(ValueError, match="takes no model files"):
        OpenCVTracker("csrt", net="x.onnx")


def test_registry_names_and_errors():
    assert set(OPENCV_TRACKERS) <= set(TRACKERS)
    assert "model_dir" in accepted_options("vit")
    with pytest.raises(ValueError, match="valid trackers: .*csrt"):
        create_tracker("goturn")
    with pytest.raises(ValueError, match="already registered"):
        register_tracker("kcf", OpenCVTracker)
    with pytest.raises(ValueError, match="lower-case"):
        register_tracker("My Tracker", OpenCVTracker)
    register_tracker("kcf-copy", OpenCVTracker, replace=True)
    lazy = register_tracker(  # imported on first use
        "lazy-peer", TrackerVariant("ebmtrack.tracking.opencv:OpenCVTracker")
    )
    try:
        assert create_tracker("kcf-copy", kind="kcf").name == "kcf"
        assert create_tracker("lazy-peer", kind="mil").name == "mil"
        assert lazy.build_function is OpenCVTracker
    finally:
        del TRACKERS["kcf-copy"], TRACKERS["lazy-peer"]


@pytest.mark.parametrize("kind", ["csrt", "kcf"])
def test_a_peer_without_a_score_reports_none(kind):
    # OpenCV answers -1 where a tracker computes no score; that is no score (NaN, null in jsonl).
    frames, boxes = _translating_square(num_frames=3)
    tracker = OpenCVTracker(kind)
    tracker.initialize(frames[0], boxes[0])
    result = tracker.track(frames[1])
    assert np.isnan(result.score)
