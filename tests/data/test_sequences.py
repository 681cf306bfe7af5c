"""Readers of every sequence layout, on tiny fixtures in the official layouts."""

from pathlib import Path

import cv2
import numpy as np
import pytest

from ebmtrack.data.datasets import (
    detect_layout,
    load_dataset,
    load_folder,
    load_got10k,
    load_lasot,
    load_nfs,
    load_otb,
    load_trackingnet,
    load_uav123,
    load_vot,
    parse_boxes,
)
from ebmtrack.data.datasets.benchmarks import lasot_test_names

REPO = Path(__file__).resolve().parents[2]
SHARED_SEQUENCES = REPO.parent / "shared" / "data" / "sequences"


def _frames(folder: Path, names, gray=False) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name in names:
        shape = (12, 16) if gray else (12, 16, 3)
        cv2.imwrite(str(folder / name), rng.integers(0, 255, shape, dtype=np.uint8))


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_parse_boxes_mixed_separators_nan_and_polygons():
    text = "1,2,3,4\n5\t6\t7\t8\n9 10 11 12\n\nNaN,NaN,NaN,NaN\n0,0,4,1,5,3,1,2\n"
    boxes = parse_boxes(text)
    assert boxes.shape == (5, 4)
    np.testing.assert_array_equal(boxes[:3], [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]])
    assert np.isnan(boxes[3]).all()
    np.testing.assert_array_equal(boxes[4], [0, 0, 5, 3])  # tightest box around the polygon
    with pytest.raises(ValueError, match="gt.txt, line 2"):
        parse_boxes("1,2,3,4\n1,2,x,4", source="gt.txt")
    with pytest.raises(ValueError, match="4 or 8 numbers"):
        parse_boxes("1,2,3")


def test_folder_layouts_frames_in_img_color_or_folder(tmp_path):
    _frames(tmp_path / "A" / "img", [f"{i:04d}.jpg" for i in range(1, 6)])  # one extra frame
    _write(tmp_path / "A" / "groundtruth_rect.txt", "1,1,4,4\n2,1,4,4\n3,1,4,4\n4,1,4,4\n")
    _write(tmp_path / "A" / "attrs.txt", "IV, SV")
    _frames(tmp_path / "B" / "color", ["00000001.jpg", "00000002.jpg"])
    _write(tmp_path / "B" / "groundtruth.txt", "1\t1\t3\t3\n2 2 3 3\n")
    _frames(tmp_path / "C", ["1.png", "2.png"], gray=True)
    _write(tmp_path / "C" / "groundtruth_rect.txt", "0,0,2,2\n0,0,2,2\n")
    (tmp_path / "notes").mkdir()  # a folder without annotation is not a sequence
    assert detect_layout(tmp_path) == "folder"
    sequences = {s.name: s for s in load_dataset(str(tmp_path))}
    assert sorted(sequences) == ["A", "B", "C"]
    a = sequences["A"]
    assert len(a) == 4 and a.frames[-1].name == "0004.jpg"  # first len(annotation) frames
    assert a.attributes == ("IV", "SV") and a.dataset == "folder"
    assert a.frame(0).shape == (12, 16, 3) and a.frame(0).dtype == np.uint8
    assert sequences["C"].frame(0, keep_gray=True).shape == (12, 16)
    np.testing.assert_array_equal(sequences["B"].ground_truth[1], [2, 2, 3, 3])
    # A sequence folder given directly is one sequence.
    assert [s.name for s in load_folder(tmp_path / "B")] == ["B"]


def test_folder_lists_every_problem_in_one_error(tmp_path):
    _frames(tmp_path / "Short" / "img", ["0001.jpg"])
    _write(tmp_path / "Short" / "groundtruth_rect.txt", "1,1,2,2\n1,1,2,2\n")
    _write(tmp_path / "NoFrames" / "groundtruth_rect.txt", "1,1,2,2\n")
    with pytest.raises(FileNotFoundError) as info:
        load_folder(tmp_path)
    message = str(info.value)
    assert "2 problem(s)" in message and "Short" in message and "NoFrames" in message
    with pytest.raises(FileNotFoundError, match="no sequence folders"):
        load_folder(tmp_path / "Short" / "img")
    with pytest.raises(NotADirectoryError):
        load_folder(tmp_path / "absent")


def test_a_dataset_read_with_problems_leaves_broken_sequences_out(tmp_path):
    _frames(tmp_path / "Good" / "img", ["0001.jpg", "0002.jpg"])
    _write(tmp_path / "Good" / "groundtruth_rect.txt", "1,1,2,2\n1,1,2,2\n")
    _frames(tmp_path / "Short" / "img", ["0001.jpg"])
    _write(tmp_path / "Short" / "groundtruth_rect.txt", "1,1,2,2\n1,1,2,2\n")
    problems: dict[str, str] = {}
    assert [s.name for s in load_dataset(str(tmp_path), sequences=["Good"], problems=problems)] == [
        "Good"
    ]
    assert problems == {}  # not asked for: not reported
    assert [s.name for s in load_dataset(str(tmp_path), problems=problems)] == ["Good"]
    assert problems == {
        "Short": f"{tmp_path / 'Short'}: 2 boxes in groundtruth_rect.txt but only 1 frames"
    }
    problems.clear()
    assert load_dataset(str(tmp_path), sequences=["Short"], problems=problems) == []
    assert list(problems) == ["Short"]
    with pytest.raises(ValueError, match="unknown sequence.s. Nope; valid names: Good, Short"):
        load_dataset(str(tmp_path), sequences=["Nope"], problems={})
    with pytest.raises(FileNotFoundError, match="1 problem"):  # without problems: one error
        load_dataset(str(tmp_path), sequences=["Good"])


def test_otb_multi_target_and_frame_ranges(tmp_path):
    _frames(tmp_path / "Jogging" / "img", [f"{i:04d}.jpg" for i in range(1, 4)])
    _write(tmp_path / "Jogging" / "groundtruth_rect.1.txt", "1,1,2,2\n" * 3)
    _write(tmp_path / "Jogging" / "groundtruth_rect.2.txt", "5,5,2,2\n" * 3)
    _frames(tmp_path / "BlurCar3" / "img", [f"{i:04d}.jpg" for i in range(1, 7)])
    _write(tmp_path / "BlurCar3" / "groundtruth_rect.txt", "1,1,2,2\n" * 4)
    sequences = {s.name: s for s in load_otb(tmp_path)}
    assert sorted(sequences) == ["BlurCar3", "Jogging_1", "Jogging_2"]
    assert sequences["Jogging_2"].init_box.tolist() == [5, 5, 2, 2]
    # BlurCar3's annotation starts at frame 3 of the files (OTB configSeqs: 3..359).
    assert [p.name for p in sequences["BlurCar3"].frames] == [
        "0003.jpg",
        "0004.jpg",
        "0005.jpg",
        "0006.jpg",
    ]


def test_vot_polygons_color_frames_and_missing_list_entries(tmp_path):
    _write(tmp_path / "list.txt", "ball\nbag\n")
    _frames(tmp_path / "ball" / "color", ["00000001.jpg", "00000002.jpg"])
    _write(tmp_path / "ball" / "groundtruth.txt", "1,1,5,1,5,4,1,4\n2,2,6,2,6,5,2,5\n")
    with pytest.raises(FileNotFoundError, match="bag"):
        load_vot(tmp_path)
    _write(tmp_path / "list.txt", "ball\n")
    assert detect_layout(tmp_path) == "vot"
    (ball,) = load_dataset(f"vot:{tmp_path}")
    np.testing.assert_array_equal(ball.ground_truth, [[1, 1, 4, 3], [2, 2, 4, 3]])
    assert ball.dataset == "vot"


def test_nfs_30fps_keeps_every_eighth_line_of_the_240fps_annotation(tmp_path):
    seq = tmp_path / "Gymnastics" / "30"
    _frames(seq / "Gymnastics", [f"{i:05d}.jpg" for i in range(1, 4)])
    lines = [f'1 {i} 2 {i + 10} 22 {i} 0 0 0 "person"' for i in range(24)]
    _write(seq / "Gymnastics.txt", "\n".join(lines) + "\n")
    assert detect_layout(tmp_path) == "nfs"
    (gym,) = load_nfs(tmp_path)
    np.testing.assert_array_equal(gym.ground_truth[:, 0], [0, 8, 16])
    np.testing.assert_array_equal(gym.ground_truth[0], [0, 2, 10, 20])  # corners -> x, y, w, h


def test_uav123_sub_sequences_and_nan_rows(tmp_path):
    _write(tmp_path / "anno" / "UAV123" / "bird1_2.txt", "1,1,3,3\nNaN,NaN,NaN,NaN\n4,4,3,3\n")
    _write(tmp_path / "anno" / "UAV123" / "boat1.txt", "1,1,3,3\n1,1,3,3\n")
    _frames(tmp_path / "data_seq" / "UAV123" / "bird1", [f"{i:06d}.jpg" for i in (775, 776, 777)])
    _frames(tmp_path / "data_seq" / "UAV123" / "boat1", ["000001.jpg", "000002.jpg"])
    assert detect_layout(tmp_path) == "uav123"
    sequences = {s.name: s for s in load_uav123(tmp_path)}
    bird = sequences["bird1_2"]
    assert bird.frames[0].name == "000775.jpg" and bird.frames[0].parent.name == "bird1"
    np.testing.assert_array_equal(bird.annotated(), [True, False, True])
    assert len(sequences["boat1"]) == 2


def _lasot_sequence(root: Path, name: str, n: int = 3) -> None:
    folder = root / name.rsplit("-", 1)[0] / name
    _frames(folder / "img", [f"{i:08d}.jpg" for i in range(1, n + 1)])
    _write(folder / "groundtruth.txt", "1,1,4,4\n" * n)
    _write(folder / "full_occlusion.txt", "0,1,0")
    _write(folder / "out_of_view.txt", "0,0,1")


def test_lasot_splits_visibility_and_one_error_for_missing(tmp_path):
    _lasot_sequence(tmp_path, "airplane-1")  # test split
    _lasot_sequence(tmp_path, "airplane-2")  # train split
    assert detect_layout(tmp_path) == "lasot"
    (train,) = load_lasot(tmp_path, "train")
    assert train.name == "airplane-2" and train.frames[0].name == "00000001.jpg"
    np.testing.assert_array_equal(train.annotated(), [True, False, False])
    assert [s.name for s in load_lasot(tmp_path, "all")] == ["airplane-1", "airplane-2"]
    assert len(lasot_test_names()) == 280 and "airplane-1" in lasot_test_names()
    with pytest.raises(FileNotFoundError) as info:
        load_lasot(tmp_path, "test")
    assert "558 missing" in str(info.value)  # 279 absent sequences x (groundtruth.txt, img)
    with pytest.raises(ValueError, match="test, train, all"):
        load_lasot(tmp_path, "val")


def test_got10k_val_cover_and_test_first_box_only(tmp_path):
    val = tmp_path / "val" / "GOT-10k_Val_000001"
    _frames(val, [f"{i:08d}.jpg" for i in range(1, 4)])
    _write(val / "groundtruth.txt", "1,1,4,4\n2,1,4,4\n3,1,4,4\n")
    _write(val / "cover.label", "8\n0\n3\n")
    _write(tmp_path / "val" / "list.txt", "GOT-10k_Val_000001\n")
    test = tmp_path / "test" / "GOT-10k_Test_000001"
    _frames(test, [f"{i:08d}.jpg" for i in range(1, 5)])
    _write(test / "groundtruth.txt", "1,1,4,4\n")
    _write(tmp_path / "test" / "list.txt", "GOT-10k_Test_000001\n")
    assert detect_layout(tmp_path) == "got10k"
    (v,) = load_got10k(tmp_path, "val")
    np.testing.assert_array_equal(v.annotated(), [True, False, True])
    (t,) = load_dataset(f"got10k:{tmp_path}", split="test")
    assert len(t) == 4 and np.isnan(t.ground_truth[1:]).all()
    np.testing.assert_array_equal(t.annotated(), [True, False, False, False])
    (t2,) = load_got10k(tmp_path / "test", "test")  # the split folder itself
    assert t2.name == t.name
    with pytest.raises(FileNotFoundError, match="list.txt"):
        load_got10k(tmp_path, "train")


def test_trackingnet_chunks_and_numeric_frame_order(tmp_path):
    for chunk, name, n in (("TEST", "abc", 12), ("TRAIN_0", "def", 2), ("TRAIN_1", "ghi", 2)):
        _frames(tmp_path / chunk / "frames" / name, [f"{i}.jpg" for i in range(n)])
        text = "1,1,4,4\n" if chunk == "TEST" else "1,1,4,4\n" * n
        _write(tmp_path / chunk / "anno" / f"{name}.txt", text)
    assert detect_layout(tmp_path) == "trackingnet"
    (test,) = load_trackingnet(tmp_path, "test")
    assert [p.stem for p in test.frames][9:] == ["9", "10", "11"]
    assert np.isnan(test.ground_truth[1:]).all()
    assert [s.name for s in load_trackingnet(tmp_path, "train")] == ["def", "ghi"]
    assert [s.name for s in load_trackingnet(tmp_path, "TRAIN_1")] == ["ghi"]
    with pytest.raises(ValueError, match="TRAIN_<k>"):
        load_trackingnet(tmp_path, "val")


def test_dataset_spec_errors(tmp_path):
    _frames(tmp_path / "A" / "img", ["0001.jpg"])
    _write(tmp_path / "A" / "groundtruth_rect.txt", "1,1,4,4\n")
    with pytest.raises(ValueError, match="valid layouts: otb"):
        load_dataset(f"kitti:{tmp_path}")
    with pytest.raises(ValueError, match="valid names: A"):
        load_dataset(str(tmp_path), sequences=["B"])
    assert load_dataset(f"otb:{tmp_path}")[0].dataset == "otb"


def test_shared_sequences_read_with_grayscale_frames():
    if not SHARED_SEQUENCES.is_dir():
        pytest.skip("shared sequences not available")
    sequences = {s.name: s for s in load_dataset(str(SHARED_SEQUENCES))}
    assert len(sequences) == 13 and sum(len(s) for s in sequences.values()) == 1932
    assert sequences["Jumping"].frame(0, keep_gray=True).ndim == 2
    assert all(s.annotated().all() for s in sequences.values())
