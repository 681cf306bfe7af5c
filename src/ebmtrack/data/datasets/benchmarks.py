"""Readers for the benchmarks with a layout of their own: NFS, UAV123, LaSOT, GOT-10k, TrackingNet.

Each reader takes the data set's root folder as distributed, reads annotations eagerly and frames
lazily, looks up nothing on the network, and raises one FileNotFoundError that lists everything
missing. Splits are parameters, so that training code can read the train splits.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np

from ebmtrack.data.datasets.sequence import (
    Sequence,
    check_exists,
    image_files,
    numbered_frames,
    read_boxes,
    read_flags,
    read_names,
)


def _require_folder(root: str | Path, dataset: str) -> Path:
    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"{dataset}: not a folder: {root}")
    return root


def _split_file(name: str) -> str:
    return resources.files("ebmtrack.data.datasets").joinpath("splits", name).read_text()


def _data_lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip() and line[0] != "#"]


# ----------------------------------------------------------------------------------------- NFS
def load_nfs(root: str | Path, fps: int = 30) -> list[Sequence]:
    """Need for Speed: ``root/NAME/{fps}/NAME/*.jpg`` and ``root/NAME/{fps}/NAME.txt``.

    Annotation lines are ``id xmin ymin xmax ymax frame lost occluded generated "label"``. The
    30 fps folders ship the 240 fps annotation, so every 8th line is kept when the annotation has
    about 8 times as many lines as there are frames; a difference of one line is trimmed.
    """
    if fps not in (30, 240):
        raise ValueError(f"nfs: fps must be 30 or 240, got {fps}")
    root = _require_folder(root, "nfs")
    anno_files = sorted(root.glob(f"*/{fps}/*.txt"))
    if not anno_files:
        raise FileNotFoundError(f"nfs: no NAME/{fps}/NAME.txt under {root}")
    check_exists([f.with_suffix("") for f in anno_files], "nfs frame folders")
    sequences, problems = [], []
    for anno_file in anno_files:
        frames = image_files(anno_file.with_suffix(""))
        rows = [line.split() for line in anno_file.read_text().splitlines() if line.strip()]
        corners = np.array([[float(v) for v in row[1:5]] for row in rows], dtype=np.float64)
        gt = np.concatenate([corners[:, :2], corners[:, 2:] - corners[:, :2]], axis=1)
        if len(gt) != len(frames) and abs(len(gt) / max(len(frames), 1) - 8) < 1:
            gt = gt[::8]
        if abs(len(gt) - len(frames)) > 1:
            problems.append(f"{anno_file}: {len(gt)} boxes for {len(frames)} frames")
            continue
        n = min(len(gt), len(frames))
        sequences.append(Sequence(anno_file.stem, tuple(frames[:n]), gt[:n], dataset="nfs"))
    if problems:
        raise ValueError("nfs: annotation and frames disagree:\n  " + "\n  ".join(problems))
    return sequences


# -------------------------------------------------------------------------------------- UAV123
def load_uav123(root: str | Path, version: str = "UAV123") -> list[Sequence]:
    """UAV123 or UAV20L: ``root/anno/{version}/NAME.txt`` and ``root/data_seq/UAV123/FOLDER/``.

    Frames are ``%06d.jpg``; sub-sequences such as bird1_2 cover a range of a shared folder (table
    in ``splits/uav123_ranges.txt``). NaN rows mark frames where the target is out of view.
    """
    if version not in ("UAV123", "UAV20L"):
        raise ValueError(f"uav123: version must be UAV123 or UAV20L, got {version}")
    root = _require_folder(root, "uav123")
    ranges = {
        name: (folder, int(first), int(last))
        for v, name, folder, first, last in _data_lines(_split_file("uav123_ranges.txt"))
        if v == version
    }
    anno_dir = root / "anno" / version
    check_exists([anno_dir, root / "data_seq" / "UAV123"], "uav123")
    anno_files = sorted(anno_dir.glob("*.txt"))
    if not anno_files:
        raise FileNotFoundError(f"uav123: no annotation files in {anno_dir}")
    sequences, needed = [], []
    for anno_file in anno_files:
        gt = read_boxes(anno_file)
        folder, first, _ = ranges.get(anno_file.stem, (anno_file.stem, 1, len(gt)))
        frames = numbered_frames(
            root / "data_seq" / "UAV123" / folder, first, first + len(gt) - 1, 6, ".jpg"
        )
        needed += [frames[0], frames[-1]]
        sequences.append(Sequence(anno_file.stem, tuple(frames), gt, dataset="uav123"))
    check_exists(needed, "uav123 frames")
    return sequences


# --------------------------------------------------------------------------------------- LaSOT
LASOT_SPLITS = ("test", "train", "all")


def lasot_test_names() -> list[str]:
    """The 280 sequence names of LaSOT's test split."""
    return [row[0] for row in _data_lines(_split_file("lasot_test.txt"))]


def load_lasot(root: str | Path, split: str = "test") -> list[Sequence]:
    """LaSOT: ``root/CLASS/CLASS-K/`` (or ``root/CLASS-K/``) with ``img/%08d.jpg``,
    ``groundtruth.txt``, ``full_occlusion.txt`` and ``out_of_view.txt``.

    ``split``: "test" (the 280 evaluation sequences), "train" (the other 1120 present under
    ``root``) or "all". A frame is visible unless fully occluded or out of view.
    """
    if split not in LASOT_SPLITS:
        raise ValueError(f"lasot: split must be one of {', '.join(LASOT_SPLITS)}, got {split!r}")
    root = _require_folder(root, "lasot")

    def folder_of(name: str) -> Path:
        nested = root / name.rsplit("-", 1)[0] / name
        return nested if nested.is_dir() or not (root / name).is_dir() else root / name

    test = lasot_test_names()
    if split == "test":
        names = test
    else:
        present = sorted(
            {p.parent.name for p in root.glob("*/groundtruth.txt")}
            | {p.parent.name for p in root.glob("*/*/groundtruth.txt")}
        )
        names = present if split == "all" else [n for n in present if n not in set(test)]
    folders = [folder_of(n) for n in names]
    check_exists(
        [f / leaf for f in folders for leaf in ("groundtruth.txt", "img")], f"lasot {split} split"
    )
    sequences = []
    for name, folder in zip(names, folders):
        gt = read_boxes(folder / "groundtruth.txt")
        visible = np.ones(len(gt), dtype=bool)
        for flag_file in ("full_occlusion.txt", "out_of_view.txt"):
            if (folder / flag_file).is_file():
                visible &= ~read_flags(folder / flag_file)[: len(gt)]
        frames = numbered_frames(folder / "img", 1, len(gt), 8, ".jpg")
        sequences.append(Sequence(name, tuple(frames), gt, visible, dataset="lasot"))
    return sequences


# ------------------------------------------------------------------------------------- GOT-10k
GOT10K_SPLITS = ("train", "val", "test")


def load_got10k(root: str | Path, split: str = "val") -> list[Sequence]:
    """GOT-10k: ``root/{split}/list.txt`` and ``root/{split}/NAME/%08d.jpg, groundtruth.txt``.

    ``root`` may also be the split folder itself. In train/val a frame is visible when
    ``cover.label`` > 0 (else when ``absence.label`` is 0); the test split has a box for the
    first frame only, the other rows are NaN.
    """
    if split not in GOT10K_SPLITS:
        raise ValueError(f"got10k: split must be one of {', '.join(GOT10K_SPLITS)}, got {split!r}")
    root = _require_folder(root, "got10k")
    split_dir = root if (root / "list.txt").is_file() and root.name == split else root / split
    check_exists([split_dir / "list.txt"], f"got10k {split} split")
    names = read_names(split_dir / "list.txt")
    check_exists([split_dir / n / "groundtruth.txt" for n in names], f"got10k {split} split")
    sequences = []
    for name in names:
        folder = split_dir / name
        gt = read_boxes(folder / "groundtruth.txt")
        frames = image_files(folder)
        if len(gt) < len(frames):
            gt = np.vstack([gt, np.full((len(frames) - len(gt), 4), np.nan)])
        visible = None
        for flag_file, present_when in (("cover.label", True), ("absence.label", False)):
            if (folder / flag_file).is_file():
                visible = read_flags(folder / flag_file) == present_when
                break
        sequences.append(Sequence(name, tuple(frames), gt, visible, dataset="got10k"))
    return sequences


# --------------------------------------------------------------------------------- TrackingNet
def load_trackingnet(root: str | Path, split: str = "test") -> list[Sequence]:
    """TrackingNet: ``root/CHUNK/frames/NAME/{0,1,...}.jpg`` and ``root/CHUNK/anno/NAME.txt``.

    ``split``: "test" (chunk TEST, first-frame box only, other rows NaN), "train" (all TRAIN_k
    chunks present) or a chunk name such as "TRAIN_3".
    """
    root = _require_folder(root, "trackingnet")
    if split == "test":
        chunks = ["TEST"]
    elif split == "train":
        chunks = sorted(p.name for p in root.glob("TRAIN_*") if p.is_dir())
        if not chunks:
            raise FileNotFoundError(f"trackingnet: no TRAIN_* chunk folders in {root}")
    elif split.startswith("TRAIN_") or split == "TEST":
        chunks = [split]
    else:
        raise ValueError(f"trackingnet: split must be test, train or TRAIN_<k>, got {split!r}")
    check_exists([root / c / sub for c in chunks for sub in ("anno", "frames")], "trackingnet")
    anno_files = [f for c in chunks for f in sorted((root / c / "anno").glob("*.txt"))]
    check_exists(
        [f.parent.parent / "frames" / f.stem for f in anno_files], "trackingnet frame folders"
    )
    sequences = []
    for anno_file in anno_files:
        frame_dir = anno_file.parent.parent / "frames" / anno_file.stem
        frames = sorted(image_files(frame_dir), key=lambda p: int(p.stem))
        gt = read_boxes(anno_file)
        if len(gt) < len(frames):
            gt = np.vstack([gt, np.full((len(frames) - len(gt), 4), np.nan)])
        sequences.append(Sequence(anno_file.stem, tuple(frames), gt, dataset="trackingnet"))
    return sequences
