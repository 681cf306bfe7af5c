"""The OpenCV-style drop-in: BGR frames in, OpenCV's return values out, the native boxes."""

import numpy as np
import pytest
import torch

import ebmtrack
from ebmtrack.models.backbones import create_backbone
from ebmtrack.tracking.atom import AtomParams, AtomTracker
from ebmtrack.tracking.base import TrackResult, TrackStatus
from ebmtrack.tracking.cv_style import OpenCVStyleTracker, opencv_style_classes
from ebmtrack.tracking.registry import tracker_names

PARAMS = AtomParams(search_size=96, precision="float32", backbone_runtime="torch", box_mode="scale")


def coloured_frames(count=5):
    """A red-and-blue target moving over a green gradient: its channel order matters."""
    yy, xx = np.mgrid[0:96, 0:128]
    frames = []
    for t in range(count):
        frame = np.stack([xx // 2, 60 + yy, np.full_like(xx, 30)], axis=2).astype(np.uint8)
        x, y = 30 + 3 * t, 30 + t
        frame[y : y + 24, x : x + 24] = (220, 40, 20)
        frame[y + 8 : y + 16, x : x + 24] = (20, 40, 220)
        frames.append(frame)
    return frames  # RGB


@pytest.fixture(scope="module")
def backbone():
    torch.manual_seed(0)
    return create_backbone("mobilenetv2", pretrained=False)


def test_bgr_frames_give_the_native_boxes_on_rgb(backbone):
    rgb = coloured_frames()
    native = AtomTracker(backbone, params=PARAMS)
    native.initialize(rgb[0], np.array([30.0, 30, 24, 24]))
    expected = [native.track(frame) for frame in rgb[1:]]
    wrapped = OpenCVStyleTracker(AtomTracker(backbone, params=PARAMS))
    wrapped.init(np.ascontiguousarray(rgb[0][:, :, ::-1]), (30, 30, 24, 24))
    assert np.isnan(wrapped.getTrackingScore())
    for frame, result in zip(rgb[1:], expected):
        ok, box = wrapped.update(np.ascontiguousarray(frame[:, :, ::-1]))
        assert ok == (result.status != TrackStatus.NOT_FOUND)
        assert box == tuple(int(round(v)) for v in result.box)
        assert all(isinstance(v, int) for v in box)
        assert wrapped.getTrackingScore() == result.score
        np.testing.assert_array_equal(wrapped.result.box, result.box)


def test_color_rgb_passes_frames_as_they_are():
    seen = []

    class Recorder:
        name = "recorder"

        def initialize(self, frame, box):
            seen.append(frame)

        def track(self, frame):
            seen.append(frame)
            return TrackResult(np.array([1.4, 2.6, 3.5, 4.0]), 0.5, TrackStatus.NOT_FOUND)

    frame = coloured_frames(1)[0]
    for color, first_pixel in (("rgb", frame[0, 0]), ("bgr", frame[0, 0, ::-1])):
        seen.clear()
        wrapped = OpenCVStyleTracker(Recorder(), color=color)
        wrapped.init(frame, (1, 2, 3, 4))
        ok, box = wrapped.update(frame)
        assert seen[0][0, 0].tolist() == first_pixel.tolist()
        assert ok is False and box == (1, 3, 4, 4) and wrapped.getTrackingScore() == 0.5
    gray = frame[:, :, 0]
    OpenCVStyleTracker(Recorder()).init(gray, (1, 2, 3, 4))
    assert seen[-1] is gray
    with pytest.raises(ValueError, match="color must be one of bgr, rgb"):
        OpenCVStyleTracker(Recorder(), color="BGR")
    with pytest.raises(ValueError, match="color must be one of"):
        ebmtrack.TrackerATOM.create(color="hsv")


def test_one_class_per_tracker_of_ours():
    classes = opencv_style_classes()
    names = {cls.tracker_name for cls in classes.values()}
    ours = {name for name in tracker_names() if name.startswith(("atom", "dimp"))}
    assert names == ours
    assert set(classes) <= set(dir(ebmtrack))
    assert ebmtrack.TrackerATOM is classes["TrackerATOM"] is opencv_style_classes()["TrackerATOM"]
    with pytest.raises(AttributeError, match="no attribute 'TrackerNone'"):
        ebmtrack.TrackerNone  # noqa: B018
    assert issubclass(ebmtrack.TrackerDiMPNCEPlus, OpenCVStyleTracker)


@pytest.mark.slow
def test_create_builds_the_registered_tracker():
    try:
        tracker = ebmtrack.TrackerATOM.create(runtime="torch", search_size=96, precision="float32")
    except FileNotFoundError as err:  # the ImageNet weights' package is missing
        pytest.skip(str(err))
    assert isinstance(tracker.tracker, AtomTracker) and tracker.tracker.params.search_size == 96
    frames = [np.ascontiguousarray(f[:, :, ::-1]) for f in coloured_frames(3)]
    tracker.init(frames[0], (30, 30, 24, 24))
    ok, box = tracker.update(frames[1])
    assert ok and abs(box[0] - 33) <= 4 and abs(box[1] - 31) <= 4
    with pytest.raises(ValueError, match="tracker 'atom' reads no model files"):
        ebmtrack.TrackerATOM.create(runtime="torch", model_dir="x")


def test_update_before_init_names_the_opencv_methods():
    """The OpenCV-style classes speak of their own methods, not the native track() /
    initialize() behind them; after init() update() works."""
    from ebmtrack.lite.cv_style import OpenCVStyleTracker as LiteStyleTracker

    class Native:
        def initialize(self, frame, box):
            pass

        def track(self, frame):
            if not hasattr(self, "started"):
                raise ValueError("track() called before initialize(frame, box)")
            return TrackResult(np.array([1.0, 2.0, 3.0, 4.0]), 0.5, TrackStatus.NORMAL)

    frame = coloured_frames(1)[0]
    for style in (OpenCVStyleTracker, LiteStyleTracker):
        wrapped = style(Native())
        with pytest.raises(ValueError, match=r"^update\(image\) called before init\(image, "):
            wrapped.update(frame)
        wrapped.tracker.started = True
        wrapped.init(frame, (1, 2, 3, 4))
        assert wrapped.update(frame) == (True, (1, 2, 3, 4))
