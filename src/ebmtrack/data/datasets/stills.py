"""Still images with boxes, each instance a one-frame :class:`Sequence` (as COCO is used).

Two layouts users have:

- **YOLO detection labels** (:class:`YoloSequences`): ``ROOT/images/.../NAME.jpg`` with
  ``ROOT/labels/.../NAME.txt`` beside it (same relative path), one line ``class cx cy w h`` per
  object, normalised to [0, 1] by the image's width and height. An image without a label file has
  no objects.
- **A box list file** (:class:`BoxListSequences`): one line ``path,x1,y1,x2,y2`` per object,
  ``path`` relative to the list file's folder, corners inclusive in pixels (Tiny ImageNet's
  ``boxes.txt``; ``x1, y1, x2, y2 = 0, 10, 63, 58`` is the box x=0, y=10, w=64, h=49).

Both are map-style collections (``len()``, ``[k]``) that :class:`ebmtrack.data.sampler.
TrackingPairs` draws from; the reference and test frame of a pair are then the same image, told
apart by the crop jitter only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from ebmtrack.data.datasets.sequence import Sequence
from ebmtrack.data.io import IMAGE_SUFFIXES


class _Instances:
    """Instances (one box in one image each) as one-frame sequences."""

    dataset = "stills"

    def __init__(self, files: list[Path], boxes: np.ndarray, image_of: np.ndarray, name: str):
        self.files = files
        self.boxes = boxes.reshape(-1, 4)
        self.image_of = image_of
        self.name = name

    def __len__(self) -> int:
        return len(self.boxes)

    def __getitem__(self, index: int) -> Sequence:
        if not 0 <= index < len(self):
            raise IndexError(f"instance index {index} out of range for {len(self)}")
        path = self.files[self.image_of[index]]
        return Sequence(
            name=f"{self.name}-{index:06d}",
            frames=(path,),
            ground_truth=self.boxes[index : index + 1],
            visible=np.ones(1, dtype=bool),
            dataset=self.dataset,
        )


def _image_size(path: Path) -> tuple[int, int]:
    """(width, height) from the image header; ValueError naming the file if it cannot be read."""
    try:
        with Image.open(path) as image:
            return image.size
    except OSError as err:
        raise ValueError(f"{path}: not a readable image ({err})") from err


class YoloSequences(_Instances):
    """The objects of a YOLO-labelled image folder; see the module docstring.

    Args:
        root: the folder holding ``images/`` and ``labels/``.
        split: a sub-folder of ``images/`` (e.g. ``train2017``); None reads all of ``images/``.
        min_side: objects narrower or lower than this many pixels are skipped.

    Attributes:
        boxes: (M, 4) float64 x, y, w, h in pixels; ``classes``: (M,) int64 class indices.
    """

    dataset = "yolo"

    def __init__(self, root: str | Path, split: str | None = None, min_side: float = 8.0):
        root = Path(root)
        images = root / "images" / split if split else root / "images"
        if not images.is_dir():
            raise FileNotFoundError(f"yolo: no image folder {images} (expected ROOT/images/...)")
        files = sorted(p for p in images.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise FileNotFoundError(f"yolo: no images under {images}")
        boxes, classes, image_of = [], [], []
        for index, path in enumerate(files):
            label = root / "labels" / path.relative_to(root / "images").with_suffix(".txt")
            if not label.is_file():
                continue
            rows = _parse_rows(label, 5)
            if not rows:
                continue
            width, height = _image_size(path)
            for number, (cls, cx, cy, w, h) in rows:
                if not (0 <= cx <= 1 and 0 <= cy <= 1 and 0 < w <= 1 and 0 < h <= 1):
                    raise ValueError(
                        f"{label}, line {number}: cx, cy, w, h must be normalised to [0, 1]"
                    )
                box = [(cx - w / 2) * width, (cy - h / 2) * height, w * width, h * height]
                if min(box[2], box[3]) >= min_side:
                    boxes.append(box)
                    classes.append(int(cls))
                    image_of.append(index)
        if not boxes:
            raise ValueError(f"yolo: no object with both sides >= {min_side} px under {root}")
        super().__init__(files, np.array(boxes), np.array(image_of), f"yolo-{root.name}")
        self.classes = np.array(classes, dtype=np.int64)


class BoxListSequences(_Instances):
    """The objects of a box list file (``path,x1,y1,x2,y2``, inclusive corners); see the module
    docstring. ``path`` may also be the folder holding ``boxes.txt``."""

    dataset = "boxlist"

    def __init__(self, path: str | Path, min_side: float = 1.0):
        path = Path(path)
        if path.is_dir():
            path = path / "boxes.txt"
        if not path.is_file():
            raise FileNotFoundError(f"boxlist: no box list file {path}")
        files: list[Path] = []
        boxes = []
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            name, *values = (v.strip() for v in line.split(","))
            try:
                x1, y1, x2, y2 = (float(v) for v in values)
            except ValueError as err:
                raise ValueError(
                    f"{path}, line {number}: expected path,x1,y1,x2,y2, got {line!r}"
                ) from err
            if x2 < x1 or y2 < y1:
                raise ValueError(f"{path}, line {number}: x2 < x1 or y2 < y1 in {line!r}")
            if min(x2 - x1 + 1, y2 - y1 + 1) >= min_side:
                files.append(path.parent / name)
                boxes.append([x1, y1, x2 - x1 + 1, y2 - y1 + 1])
        if not boxes:
            raise ValueError(f"{path}: no box with both sides >= {min_side} px")
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise FileNotFoundError(
                f"{path}: {len(missing)} image(s) missing, e.g. {', '.join(missing[:3])}"
            )
        super().__init__(
            files, np.array(boxes), np.arange(len(files)), f"boxlist-{path.parent.name}"
        )


def _parse_rows(path: Path, columns: int) -> list[tuple[int, list[float]]]:
    """(line number, values) of the non-empty lines of a label file with ``columns`` numbers."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            values = [float(v) for v in line.split()]
        except ValueError as err:
            raise ValueError(f"{path}, line {number}: not numbers: {line!r}") from err
        if len(values) != columns:
            raise ValueError(
                f"{path}, line {number}: expected {columns} numbers, got {len(values)}"
            )
        rows.append((number, values))
    return rows
