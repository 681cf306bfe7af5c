import math

import numpy as np
import pytest
import torch

from ebmtrack.data.processing import DiMPProcessing
from ebmtrack.data.sampler import FrameSet, TrackingFrameSets, choose_frame_sets


class IndexedSequence:
    """Frames whose pixels hold their own index, boxes whose x does too."""

    def __init__(self, name, visible):
        self.name = name
        self.visible = np.asarray(visible, dtype=bool)
        n = len(self.visible)
        boxes = np.stack([np.arange(n), np.zeros(n), np.full(n, 5), np.full(n, 5)], 1)
        self.ground_truth = boxes.astype(float)

    def __len__(self):
        return len(self.visible)

    def frame(self, index):
        return np.full((2, 2, 3), index, dtype=np.uint8)

    def annotated(self):
        return self.visible.copy()


def videos(count=4, length=120, seed=0):
    rng = np.random.default_rng(seed)
    return [IndexedSequence(f"v{k}", rng.random(length) < 0.5) for k in range(count)]


def test_frame_sets_are_causal_visible_and_within_the_gap():
    rng = np.random.default_rng(0)
    for _ in range(400):
        usable = rng.random(int(rng.integers(2, 150))) < 0.4
        usable[rng.integers(len(usable))] = True
        gap = int(rng.integers(1, 40))
        train, test = choose_frame_sets(usable, 3, 2, gap, rng)
        assert len(train) == 3 and len(test) == 2
        assert all(usable[i] for i in train + test)
        base = train[0]
        if len(set(train + test)) == 1:  # fallback: no usable frame within the gap after any
            after = np.flatnonzero(usable)
            assert np.all(np.diff(after) > gap)
            continue
        assert all(base - gap <= i <= base for i in train)
        assert all(base < i <= base + gap for i in test)


def test_a_still_image_repeats_its_frame_and_the_window_is_covered():
    rng = np.random.default_rng(1)
    assert choose_frame_sets(np.array([True]), 3, 3, 30, rng) == ((0,) * 3, (0,) * 3)
    usable = np.ones(400, dtype=bool)
    draws = [choose_frame_sets(usable, 2, 1, 10, rng) for _ in range(3000)]
    before = {tr[1] - tr[0] for tr, _ in draws}
    after = {te[0] - tr[0] for tr, te in draws}
    assert before == set(range(-10, 1)) and after == set(range(1, 11))
    with pytest.raises(ValueError, match="no usable frame"):
        choose_frame_sets(np.zeros(5, dtype=bool), 3, 3, 30, rng)


def test_samples_are_reproducible_per_index_and_read_from_the_right_frames():
    data = [videos()]
    sets = TrackingFrameSets(data, num_samples=50, max_gap=15, seed=3)
    again = TrackingFrameSets(data, num_samples=50, max_gap=15, seed=3)
    other_seed = TrackingFrameSets(data, num_samples=50, max_gap=15, seed=4)
    drawn = [sets[i] for i in range(50)]
    # Any order, any instance: sample i is the same.
    for index in reversed(range(50)):
        a, b = drawn[index], again[index]
        assert (a.sequence, a.train_indices, a.test_indices) == (
            b.sequence,
            b.train_indices,
            b.test_indices,
        )
    keys = {(s.sequence, s.train_indices, s.test_indices) for s in drawn}
    assert len(keys) > 45  # different indices give different samples
    assert any(
        (other_seed[i].sequence, other_seed[i].train_indices) != (s.sequence, s.train_indices)
        for i, s in enumerate(drawn)
    )
    for sample in drawn:
        assert isinstance(sample, FrameSet)
        sequence = next(v for v in data[0] if v.name == sample.sequence)
        for frames, boxes, indices in (
            (sample.train_frames, sample.train_boxes, sample.train_indices),
            (sample.test_frames, sample.test_boxes, sample.test_indices),
        ):
            assert [f[0, 0, 0] for f in frames] == list(indices)
            assert boxes[:, 0].tolist() == list(indices)
            assert all(sequence.visible[i] for i in indices)
    with pytest.raises(IndexError):
        sets[50]
    with pytest.raises(ValueError, match="num_test_frames"):
        TrackingFrameSets(data, num_test_frames=0)


def target_frame(box, size=(240, 320)):
    """A black frame with the box (x, y, w, h, integers) white."""
    frame = np.zeros((*size, 3), dtype=np.uint8)
    x, y, w, h = box
    frame[y : y + h, x : x + w] = 255
    return frame


def test_processing_puts_each_box_on_the_target_in_its_crop():
    boxes = [(100, 80, 40, 30), (120, 90, 36, 28), (90, 100, 44, 32), (130, 70, 40, 30)]
    frame_set = FrameSet(
        train_frames=[target_frame(b) for b in boxes[:2]],
        train_boxes=np.array(boxes[:2], dtype=float),
        test_frames=[target_frame(b) for b in boxes[2:]],
        test_boxes=np.array(boxes[2:], dtype=float),
        sequence="toy",
        train_indices=(0, 1),
        test_indices=(2, 3),
    )
    processing = DiMPProcessing(output_size=160, grayscale_probability=0.0, brightness_jitter=0.0)
    sample = processing(frame_set, np.random.default_rng(5))
    assert sample["train_images"].shape == (2, 3, 160, 160)
    assert sample["test_boxes"].shape == (2, 4)
    for which in ("train", "test"):
        for image, box in zip(sample[f"{which}_images"], sample[f"{which}_boxes"], strict=True):
            x, y, w, h = box.tolist()
            inside = image[:, math.ceil(y) + 1 : int(y + h) - 1, math.ceil(x) + 1 : int(x + w) - 1]
            assert inside.min() > 250  # the whole inner box is the target
            assert image.float().mean() / 255 == pytest.approx(w * h / 160**2, rel=0.15)


def test_without_jitter_the_target_is_centred_at_a_fifth_of_the_crop():
    box = np.array([100.0, 80.0, 40.0, 30.0])
    frame_set = FrameSet(
        [target_frame((100, 80, 40, 30))], box[None], [], np.zeros((0, 4)), "toy", (0,), ()
    )
    processing = DiMPProcessing(center_jitter_factor=(0.0, 0.0), scale_jitter_factor=(0.0, 0.0))
    sample = processing(frame_set, np.random.default_rng(0))
    x, y, w, h = sample["train_boxes"][0].tolist()
    # Crop side 5 sqrt(40 * 30) = 173.2 pixels (not rounded, as the trackers) resized to 288.
    scale = 288 / (5 * math.sqrt(1200))
    assert (x + w / 2, y + h / 2) == pytest.approx((144, 144), abs=1e-3)
    assert (w, h) == pytest.approx((40 * scale, 30 * scale), rel=1e-6)
    assert sample["test_images"].shape == (0, 3, 288, 288)


@pytest.mark.slow
def test_processing_is_a_function_of_the_generator():
    frame_set = TrackingFrameSets([videos()], num_samples=4, seed=0)[0]
    frame_set = FrameSet(
        [target_frame((100, 80, 40, 30))] * 3,
        np.array([[100, 80, 40, 30]] * 3, float),
        [target_frame((104, 82, 40, 30))] * 3,
        np.array([[104, 82, 40, 30]] * 3, float),
        frame_set.sequence,
        frame_set.train_indices,
        frame_set.test_indices,
    )
    first = DiMPProcessing()(frame_set, np.random.default_rng(9))
    second = DiMPProcessing()(frame_set, np.random.default_rng(9))
    for key in first:
        assert torch.equal(first[key], second[key])
    # Test frames are jittered more than training frames: their targets sit further off-centre.
    offsets = {
        which: np.mean(
            [
                np.hypot(*(np.array(b[:2]) + np.array(b[2:]) / 2 - 144))
                for seed in range(40)
                for b in DiMPProcessing()(frame_set, np.random.default_rng(seed))[
                    f"{which}_boxes"
                ].tolist()
            ]
        )
        for which in ("train", "test")
    }
    assert offsets["test"] > offsets["train"] > 0
    with pytest.raises(ValueError, match="center_jitter_factor"):
        DiMPProcessing(center_jitter_factor=(1.0,))
