"""COCO object instances as one-frame tracking sequences (still-image training pairs).

Layout, as distributed by cocodataset.org::

    ROOT/annotations/instances_{split}.json      e.g. instances_train2017.json
    ROOT/{split}/*.jpg                           or ROOT/images/{split}/*.jpg

Every non-crowd instance whose box is at least ``min_side`` pixels wide and high becomes one
sequence of a single frame. The annotation file is parsed with pycocotools once; afterwards only
compact arrays are kept (the segmentation polygons are dropped), so the reader stays small in
memory and cheap to copy into data-loader workers.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np

from ebmtrack.data.datasets.sequence import Sequence, check_exists


def _coco_api():
    try:
        from pycocotools.coco import COCO
    except ImportError as err:  # optional dependency
        raise ModuleNotFoundError(
            "reading COCO needs pycocotools: pip install pycocotools (or ebmtrack[coco])"
        ) from err
    return COCO


def coco_paths(root: str | Path, split: str) -> tuple[Path, Path]:
    """(annotation file, image folder) of ``split``; one error lists whatever is missing."""
    root = Path(root)
    annotation = root / "annotations" / f"instances_{split}.json"
    candidates = [root / split, root / "images" / split]
    images = next((c for c in candidates if c.is_dir()), candidates[0])
    layout = f"expected ROOT/annotations/instances_{split}.json and ROOT/{split}/"
    check_exists([annotation, images], f"coco {split} ({layout})")
    return annotation, images


class CocoSequences:
    """The instances of one COCO split, each a :class:`Sequence` of one frame.

    Args:
        root: the COCO folder (holding ``annotations/``).
        split: the image set, e.g. "train2017", "val2017", "train2014".
        min_side: instances with a box narrower or lower than this (pixels) are skipped.

    Attributes:
        boxes: (M, 4) float64 x, y, w, h of the kept instances (COCO boxes are 0-based
            top-left corner plus size, the package convention).
        annotation_ids, category_ids: (M,) int64.
    """

    def __init__(self, root: str | Path, split: str = "train2017", min_side: float = 8.0):
        if not min_side >= 0:
            raise ValueError(f"min_side must be >= 0, got {min_side}")
        annotation_file, self.image_dir = coco_paths(root, split)
        self.split = split
        with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress
            api = _coco_api()(str(annotation_file))
        images = sorted(api.imgs)
        position = {image_id: k for k, image_id in enumerate(images)}
        self.image_files = [api.imgs[i]["file_name"] for i in images]
        kept = [
            a
            for _, a in sorted(api.anns.items())
            if not a.get("iscrowd", 0)
            and len(a.get("bbox", ())) == 4
            and min(a["bbox"][2], a["bbox"][3]) >= max(min_side, 1e-9)
        ]
        self.boxes = np.array([a["bbox"] for a in kept], dtype=np.float64).reshape(-1, 4)
        self.annotation_ids = np.array([a["id"] for a in kept], dtype=np.int64)
        self.category_ids = np.array([a["category_id"] for a in kept], dtype=np.int64)
        self._image_of = np.array([position[a["image_id"]] for a in kept], dtype=np.int64)
        if len(kept) == 0:
            raise ValueError(
                f"coco {split}: no instance is non-crowd with both sides >= min_side={min_side}"
            )

    def __len__(self) -> int:
        return len(self.boxes)

    def __getitem__(self, index: int) -> Sequence:
        if not 0 <= index < len(self):
            raise IndexError(f"instance index {index} out of range for {len(self)}")
        return Sequence(
            name=f"{self.split}-{self.annotation_ids[index]}",
            frames=(self.image_dir / self.image_files[self._image_of[index]],),
            ground_truth=self.boxes[index : index + 1],
            visible=np.ones(1, dtype=bool),
            dataset="coco",
        )
