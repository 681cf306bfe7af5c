from pathlib import Path

import numpy as np
import pytest

from ebmtrack.data.sampler import TrackingPairs, choose_frames, load_training_sets


class FakeSequence:
    """Frames whose pixels hold their own index, boxes whose x does too."""

    def __init__(self, name, visible):
        self.name = name
        self.visible = np.asarray(visible, dtype=bool)
        n = len(self.visible)
        self.ground_truth = np.stack([np.arange(n), np.zeros(n), np.full(n, 5), np.full(n, 5)], 1)
        self.ground_truth = self.ground_truth.astype(float)

    def __len__(self):
        return len(self.visible)

    def frame(self, index):
        return np.full((2, 2, 3), index, dtype=np.uint8)

    def annotated(self):
        return self.visible.copy()


def _video(name, length, seed):
    rng = np.random.default_rng(seed)
    return FakeSequence(name, rng.random(length) < 0.6)


def test_choose_frames_respects_the_gap_and_visibility():
    rng = np.random.default_rng(0)
    for _ in range(300):
        usable = rng.random(int(rng.integers(1, 200))) < 0.3
        usable[rng.integers(len(usable))] = True
        gap = int(rng.integers(0, 60))
        ref, test = choose_frames(usable, gap, rng)
        assert usable[ref] and usable[test] and abs(ref - test) <= gap


def test_choose_frames_covers_the_whole_window():
    rng = np.random.default_rng(1)
    usable = np.ones(300, dtype=bool)
    gaps = [abs(np.subtract(*choose_frames(usable, 50, rng))) for _ in range(3000)]
    assert max(gaps) == 50 and min(gaps) == 0


def test_pairs_are_visible_within_the_gap_and_read_from_the_right_frames():
    videos = [_video(f"v{k}", 150, k) for k in range(5)]
    pairs = TrackingPairs([videos], max_gap=20, num_pairs=400, seed=4)
    for index in range(400):
        pair = pairs[index]
        sequence = next(v for v in videos if v.name == pair.sequence)
        assert abs(pair.ref_index - pair.test_index) <= 20
        assert sequence.visible[pair.ref_index] and sequence.visible[pair.test_index]
        assert pair.ref_frame[0, 0, 0] == pair.ref_index and pair.ref_box[0] == pair.ref_index
        assert pair.test_frame[0, 0, 0] == pair.test_index and pair.test_box[0] == pair.test_index


def test_same_index_gives_the_same_pair_in_any_order_and_instance():
    videos = [_video(f"v{k}", 80, k) for k in range(4)]
    first = TrackingPairs([videos, videos[:2]], weights=[1, 2], seed=9, num_pairs=100)
    second = TrackingPairs([videos, videos[:2]], weights=[1, 2], seed=9, num_pairs=100)
    forward = [(first[i].sequence, first[i].ref_index, first[i].test_index) for i in range(100)]
    backward = [
        (second[i].sequence, second[i].ref_index, second[i].test_index) for i in range(99, -1, -1)
    ]
    assert forward == backward[::-1]
    # Splitting the indices between processes (e.g. even/odd ranks) reproduces the same pairs.
    assert [forward[i] for i in range(1, 100, 2)] == [backward[::-1][i] for i in range(1, 100, 2)]
    other_seed = TrackingPairs([videos, videos[:2]], weights=[1, 2], seed=10, num_pairs=100)
    assert forward != [
        (p.sequence, p.ref_index, p.test_index) for p in map(other_seed.__getitem__, range(100))
    ]


def test_data_set_weights_are_respected():
    sets = [
        [FakeSequence("a", np.ones(30))],
        [FakeSequence("b", np.ones(30))],
        [FakeSequence("c", np.ones(30))],
    ]
    pairs = TrackingPairs(sets, weights=[1, 3, 0], num_pairs=4000, seed=2)
    counts = np.bincount([pairs.draw_pair(pairs.rng(i))[0] for i in range(4000)], minlength=3)
    # Binomial(4000, 0.25): std 27.4; allow 4 std.
    assert abs(counts[0] - 1000) < 110 and counts[2] == 0 and counts.sum() == 4000


def test_sequences_without_enough_visible_frames_are_skipped():
    sparse = FakeSequence("sparse", [True, False, True] + [False] * 40)
    still = FakeSequence("still", [True])  # a one-frame sequence (a still image) is usable
    pairs = TrackingPairs([[sparse, still]], min_visible_frames=5, num_pairs=200)
    drawn = {pairs[i].sequence for i in range(200)}
    assert drawn == {"still"}
    assert all(pairs[i].ref_index == pairs[i].test_index == 0 for i in range(20))


def test_a_data_set_without_usable_sequences_is_an_error():
    pairs = TrackingPairs([[FakeSequence("blind", np.zeros(30))]], max_tries=5)
    with pytest.raises(ValueError, match="datasets\\[0\\]"):
        pairs[0]


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"weights": [1, -1]}, "weights"),
        ({"weights": [1]}, "weights"),
        ({"max_gap": -1}, "max_gap"),
        ({"num_pairs": 0}, "num_pairs"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, word):
    videos = [_video("v", 30, 0)]
    with pytest.raises(ValueError, match=word):
        TrackingPairs([videos, videos], **kwargs)


def test_missing_training_sets_are_listed_in_one_error(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        load_training_sets(
            {"lasot": tmp_path / "LaSOT", "coco": tmp_path / "coco", "got10k": tmp_path}
        )
    message = str(info.value)
    assert "lasot" in message and "coco" in message and "got10k" in message
    with pytest.raises(ValueError, match="valid names: lasot, got10k, trackingnet, coco"):
        load_training_sets({"imagenet": tmp_path})


SHARED_SEQUENCES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "sequences"


@pytest.mark.skipif(not SHARED_SEQUENCES.is_dir(), reason="shared sequences not present")
def test_pairs_from_real_sequences_and_their_frames_as_textures():
    from ebmtrack.data.datasets.folder import load_folder
    from ebmtrack.data.synthetic import SyntheticConfig, SyntheticSequence
    from ebmtrack.data.textures import ImageTextures

    sequences = load_folder(SHARED_SEQUENCES)[:3]
    pairs = TrackingPairs([sequences], max_gap=10, num_pairs=20, seed=1)
    for index in range(5):
        pair = pairs[index]
        sequence = next(s for s in sequences if s.name == pair.sequence)
        assert abs(pair.ref_index - pair.test_index) <= 10
        assert pair.ref_frame.shape == sequence.frame(pair.ref_index).shape
        np.testing.assert_array_equal(pair.test_box, sequence.ground_truth[pair.test_index])
    textures = ImageTextures([sequences[0].frame(0), sequences[1].frame(0)])
    config = SyntheticConfig(num_frames=5, frame_size=(64, 80))
    assert SyntheticSequence("real", config, 0, textures).frame(4).shape == (64, 80, 3)


class TexturedSequence(FakeSequence):
    """FakeSequence with 96 x 96 textured frames (each frame its own noise) for real crops."""

    def frame(self, index):
        return np.random.default_rng(index).integers(0, 256, (96, 96, 3), dtype=np.uint8)


def _processed_pairs(**changes):
    from ebmtrack.data.processing import AtomProcessing

    videos = [TexturedSequence(f"v{k}", np.ones(60, dtype=bool)) for k in range(3)]
    for video in videos:  # boxes inside the 96-pixel frames, x still the frame's index
        video.ground_truth[:, 0] = 10 + video.ground_truth[:, 0] % 50
        video.ground_truth[:, 1:] = [20, 24, 30]
    processing = AtomProcessing(output_size=64, **changes)
    return TrackingPairs([videos], processing=processing, max_gap=10, num_pairs=50, seed=3)


def test_a_group_of_one_is_the_pair():
    pairs = _processed_pairs(flip_probability=0.5)
    for index in range(12):
        (member,) = pairs.group(index, 1)
        pair = pairs[index]
        assert member.keys() == pair.keys()
        for key in pair:
            assert np.array_equal(member[key].numpy(), pair[key].numpy()), key


def test_a_group_shares_one_reference_crop_and_draws_its_tests():
    pairs = _processed_pairs()
    group = pairs.group(7, 4)
    assert len(group) == 4
    for member in group[1:]:
        assert member["ref_image"] is group[0]["ref_image"]
        assert np.array_equal(member["ref_box"].numpy(), group[0]["ref_box"].numpy())
    # Each test crop has its own jitter and proposals.
    boxes = {tuple(member["test_box"].tolist()) for member in group}
    assert len(boxes) == 4
    assert not np.array_equal(group[0]["proposals"].numpy(), group[1]["proposals"].numpy())


def test_groups_need_a_processing_that_makes_them():
    pairs = TrackingPairs([[_video("v", 40, 0)]], num_pairs=5)
    with pytest.raises(ValueError, match="makes no groups"):
        pairs.group(0, 2)
    with pytest.raises(ValueError, match="size must be an integer >= 1"):
        _processed_pairs().group(0, 0)
