import numpy as np
import pytest

from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequence, SyntheticSequences

SMALL = SyntheticConfig(num_frames=12, frame_size=(96, 128))


def test_same_seed_same_sequence_and_different_index_differs():
    first, again = SyntheticSequences(5, SMALL, seed=3)[2], SyntheticSequences(5, SMALL, seed=3)[2]
    np.testing.assert_array_equal(first.ground_truth, again.ground_truth)
    np.testing.assert_array_equal(first.visible, again.visible)
    for index in (0, 7, 11):
        np.testing.assert_array_equal(first.frame(index), again.frame(index))
    other = SyntheticSequences(5, SMALL, seed=3)[1]
    assert not np.array_equal(first.frame(0), other.frame(0))
    assert first.name != other.name and len(first) == 12


@pytest.mark.parametrize("index", range(6))
def test_box_is_the_tight_box_of_the_rendered_target(index):
    config = SyntheticConfig(
        num_frames=30, frame_size=(120, 160), num_distractors=(0, 0), num_occluders=(0, 0)
    )
    sequence = SyntheticSequences(6, config, seed=11)[index]
    for t in (0, 14, 29):
        frame, background = sequence.frame(t), sequence.background(t)
        assert frame.shape == (120, 160, 3) and frame.dtype == np.uint8
        rows, cols = np.nonzero(np.any(frame != background, axis=2))
        x, y, w, h = sequence.ground_truth[t]
        # Changed pixels lie inside the box (pixel c covers [c, c + 1)) and reach its four sides;
        # anti-aliased edges allow a pixel of slack, a vertex barely covering a pixel one more.
        assert cols.min() >= np.floor(x) - 1 and cols.max() + 1 <= np.ceil(x + w) + 1
        assert rows.min() >= np.floor(y) - 1 and rows.max() + 1 <= np.ceil(y + h) + 1
        assert cols.min() <= x + 2 and cols.max() + 1 >= x + w - 2
        assert rows.min() <= y + 2 and rows.max() + 1 >= y + h - 2


def test_without_occluders_the_visible_fraction_is_the_share_inside_the_frame():
    config = SyntheticConfig(num_frames=40, frame_size=(100, 100), num_occluders=(0, 0))
    for sequence in SyntheticSequences(4, config, seed=5):
        box = sequence.ground_truth
        # Boxes are clipped to the frame: where a box touches no border the whole target is in.
        inside = (box[:, 0] > 0) & (box[:, 1] > 0)
        inside &= (box[:, 0] + box[:, 2] < 100) & (box[:, 1] + box[:, 3] < 100)
        assert inside.sum() >= 10
        np.testing.assert_allclose(sequence.visible_fraction[inside], 1.0, atol=0.03)
        assert np.all(sequence.visible == (sequence.visible_fraction >= 0.3))
        np.testing.assert_array_equal(sequence.annotated(), sequence.visible)


def test_occluders_hide_the_target_in_some_frames():
    config = SyntheticConfig(num_frames=60, frame_size=(96, 128), num_occluders=(2, 2))
    fractions = np.concatenate([s.visible_fraction for s in SyntheticSequences(8, config, seed=1)])
    assert fractions.min() < 0.3 and np.median(fractions) > 0.9


@pytest.mark.parametrize(
    "changes, word",
    [
        ({"frame_size": (8, 100)}, "frame_size"),
        ({"target_scale": (0.5, 0.2)}, "target_scale"),
        ({"num_occluders": (3, 1)}, "num_occluders"),
        ({"min_visible_fraction": 1.5}, "min_visible_fraction"),
    ],
)
def test_bad_config_names_the_parameter(changes, word):
    with pytest.raises(ValueError, match=word):
        SyntheticConfig(**changes)


class _OneObject:
    """A one-frame 'data set': a red 20x12 object on grey surroundings in a 60x50 image."""

    def __len__(self):
        return 1

    def __getitem__(self, index):
        from ebmtrack.data.datasets.sequence import Sequence

        class _Still(Sequence):
            def frame(self, index, keep_gray=False):
                image = np.full((50, 60, 3), 90, np.uint8)
                image[20:32, 25:45] = (255, 0, 0)
                return image

        return _Still("red", ("red.png",), np.array([[25.0, 20.0, 20.0, 12.0]]))


@pytest.mark.parametrize("seed", range(4))
def test_a_real_image_target_has_its_box_around_the_object_not_the_patch(seed):
    from ebmtrack.data.textures import ObjectPatches

    config = SyntheticConfig(
        num_frames=20, frame_size=(120, 160), num_distractors=(0, 0), num_occluders=(0, 0)
    )
    black = lambda rng, h, w: np.zeros((h, w, 3), np.uint8)  # noqa: E731
    sequence = SyntheticSequence("obj", config, seed, black, ObjectPatches([_OneObject()]))
    for t in (0, 10, 19):
        if not sequence.visible_fraction[t] == 1.0:
            continue
        frame = sequence.frame(t).astype(int)
        red = (frame[..., 0] > 160) & (frame[..., 1] < 60) & (frame[..., 2] < 60)
        rows, cols = np.nonzero(red)
        x, y, w, h = sequence.ground_truth[t]
        # The object's own pixels fill the box (rotation <= 5 degrees, interpolation: 2 px).
        assert abs(cols.min() - x) <= 2 and abs(cols.max() + 1 - (x + w)) <= 2
        assert abs(rows.min() - y) <= 2 and abs(rows.max() + 1 - (y + h)) <= 2
        # The pasted patch (grey surroundings, fading out) reaches well beyond the box.
        rows, cols = np.nonzero(frame.sum(axis=2) > 30)
        assert cols.min() < x - 2 and cols.max() + 1 > x + w + 2
        assert rows.min() < y - 1 and rows.max() + 1 > y + h + 1
        # ... and has no hard edge: its opacity rises over several pixels.
        grey = frame[int(y + h / 2), : int(x), 1]
        assert len(np.unique(grey[grey > 0])) >= 3
