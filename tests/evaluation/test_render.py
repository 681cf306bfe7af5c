import cv2
import numpy as np
import pytest
from PIL import Image

from ebmtrack.evaluation.render import (
    STATUS_COLOURS,
    GifBudget,
    GifWriter,
    Mp4Writer,
    VideoWriter,
    box_corners,
    draw_track,
)
from ebmtrack.tracking.base import TrackStatus

GREEN = np.array(STATUS_COLOURS["normal"], dtype=np.uint8)


def _is_colour(pixels: np.ndarray, colour: np.ndarray) -> np.ndarray:
    return np.all(pixels == colour, axis=-1)


def test_box_is_drawn_on_its_edge_not_inside():
    frame = np.zeros((120, 160, 3), np.uint8)
    x, y, w, h = 40, 50, 60, 30  # covers columns 40..99, rows 50..79
    image = draw_track(frame, (x, y, w, h), score=0.9, thickness=2)
    # Every pixel of the outer border row / column has the box colour...
    assert _is_colour(image[y, x : x + w], GREEN).all()
    assert _is_colour(image[y + h - 1, x : x + w], GREEN).all()
    assert _is_colour(image[y : y + h, x], GREEN).all()
    assert _is_colour(image[y : y + h, x + w - 1], GREEN).all()
    # ...the interior beyond the 2 px line keeps the frame's pixels...
    assert (image[y + 2 : y + h - 2, x + 2 : x + w - 2] == 0).all()
    # ...and nothing right of or below the box is touched (the label goes above it).
    assert (image[y:, x + w :] == 0).all()
    assert (image[y + h :, :] == 0).all()
    assert (frame == 0).all(), "the input frame must not be modified"


def test_fractional_box_covers_the_rounded_pixels():
    # x spans [10.4, 30.6): pixels 10..30 are covered more than half; y spans [10.6, 15.6).
    assert box_corners((10.4, 10.6, 20.2, 5.0), (50, 50)) == (10, 11, 30, 15)


def test_box_corners_clip_to_frame_and_reject_outside_or_nan():
    assert box_corners((-5, -5, 20, 20), (40, 60)) == (0, 0, 14, 14)
    assert box_corners((55, 5, 20, 20), (40, 60)) == (55, 5, 59, 24)
    assert box_corners((70, 5, 20, 20), (40, 60)) is None
    assert box_corners((np.nan, 5, 20, 20), (40, 60)) is None


def test_ground_truth_white_and_gray_frames_become_rgb():
    frame = np.full((60, 80), 50, np.uint8)
    image = draw_track(frame, (np.nan,) * 4, ground_truth=(10, 10, 30, 20))
    assert image.shape == (60, 80, 3)
    assert (image[10, 10:40] == 255).all() and (image[29, 10:40] == 255).all()
    assert (image[11:29, 11:39] == 50).all()
    assert not _is_colour(image, GREEN).any(), "a NaN prediction is not drawn"


def test_bad_status_or_frame_raise():
    with pytest.raises(ValueError, match="status must be one of"):
        draw_track(np.zeros((10, 10, 3), np.uint8), (1, 1, 3, 3), status="gone")
    for status in TrackStatus:  # every status a tracker reports can be drawn
        draw_track(np.zeros((10, 10, 3), np.uint8), (1, 1, 3, 3), status=status.value)
    with pytest.raises(ValueError, match="frame must be uint8"):
        draw_track(np.zeros((10, 10, 3), np.float32), (1, 1, 3, 3))


def test_mp4_round_trip(tmp_path):
    path = tmp_path / "v.mp4"
    with Mp4Writer(path, fps=10, size=(64, 48)) as writer:
        for value in range(0, 250, 50):
            writer.write(np.full((48, 64, 3), value, np.uint8))
        writer.write(np.zeros((30, 30, 3), np.uint8))  # resized to the first size
    capture = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    assert len(frames) == 6
    assert frames[0].shape == (48, 64, 3)
    # Lossy codec, but flat grey levels survive within a few units.
    assert abs(float(frames[3].mean()) - 150) < 6


def test_gif_respects_budget_and_plays_at_video_speed(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "a.gif"
    budget = GifBudget(max_side=100, colours=16, max_frames=4)
    with GifWriter(path, fps=20, total_frames=10, budget=budget) as gif:
        for _ in range(10):
            gif.write(rng.integers(0, 256, (300, 400, 3), dtype=np.uint8))
    assert gif.stride == 3  # frames 0, 3, 6, 9
    with Image.open(path) as image:
        assert image.n_frames == 4
        assert image.size == (100, 75)
        assert image.info["duration"] == 150  # 3 frames at 20 fps
        for index in range(image.n_frames):
            image.seek(index)
            assert len(image.convert("RGB").getcolors(1 << 16)) <= 16


@pytest.mark.parametrize(
    "kwargs", [{"max_side": 8}, {"colours": 1}, {"colours": 300}, {"max_frames": 0}]
)
def test_gif_budget_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        GifBudget(**kwargs)


def test_video_writer_takes_the_first_codec_it_can_encode(tmp_path):
    with VideoWriter(tmp_path / "v.mp4", 10, (64, 48), codecs=("NONE", "mp4v")) as writer:
        writer.write(np.zeros((48, 64, 3), np.uint8))
    assert writer.codec == "mp4v"
    assert "no H.264 encoder" in writer.note  # browsers do not play mp4v, and it says so
    with pytest.raises(ValueError, match="cannot write a NONE video"):
        VideoWriter(tmp_path / "w.mp4", 10, (64, 48), codecs=("NONE",))
    with VideoWriter(tmp_path / "v.avi", 10, (64, 48)) as writer:
        writer.write(np.zeros((48, 64, 3), np.uint8))
    assert writer.codec == "MJPG" and writer.note is None


def test_label_names_the_box():
    frame = np.zeros((60, 80, 3), np.uint8)
    plain = draw_track(frame, (30, 30, 20, 20), 0.5)
    labelled = draw_track(frame, (30, 30, 20, 20), 0.5, label="#2")
    assert not np.array_equal(plain, labelled)
    assert np.array_equal(plain[30:], labelled[30:])  # only the text above the box differs


def test_webm_is_vp8_and_opencv_says_nothing(tmp_path, capfd):
    with VideoWriter(tmp_path / "v.webm", 10, (64, 48)) as writer:
        for value in (0, 120, 240):
            writer.write(np.full((48, 64, 3), value, np.uint8))
    assert writer.codec == "VP80" and writer.note is None
    assert capfd.readouterr().err == ""  # FFmpeg's "tag ... is not supported" kept off stderr
    capture = cv2.VideoCapture(str(tmp_path / "v.webm"))
    frames = 0
    while capture.read()[0]:
        frames += 1
    capture.release()
    assert frames == 3
