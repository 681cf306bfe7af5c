"""Look-alike sequences: copies of the target pass near it and behind it, inside the frame, and
one seed builds one sequence."""

import math
import pickle
from pathlib import Path

import cv2
import numpy as np
import pytest

from ebmtrack.data.datasets import load_otb
from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.data.lookalike import (
    WOBBLE,
    LookalikeSequence,
    lookalike,
    lookalike_set,
    target_distance,
)
from ebmtrack.evaluation.metrics import box_iou

CLIPS = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "train" / "clips"
SIZE = (200, 160)  # (W, H)
BOX = (20, 16)  # the target's (w, h)


def _host_folder(root: Path, name: str, centre: tuple[float, float], frames: int = 40) -> None:
    """An OTB-layout sequence: a smooth textured background and a textured ellipse of size
    ``BOX`` circling ``centre`` (x, y) by 8 px, its box in ``groundtruth_rect.txt``."""
    rng = np.random.default_rng(len(name))
    width, height = SIZE
    background = cv2.resize(rng.uniform(40, 200, (12, 15, 3)), SIZE, interpolation=cv2.INTER_CUBIC)
    texture = cv2.resize(rng.uniform(0, 255, (4, 5, 3)), BOX, interpolation=cv2.INTER_CUBIC)
    (root / name / "img").mkdir(parents=True)
    lines = []
    for i in range(frames):
        angle = 2 * math.pi * i / frames
        cx, cy = centre[0] + 8 * math.cos(angle), centre[1] + 8 * math.sin(angle)
        x, y = round(cx - BOX[0] / 2), round(cy - BOX[1] / 2)
        image = background.copy()
        region = image[y : y + BOX[1], x : x + BOX[0]]
        mask = np.zeros(BOX[::-1], np.uint8)
        cv2.ellipse(mask, (BOX[0] // 2, BOX[1] // 2), (BOX[0] // 2, BOX[1] // 2), 0, 0, 360, 1, -1)
        region[mask > 0] = texture[mask > 0]
        cv2.imwrite(
            str(root / name / "img" / f"{i + 1:04d}.png"), np.clip(image, 0, 255).astype(np.uint8)
        )
        lines.append(f"{x},{y},{BOX[0]},{BOX[1]}")
    (root / name / "groundtruth_rect.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    root = tmp_path_factory.mktemp("otb")
    _host_folder(root, "middle", (100, 80))
    _host_folder(root, "corner", (20, 18))
    return {s.name: s for s in load_otb(root)}


def test_same_seed_same_frames_other_seed_other(hosts):
    host = hosts["middle"]
    one, two, other = lookalike(host, 3), lookalike(host, 3), lookalike(host, 4)
    np.testing.assert_array_equal(one.distractors, two.distractors)
    np.testing.assert_array_equal(one.sources, two.sources)
    for index in (0, 17, 39):
        np.testing.assert_array_equal(one.frame(index), two.frame(index))
    assert not np.allclose(one.distractors, other.distractors)
    assert any(not np.array_equal(one.frame(i), other.frame(i)) for i in (0, 17, 39))


def test_ground_truth_frames_and_name_are_the_host_s(hosts):
    host = hosts["middle"]
    sequence = lookalike(host, 0, copies=3)
    assert isinstance(sequence, LookalikeSequence) and sequence.name == "middle-lookalike"
    assert sequence.host == "middle" and sequence.frame_size == SIZE
    np.testing.assert_array_equal(sequence.ground_truth, host.ground_truth)
    assert sequence.frames == host.frames and len(sequence) == len(host)
    assert sequence.annotated().all()
    assert sequence.distractors.shape == (len(host), 3, 4)
    assert sequence.sources.shape == (len(host), 3) and sequence.scales.shape == (3,)


def test_target_stays_on_top_and_copies_are_pasted(hosts):
    host = hosts["middle"]
    sequence = lookalike(host, 1, copies=3)
    for index in range(len(host)):
        frame, original = sequence.frame(index), host.frame(index)
        x, y, w, h = sequence.ground_truth[index].astype(int)
        # The middle half of the target's box keeps the host's pixels exactly.
        inner = np.s_[y + h // 4 : y + h - h // 4, x + w // 4 : x + w - w // 4]
        np.testing.assert_array_equal(frame[inner], original[inner])
        # Copies changed the frame where they are, away from the target.
        for box in sequence.distractors[index]:
            if target_distance(box, sequence.ground_truth[index]) > 1.5:
                cx, cy = (box[:2] + box[2:] / 2).astype(int)
                assert np.abs(frame[cy, cx].astype(int) - original[cy, cx]).max() > 0


def test_a_copy_is_the_target_from_another_frame_resized(hosts):
    host = hosts["middle"]
    sequence = lookalike(host, 2, copies=1, lag=(5, 5))
    frames = np.arange(len(host))
    assert np.all(sequence.sources[:, 0] != frames)
    # A lag of 5, reflected at the ends.
    assert np.all(np.abs(sequence.sources[5:-5, 0] - frames[5:-5]) == 5)
    index = int(np.argmax(target_distance(sequence.distractors[:, 0], sequence.ground_truth)))
    source = sequence.sources[index, 0]
    box, truth = sequence.distractors[index, 0], host.ground_truth[source]
    np.testing.assert_allclose(box[2:], sequence.scales[0] * truth[2:])
    assert 0.8 <= sequence.scales[0] <= 1.25
    # The copy's middle is the source frame's target, resized (bilinear, so not to the bit).
    x, y, w, h = np.round(truth).astype(int)
    expected = host.frame(source)[y : y + h, x : x + w]
    x, y, w, h = np.round(box).astype(int)
    pasted = cv2.resize(sequence.frame(index)[y : y + h, x : x + w], expected.shape[1::-1])
    h, w = expected.shape[:2]
    core = np.s_[h // 4 : -(h // 4), w // 4 : -(w // 4)]
    assert np.abs(pasted[core].astype(int) - expected[core]).mean() < 12


def test_copies_start_near_cross_the_target_and_stay_near(hosts):
    host = hosts["middle"]
    for seed in range(5):
        sequence = lookalike(host, seed, copies=3)
        boxes, truth = sequence.distractors, sequence.ground_truth[:, None]
        distance = target_distance(boxes, truth)  # (N, copies)
        # A resting point 1-2.5 target sizes away, plus the random walk.
        wobble = math.sqrt(2) * WOBBLE
        assert np.all((distance[0] >= 1.0 - wobble) & (distance[0] <= 2.5 + wobble))
        assert distance.max() <= 2.5 + wobble
        # Every copy passes across the target: its boxes overlap, its centre within one size.
        assert np.all(distance.min(axis=0) < 1.0)
        for copy in range(boxes.shape[1]):
            assert box_iou(boxes[:, copy], truth[:, 0]).max() > 0
            offset = boxes[:, copy, :2] + boxes[:, copy, 2:] / 2 - truth[:, 0, :2]
            offset -= truth[:, 0, 2:] / 2
            assert (offset @ offset[0]).min() < 0  # on the far side at some frame


def test_copies_stay_inside_the_frame(hosts):
    width, height = SIZE
    for name in ("corner", "middle"):
        sequence = lookalike(hosts[name], 0, copies=3, distance=(2.0, 2.5))
        boxes = sequence.distractors
        assert np.all(boxes[..., :2] >= -1e-9)
        assert np.all(boxes[..., 0] + boxes[..., 2] <= width + 1e-9)
        assert np.all(boxes[..., 1] + boxes[..., 3] <= height + 1e-9)


def test_lookalike_set_and_pickling(hosts):
    built = lookalike_set([hosts["middle"], hosts["corner"]], seed=2, copies=1)
    assert [s.name for s in built] == ["middle-lookalike", "corner-lookalike"]
    np.testing.assert_array_equal(
        built[1].distractors, lookalike(hosts["corner"], 2001, copies=1).distractors
    )
    copy = pickle.loads(pickle.dumps(built[0]))
    assert isinstance(copy, LookalikeSequence)
    np.testing.assert_array_equal(copy.distractors, built[0].distractors)
    np.testing.assert_array_equal(copy.frame(7), built[0].frame(7))


def test_bad_input_is_refused(hosts):
    host = hosts["middle"]
    with pytest.raises(ValueError, match="copies"):
        lookalike(host, 0, copies=0)
    with pytest.raises(ValueError, match="distance"):
        lookalike(host, 0, distance=(2.0, 1.0))
    broken = LookalikeSequence(
        name="gaps", frames=host.frames, ground_truth=np.full((len(host), 4), np.nan)
    )
    with pytest.raises(ValueError, match="annotated"):
        lookalike(broken, 0)


def test_on_a_training_pack_clip():
    if not (CLIPS / "Dog").is_dir():
        pytest.skip(f"{CLIPS} is absent")
    host = next(s for s in load_folder(CLIPS) if s.name == "Dog")
    sequence = lookalike(host, 0)
    height, width = host.frame(0).shape[:2]
    assert sequence.frame(25).shape == (height, width, 3)
    np.testing.assert_array_equal(sequence.ground_truth, host.ground_truth)
    distance = target_distance(sequence.distractors, sequence.ground_truth[:, None])
    assert np.all(distance.min(axis=0) < 1.0)
