"""Readers of the training pack's layouts: OTB folders with ``frames.txt``, YOLO labels, box lists.

Each reader runs on small files the test writes itself, and on the shared training pack where it
is present.
"""

from pathlib import Path

import cv2
import numpy as np
import pytest

from ebmtrack.data.datasets import load_folder
from ebmtrack.data.datasets.stills import BoxListSequences, YoloSequences
from ebmtrack.data.sampler import TrackingPairs, choose_frames, load_training_sets

PACK = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "train"


def _image(path: Path, width: int, height: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((height, width, 3), 128, np.uint8))


def _track(root: Path, numbers: list[int]) -> Path:
    folder = root / "walk"
    for k in range(len(numbers)):
        _image(folder / "img" / f"{k + 1:04d}.jpg", 40, 30)
    (folder / "groundtruth_rect.txt").write_text("".join("1,2,10,8\n" for _ in numbers))
    lines = ["img,orig_frame,scale"] + [f"{k + 1:04d}.jpg,{n},0.5" for k, n in enumerate(numbers)]
    (folder / "frames.txt").write_text("\n".join(lines) + "\n")
    return folder


def test_frames_txt_gives_frame_numbers_and_the_gap_is_measured_in_them(tmp_path):
    _track(tmp_path, [1, 40, 45, 200])
    (sequence,) = load_folder(tmp_path)
    np.testing.assert_array_equal(sequence.frame_numbers, [1, 40, 45, 200])
    usable = np.ones(4, dtype=bool)
    pairs = {
        choose_frames(usable, 10, np.random.default_rng(s), sequence.frame_numbers)
        for s in range(300)
    }
    # Frames 40 and 45 are 5 apart; every other pair of distinct frames is more than 10 apart.
    assert {p for p in pairs if p[0] != p[1]} == {(1, 2), (2, 1)}
    # Without frame numbers, indices 0..3 are 1 apart: every neighbour is within reach.
    by_index = {choose_frames(usable, 1, np.random.default_rng(s)) for s in range(300)}
    assert (0, 1) in by_index and (2, 3) in by_index


def test_frames_txt_errors_name_the_file(tmp_path):
    folder = _track(tmp_path, [1, 5, 9])
    (folder / "frames.txt").write_text("img,orig_frame,scale\n0001.jpg,1,1\n0002.jpg,x,1\n")
    with pytest.raises(ValueError, match="frames.txt: orig_frame must be an integer"):
        load_folder(tmp_path)
    (folder / "frames.txt").write_text("img,scale\n0001.jpg,1\n")
    with pytest.raises(ValueError, match="frames.txt: expected a header"):
        load_folder(tmp_path)
    (folder / "frames.txt").write_text("img,orig_frame\n0001.jpg,9\n0002.jpg,5\n0003.jpg,12\n")
    with pytest.raises(ValueError, match="must increase"):
        load_folder(tmp_path)


def test_yolo_labels_become_pixel_boxes_and_unlabelled_images_have_none(tmp_path):
    _image(tmp_path / "images" / "train" / "a.jpg", 200, 100)
    _image(tmp_path / "images" / "train" / "b.jpg", 50, 50)  # no label file: no objects
    _image(tmp_path / "images" / "train" / "c.jpg", 80, 40)
    labels = tmp_path / "labels" / "train"
    labels.mkdir(parents=True)
    (labels / "a.txt").write_text("3 0.5 0.5 0.2 0.4\n0 0.1 0.1 0.01 0.01\n")  # second: 2x1 px
    (labels / "c.txt").write_text("\n7 0.25 0.5 0.5 1.0\n")
    objects = YoloSequences(tmp_path, "train")
    assert len(objects) == 2
    np.testing.assert_allclose(objects.boxes, [[80, 30, 40, 40], [0, 0, 40, 40]])
    np.testing.assert_array_equal(objects.classes, [3, 7])
    assert objects[1].frames[0].name == "c.jpg" and len(objects[1]) == 1
    assert objects[0].frame(0).shape == (100, 200, 3)
    (labels / "c.txt").write_text("7 0.25 0.5 1.5\n")
    with pytest.raises(ValueError, match=r"c\.txt, line 1: expected 5 numbers"):
        YoloSequences(tmp_path, "train")
    with pytest.raises(FileNotFoundError, match="images/val"):
        YoloSequences(tmp_path, "val")


def test_box_list_corners_are_inclusive_and_missing_images_are_named(tmp_path):
    _image(tmp_path / "n01" / "x_0.JPEG", 64, 64)
    _image(tmp_path / "n01" / "x_1.JPEG", 64, 64)
    (tmp_path / "boxes.txt").write_text("n01/x_0.JPEG,0,10,63,58\nn01/x_1.JPEG,5,5,5,9\n")
    objects = BoxListSequences(tmp_path)
    np.testing.assert_allclose(objects.boxes, [[0, 10, 64, 49], [5, 5, 1, 5]])
    assert objects[0].frames[0] == tmp_path / "n01" / "x_0.JPEG"
    (tmp_path / "boxes.txt").write_text("n01/x_0.JPEG,0,10,63\n")
    with pytest.raises(ValueError, match=r"boxes\.txt, line 1: expected path,x1,y1,x2,y2"):
        BoxListSequences(tmp_path)
    (tmp_path / "boxes.txt").write_text("n01/gone.JPEG,0,0,9,9\n")
    with pytest.raises(FileNotFoundError, match="gone.JPEG"):
        BoxListSequences(tmp_path)


def test_training_sets_open_every_layout_and_pairs_are_drawn(tmp_path):
    _track(tmp_path / "tracks", [1, 3, 5])
    _image(tmp_path / "yolo" / "images" / "a.jpg", 60, 60)
    (tmp_path / "yolo" / "labels").mkdir(parents=True)
    (tmp_path / "yolo" / "labels" / "a.txt").write_text("0 0.5 0.5 0.5 0.5\n")
    _image(tmp_path / "list" / "a.jpg", 30, 30)
    (tmp_path / "list" / "boxes.txt").write_text("a.jpg,2,2,20,20\n")
    sets = load_training_sets(
        {"folder": tmp_path / "tracks", "yolo": tmp_path / "yolo", "boxlist": tmp_path / "list"}
    )
    assert {name: len(s) for name, s in sets.items()} == {"folder": 1, "yolo": 1, "boxlist": 1}
    pairs = TrackingPairs(list(sets.values()), num_pairs=30, min_visible_frames=1)
    seen = {pairs[k].sequence.split("-")[0] for k in range(30)}
    assert seen == {"walk", "yolo", "boxlist"}


@pytest.mark.skipif(not PACK.is_dir(), reason="the shared training pack is not present")
def test_the_shared_training_pack_reads_whole():
    sets = load_training_sets(
        {
            "folder": PACK / "sequences",
            "yolo": PACK / "stills" / "coco128",
            "boxlist": PACK / "stills" / "tiny-imagenet",
        }
    )
    tracks = sets["folder"]
    assert len(tracks) == 29 and all(len(t) == 30 and t.frame_numbers is not None for t in tracks)
    assert len(sets["boxlist"]) == 20000
    # coco128: 929 boxes of which those with both sides >= 8 px are kept.
    assert 700 < len(sets["yolo"]) <= 929
    for track in tracks[:3]:
        x, y, w, h = track.ground_truth[0]
        height, width = track.frame(0).shape[:2]
        assert x >= -1 and y >= -1 and x + w <= width + 1 and y + h <= height + 1
