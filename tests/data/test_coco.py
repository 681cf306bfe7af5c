import json

import cv2
import numpy as np
import pytest

pytest.importorskip("pycocotools")

from ebmtrack.data.coco import CocoSequences  # noqa: E402
from ebmtrack.data.sampler import TrackingPairs, load_training_sets  # noqa: E402

COLORS = {1: (250, 10, 10), 2: (10, 250, 10), 4: (10, 10, 250)}


def _annotation(ann_id, image_id, bbox, iscrowd=0):
    x, y, w, h = bbox
    return {
        "id": ann_id,
        "image_id": image_id,
        "category_id": 18,
        "bbox": list(bbox),
        "area": w * h,
        "iscrowd": iscrowd,
        "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]],
    }


def make_coco(root, split="val2017", image_folder=None):
    """A two-image COCO split in the official layout; returns the kept boxes by annotation id."""
    image_dir = image_folder or root / split
    image_dir.mkdir(parents=True)
    (root / "annotations").mkdir()
    boxes = {1: (10, 20, 30, 15), 2: (40.5, 5, 12, 25), 3: (0, 0, 4, 3), 4: (5, 8, 50, 40)}
    crowd = _annotation(5, 1, (60, 40, 20, 20), iscrowd=1)
    images = {1: "000000000001.jpg", 2: "000000000002.png"}
    placement = {1: 1, 2: 1, 3: 1, 4: 2}
    for image_id, name in images.items():
        canvas = np.zeros((80, 100, 3), np.uint8)
        for ann_id, owner in placement.items():
            if owner == image_id and ann_id in COLORS:
                x, y, w, h = (int(np.ceil(v)) for v in boxes[ann_id])
                canvas[y : y + h, x : x + w] = COLORS[ann_id]
        path = image_dir / name
        params = [cv2.IMWRITE_JPEG_QUALITY, 100] if path.suffix == ".jpg" else []
        cv2.imwrite(str(path), cv2.cvtColor(canvas, cv2.COLOR_RGB2BGR), params)
    payload = {
        "info": {},
        "licenses": [],
        "images": [
            {"id": i, "file_name": n, "width": 100, "height": 80} for i, n in images.items()
        ],
        "annotations": [_annotation(a, placement[a], boxes[a]) for a in boxes] + [crowd],
        "categories": [{"id": 18, "name": "dog", "supercategory": "animal"}],
    }
    (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(payload))
    return {a: boxes[a] for a in (1, 2, 4)}


def test_instances_become_one_frame_sequences_without_crowd_or_tiny_boxes(tmp_path):
    kept = make_coco(tmp_path)
    coco = CocoSequences(tmp_path, "val2017", min_side=8)
    assert len(coco) == 3
    np.testing.assert_array_equal(coco.annotation_ids, [1, 2, 4])
    for index, ann_id in enumerate(coco.annotation_ids):
        sequence = coco[index]
        assert len(sequence) == 1 and sequence.dataset == "coco"
        assert sequence.name == f"val2017-{ann_id}"
        np.testing.assert_allclose(sequence.ground_truth[0], kept[ann_id])
        assert sequence.annotated().tolist() == [True]
        # The box holds the instance's colour in its image (0-based top-left convention).
        x, y, w, h = (int(np.ceil(v)) for v in sequence.ground_truth[0])
        inside = sequence.frame(0)[y + 1 : y + h - 1, x + 1 : x + w - 1].reshape(-1, 3)
        np.testing.assert_allclose(inside.mean(0), COLORS[ann_id], atol=20)  # JPEG chroma


def test_min_side_zero_keeps_tiny_boxes_but_never_crowds(tmp_path):
    make_coco(tmp_path)
    assert CocoSequences(tmp_path, "val2017", min_side=0).annotation_ids.tolist() == [1, 2, 3, 4]


def test_images_folder_layout_and_pair_sampling(tmp_path):
    make_coco(tmp_path, "train2017", image_folder=tmp_path / "images" / "train2017")
    coco = load_training_sets({"coco": tmp_path})["coco"]
    pairs = TrackingPairs([coco], num_pairs=30)
    for index in range(30):
        pair = pairs[index]
        assert pair.ref_index == pair.test_index == 0
        np.testing.assert_array_equal(pair.ref_frame, pair.test_frame)


def test_missing_parts_are_listed_together(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        CocoSequences(tmp_path, "train2017")
    assert "instances_train2017.json" in str(info.value) and "2 missing" in str(info.value)
