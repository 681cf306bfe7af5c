"""Readers for folders of OTB- or VOT-style sequences (OTB-2015, VOT, any such folder).

A sequence folder holds a ground-truth file (``groundtruth_rect.txt``, ``groundtruth.txt``, or
``groundtruth_rect.1.txt``, ``groundtruth_rect.2.txt``, ... for several targets in one video) and
its frames in ``img/``, ``color/`` or the folder itself. An optional ``frames.txt`` (CSV with a
header naming ``img`` and ``orig_frame``, one line per stored frame) says which frame of the source
video each stored image is, for folders that keep a subsample of a video.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np

from ebmtrack.data.datasets.sequence import (
    Sequence,
    check_exists,
    image_files,
    read_boxes,
    read_names,
)

logger = logging.getLogger("ebmtrack")

FRAME_FOLDERS = ("img", "color")
_TARGET_FILE = re.compile(r"groundtruth_rect\.(\d+)\.txt$")

# OTB-2015 sequences whose annotation covers a range of the frame files, given as
# (first, last) frame numbers as in the benchmark's configSeqs.m. Frame files are numbered from 1,
# so for BlurCar1 the first annotated frame is 0247.jpg. For every other sequence the annotation
# covers the first len(annotation) frames.
OTB_FRAME_RANGES: dict[str, tuple[int, int]] = {
    "BlurCar1": (247, 988),
    "BlurCar3": (3, 359),
    "BlurCar4": (18, 397),
    "David": (300, 770),
}


def _frame_number(path: Path) -> int | None:
    digits = re.findall(r"\d+", path.stem)
    return int(digits[-1]) if digits else None


def _frames_of(folder: Path) -> list[Path]:
    for sub in FRAME_FOLDERS:
        frames = image_files(folder / sub)
        if frames:
            return frames
    return image_files(folder)


def _targets_of(folder: Path) -> list[tuple[str, Path]]:
    """(sequence name, annotation file) pairs of one video folder; several for multi-target."""
    numbered = sorted(
        (int(m.group(1)), p)
        for p in folder.glob("groundtruth_rect.*.txt")
        if (m := _TARGET_FILE.search(p.name)) and p.stat().st_size > 0
    )
    if numbered:
        if len(numbered) == 1:
            return [(folder.name, numbered[0][1])]
        return [(f"{folder.name}_{index}", path) for index, path in numbered]
    for name in ("groundtruth_rect.txt", "groundtruth.txt"):
        if (folder / name).is_file():
            return [(folder.name, folder / name)]
    return []


def read_frame_numbers(path: Path, frames: list[Path]) -> np.ndarray:
    """The ``orig_frame`` column of a ``frames.txt`` (N,) int64, checked against ``frames``.

    Raises ValueError naming the file when a column is missing, a value is not an integer, the
    images listed are not the frames in order, or the numbers do not increase.
    """
    lines = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    header = [h.strip() for h in lines[0].split(",")] if lines else []
    if "img" not in header or "orig_frame" not in header:
        raise ValueError(f"{path}: expected a header with columns img and orig_frame, got {header}")
    image_col, frame_col = header.index("img"), header.index("orig_frame")
    rows = [[v.strip() for v in line.split(",")] for line in lines[1:]]
    names = [frame.name for frame in frames]
    if [row[image_col] if len(row) > image_col else None for row in rows] != names[: len(rows)]:
        raise ValueError(f"{path}: the img column must list the {len(names)} frames in order")
    try:
        numbers = np.array([int(row[frame_col]) for row in rows], dtype=np.int64)
    except (ValueError, IndexError) as err:
        raise ValueError(f"{path}: orig_frame must be an integer on every line") from err
    if np.any(np.diff(numbers) <= 0):
        raise ValueError(f"{path}: orig_frame must increase from line to line")
    return numbers


def _read_attributes(folder: Path) -> tuple[str, ...]:
    path = folder / "attrs.txt"
    if not path.is_file():
        return ()
    return tuple(a.strip() for a in re.split(r"[,\s]+", path.read_text()) if a.strip())


def _read_video(
    folder: Path, dataset: str, frame_ranges: dict[str, tuple[int, int]], problems: dict[str, str]
) -> list[Sequence]:
    """The sequences of one video folder; a broken one goes to ``problems`` (name -> problem)."""
    frames = _frames_of(folder)
    targets = _targets_of(folder)
    if not targets:
        problems[folder.name] = f"{folder}: no groundtruth_rect.txt or groundtruth.txt"
        return []
    if not frames:
        for name, _ in targets:
            problems[name] = f"{folder}: no frames in img/, color/ or the folder itself"
        return []
    sequences = []
    for name, gt_path in targets:
        gt = read_boxes(gt_path)
        seq_frames = frames
        if folder.name in frame_ranges:
            first, last = frame_ranges[folder.name]
            seq_frames = [f for f in frames if first <= (_frame_number(f) or 0) <= last]
        if len(seq_frames) < len(gt):
            problems[name] = (
                f"{folder}: {len(gt)} boxes in {gt_path.name} but only {len(seq_frames)} frames"
            )
            continue
        if len(seq_frames) > len(gt):
            logger.warning(
                "%s: %d boxes in %s for %d frames: the first %d frames are used",
                folder,
                len(gt),
                gt_path.name,
                len(seq_frames),
                len(gt),
            )
        seq_frames = seq_frames[: len(gt)]
        numbers = None
        if (folder / "frames.txt").is_file():
            numbers = read_frame_numbers(folder / "frames.txt", seq_frames)
            if len(numbers) != len(gt):
                problems[name] = f"{folder}: {len(gt)} boxes but {len(numbers)} lines in frames.txt"
                continue
        sequences.append(
            Sequence(
                name=name,
                frames=tuple(seq_frames),
                ground_truth=gt,
                attributes=_read_attributes(folder),
                dataset=dataset,
                frame_numbers=numbers,
            )
        )
    return sequences


def _read_videos(
    folders: list[Path],
    dataset: str,
    frame_ranges: dict[str, tuple[int, int]] | None = None,
    problems: dict[str, str] | None = None,
) -> list[Sequence]:
    """The sequences of ``folders``. A broken one (more boxes than frames, no frames) is left
    out and its problem put in ``problems`` (name -> problem); with ``problems`` None they are
    raised together, as one FileNotFoundError."""
    check_exists(folders, f"{dataset} sequences")
    found: dict[str, str] = {}
    sequences = []
    for folder in folders:
        sequences += _read_video(folder, dataset, frame_ranges or {}, found)
    if problems is not None:
        problems.update(found)
    elif found:
        messages = list(dict.fromkeys(found.values()))
        raise FileNotFoundError(
            f"{dataset}: {len(messages)} problem(s):\n  " + "\n  ".join(messages)
        )
    return sequences


def _sequence_folders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and _targets_of(p))


def load_folder(
    root: str | Path, dataset: str = "folder", problems: dict[str, str] | None = None
) -> list[Sequence]:
    """Every OTB/VOT-style sequence folder under ``root`` (or ``root`` itself if it is one).

    When the annotation has fewer lines than there are frames, the first frames are used (OTB
    ships a few sequences with extra frames, e.g. Football1), with one warning per sequence;
    more lines than frames is an error: one FileNotFoundError lists every broken sequence, or,
    where a ``problems`` dict is given, they are left out and put there (name -> problem).
    """
    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"{dataset}: not a folder: {root}")
    if _targets_of(root):
        return _read_videos([root], dataset, problems=problems)
    folders = _sequence_folders(root)
    if not folders:
        raise FileNotFoundError(
            f"{dataset}: no sequence folders in {root} (expected NAME/groundtruth_rect.txt or "
            "NAME/groundtruth.txt with frames in NAME/img/, NAME/color/ or NAME/)"
        )
    return _read_videos(folders, dataset, problems=problems)


def load_otb(root: str | Path, problems: dict[str, str] | None = None) -> list[Sequence]:
    """OTB-2013/2015 as distributed: ``root/NAME/img/%04d.jpg`` and ``groundtruth_rect.txt``.

    Multi-target videos become NAME_1, NAME_2 (Jogging, Skating2); sequences annotated on a
    range of their frames (David, BlurCar1/3/4) use that range; attributes come from
    ``NAME/attrs.txt`` when present. Broken sequences: as :func:`load_folder`.
    """
    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"otb: not a folder: {root}")
    folders = _sequence_folders(root)
    if not folders:
        raise FileNotFoundError(f"otb: no NAME/groundtruth_rect.txt under {root}")
    return _read_videos(folders, "otb", OTB_FRAME_RANGES, problems)


def load_vot(root: str | Path, problems: dict[str, str] | None = None) -> list[Sequence]:
    """A VOT short-term data set: ``root/list.txt`` and ``root/NAME/groundtruth.txt``.

    Frames are in ``NAME/color/`` (VOT2019 on) or ``NAME/`` (earlier); 4-corner polygons become
    their tightest axis-aligned box. Without ``list.txt`` every sequence folder is read.
    Broken sequences: as :func:`load_folder`.
    """
    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"vot: not a folder: {root}")
    list_file = root / "list.txt"
    if list_file.is_file():
        names = read_names(list_file)
        check_exists([root / n / "groundtruth.txt" for n in names], f"vot sequences of {list_file}")
        folders = [root / n for n in names]
    else:
        folders = _sequence_folders(root)
        if not folders:
            raise FileNotFoundError(f"vot: no list.txt and no NAME/groundtruth.txt under {root}")
    return _read_videos(folders, "vot", problems=problems)
