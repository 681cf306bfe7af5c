"""Spliced sequences: the absent part is flagged, the target returns where the host has it, and
one seed builds one sequence."""

import pickle
from pathlib import Path

import cv2
import numpy as np
import pytest

from ebmtrack.data.datasets import load_otb
from ebmtrack.data.io import read_image
from ebmtrack.data.splice import SplicedSequence, splice, splice_set


def _otb_folder(root: Path, name: str, frames: int, size: tuple[int, int], seed: int) -> None:
    """An OTB-layout sequence of random frames (W, H) = ``size`` with a box drifting right."""
    rng = np.random.default_rng(seed)
    (root / name / "img").mkdir(parents=True)
    width, height = size
    lines = []
    for i in range(frames):
        image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        cv2.imwrite(str(root / name / "img" / f"{i + 1:04d}.png"), image)
        lines.append(f"{5 + i},{6 + i % 3},{12},{10}")
    (root / name / "groundtruth_rect.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def sequences(tmp_path_factory):
    root = tmp_path_factory.mktemp("otb")
    _otb_folder(root, "host", 40, (64, 48), 0)
    _otb_folder(root, "donor", 30, (80, 40), 1)
    _otb_folder(root, "short", 8, (32, 32), 2)
    return {s.name: s for s in load_otb(root)}


def test_absent_part_flagged_and_filled_with_donor_frames(sequences):
    host, donor = sequences["host"], sequences["donor"]
    spliced = splice(host, [host, donor], "absent", 12, seed=3)
    start, stop = spliced.span
    assert stop - start == 12 and start >= 10 and len(host) - stop >= 10
    assert len(spliced) == len(host)
    flags = np.zeros(len(host), dtype=bool)
    flags[start:stop] = True
    np.testing.assert_array_equal(spliced.visible, ~flags)
    np.testing.assert_array_equal(spliced.annotated(), ~flags)
    assert np.isnan(spliced.ground_truth[start:stop]).all()
    np.testing.assert_array_equal(spliced.ground_truth[~flags], host.ground_truth[~flags])
    donor_paths = set(donor.frames)
    assert all(p in donor_paths for p in spliced.frames[start:stop])
    # Consecutive donor frames, resized to the host's size.
    indices = [donor.frames.index(p) for p in spliced.frames[start:stop]]
    assert np.all(np.diff(indices) == 1)
    expected = cv2.resize(donor.frame(indices[0]), (64, 48), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(spliced.frame(start), expected)


def test_target_returns_where_the_host_has_it(sequences):
    host = sequences["host"]
    spliced = splice(host, [sequences["donor"]], "absent", 12, seed=3)
    _, stop = spliced.span
    np.testing.assert_array_equal(spliced.ground_truth[stop], host.ground_truth[stop])
    np.testing.assert_array_equal(spliced.frame(stop), host.frame(stop))
    np.testing.assert_array_equal(spliced.frame(0), host.frame(0))


def test_occluder_covers_every_box_of_the_part_and_only_there(sequences):
    host, donor = sequences["host"], sequences["donor"]
    spliced = splice(host, [donor], "occluded", 8, seed=5)
    start, stop = spliced.span
    assert not spliced.visible[start:stop].any() and spliced.visible[stop:].all()
    (x0, y0, x1, y1), source, (u0, v0, u1, v1) = spliced.occluder
    for box in host.ground_truth[start:stop]:
        assert x0 <= box[0] and y0 <= box[1]
        assert box[0] + box[2] <= x1 and box[1] + box[3] <= y1
    assert source in donor.frames
    frame, original = spliced.frame(start + 1), host.frame(start + 1)
    patch = cv2.resize(read_image(source)[v0:v1, u0:u1], (x1 - x0, y1 - y0))
    np.testing.assert_array_equal(frame[y0:y1, x0:x1], patch)
    outside = np.ones(frame.shape[:2], dtype=bool)
    outside[y0:y1, x0:x1] = False
    np.testing.assert_array_equal(frame[outside], original[outside])
    # Before and after the part: the host's frames untouched.
    np.testing.assert_array_equal(spliced.frame(start - 1), host.frame(start - 1))
    np.testing.assert_array_equal(spliced.frame(stop), host.frame(stop))


def test_same_seed_same_sequence_other_seed_other(sequences):
    host, donor = sequences["host"], sequences["donor"]
    for kind in ("absent", "occluded"):
        one, two = (splice(host, [donor], kind, 10, seed=7) for _ in range(2))
        assert one.frames == two.frames and one.span == two.span
        assert one.occluder == two.occluder
        np.testing.assert_array_equal(one.frame(one.span[0]), two.frame(two.span[0]))
    spans = {splice(host, [donor], "absent", 10, seed=s).span for s in range(8)}
    assert len(spans) > 1


def test_splice_set_and_pickling(sequences):
    hosts = [sequences["host"], sequences["donor"]]
    built = splice_set(hosts, length=0.25, seed=1)
    assert [s.name for s in built] == [
        "host-absent",
        "host-occluded",
        "donor-absent",
        "donor-occluded",
    ]
    assert built[0].span[1] - built[0].span[0] == 10
    # The host is never its own donor.
    assert not set(built[2].frames[slice(*built[2].span)]) & set(sequences["donor"].frames)
    copy = pickle.loads(pickle.dumps(built[1]))
    assert isinstance(copy, SplicedSequence)
    np.testing.assert_array_equal(copy.frame(copy.span[0]), built[1].frame(built[1].span[0]))


def test_bad_input_is_refused(sequences):
    host, donor = sequences["host"], sequences["donor"]
    with pytest.raises(ValueError, match="needs at least"):
        splice(sequences["short"], [donor], "absent", 4, seed=0)
    with pytest.raises(ValueError, match="kind must be"):
        splice(host, [donor], "gone", 4, seed=0)
    with pytest.raises(ValueError, match="no donor"):
        splice(host, [host], "absent", 4, seed=0)
