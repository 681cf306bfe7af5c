"""The :class:`Sequence` record every data-set reader returns, and the annotation-file parsers."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ebmtrack.data.io import IMAGE_SUFFIXES, read_image

_SEPARATORS = re.compile(r"[,\s]+")


@dataclass(frozen=True, eq=False)
class Sequence:
    """One single-object tracking sequence; frames are read from disk only when asked for.

    Attributes:
        name: unique name within its data set.
        frames: paths of the N frames, in order.
        ground_truth: (N, 4) float64 boxes (x, y, w, h), 0-based top-left corner; a row of NaN
            where the target is not annotated (e.g. GOT-10k/TrackingNet test: all rows but the
            first).
        visible: (N,) bool, False where the data set flags the target as absent (LaSOT full
            occlusion or out of view, GOT-10k absence); None when the data set has no flags.
        attributes: challenge attributes of the whole sequence (e.g. OTB codes "IV", "SV").
        dataset: name of the data set / layout the sequence was read from.
        frame_numbers: (N,) int64 frame number of each stored frame in its source video, when
            the stored frames are a subsample (the training pack's ``frames.txt``); None when
            frame ``i`` is the video's ``i``-th frame. Frame gaps are measured in these numbers.
    """

    name: str
    frames: tuple[Path, ...]
    ground_truth: np.ndarray
    visible: np.ndarray | None = None
    attributes: tuple[str, ...] = ()
    dataset: str = ""
    frame_numbers: np.ndarray | None = None

    def __post_init__(self) -> None:
        gt = np.asarray(self.ground_truth, dtype=np.float64)
        if gt.ndim != 2 or gt.shape[1] != 4 or len(gt) != len(self.frames):
            raise ValueError(
                f"sequence {self.name}: ground_truth must have shape ({len(self.frames)}, 4), "
                f"got {gt.shape}"
            )
        object.__setattr__(self, "ground_truth", gt)
        object.__setattr__(self, "frames", tuple(Path(p) for p in self.frames))
        if self.visible is not None:
            visible = np.asarray(self.visible, dtype=bool).reshape(-1)
            if len(visible) != len(self.frames):
                raise ValueError(
                    f"sequence {self.name}: visible must have {len(self.frames)} flags, "
                    f"got {len(visible)}"
                )
            object.__setattr__(self, "visible", visible)
        if self.frame_numbers is not None:
            numbers = np.asarray(self.frame_numbers, dtype=np.int64).reshape(-1)
            if len(numbers) != len(self.frames) or np.any(np.diff(numbers) <= 0):
                raise ValueError(
                    f"sequence {self.name}: frame_numbers must be {len(self.frames)} increasing "
                    f"integers, got {numbers.tolist()[:10]}"
                )
            object.__setattr__(self, "frame_numbers", numbers)

    def __len__(self) -> int:
        return len(self.frames)

    def frame(self, index: int, keep_gray: bool = False) -> np.ndarray:
        """Frame ``index`` as uint8 RGB (H, W, 3), or (H, W) for a grayscale file if asked."""
        return read_image(self.frames[index], keep_gray=keep_gray)

    @property
    def init_box(self) -> np.ndarray:
        """The first frame's box (4,), the one a tracker is initialised with."""
        return self.ground_truth[0].copy()

    def annotated(self) -> np.ndarray:
        """(N,) bool: frames whose box is known and whose target is present."""
        gt = self.ground_truth
        mask = np.all(np.isfinite(gt), axis=1) & (gt[:, 2] > 0) & (gt[:, 3] > 0)
        if self.visible is not None:
            mask &= self.visible
        return mask


def polygon_to_box(values: np.ndarray) -> np.ndarray:
    """Tightest axis-aligned box (M, 4) x, y, w, h around polygons (M, 2K) x1, y1, x2, y2, ...

    This is how VOT's 4-corner (possibly rotated) annotations become boxes.
    """
    values = np.asarray(values, dtype=np.float64)
    xs, ys = values[:, 0::2], values[:, 1::2]
    x0, y0 = xs.min(axis=1), ys.min(axis=1)
    return np.stack([x0, y0, xs.max(axis=1) - x0, ys.max(axis=1) - y0], axis=1)


def parse_boxes(text: str, source: str = "annotation") -> np.ndarray:
    """Parse box lines into (N, 4) float64 x, y, w, h.

    Lines may separate numbers by commas, tabs or spaces (OTB mixes them), hold ``NaN`` (LaSOT,
    UAV123 absent frames), or hold 8 numbers, a 4-corner polygon (VOT), which becomes its
    tightest axis-aligned box. Blank lines are skipped. Raises ValueError naming ``source``.
    """
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        try:
            values = [float(v) for v in _SEPARATORS.split(line) if v]
        except ValueError as err:
            raise ValueError(f"{source}, line {number}: not numbers: {line!r}") from err
        if len(values) == 8:
            values = polygon_to_box(np.array([values]))[0].tolist()
        if len(values) != 4:
            raise ValueError(f"{source}, line {number}: expected 4 or 8 numbers, got {len(values)}")
        rows.append(values)
    return np.array(rows, dtype=np.float64).reshape(-1, 4)


def read_boxes(path: str | Path) -> np.ndarray:
    """Read an annotation file with :func:`parse_boxes`."""
    path = Path(path)
    return parse_boxes(path.read_text(), source=str(path))


def read_flags(path: str | Path) -> np.ndarray:
    """Read a file of 0/1 flags (one per line, or comma separated on one line) as (N,) bool."""
    path = Path(path)
    text = path.read_text().replace(",", " ").split()
    try:
        return np.array([int(float(v)) for v in text], dtype=np.int64) != 0
    except ValueError as err:
        raise ValueError(f"{path}: expected 0/1 flags") from err


def read_names(path: str | Path) -> list[str]:
    """Non-empty lines of a list file (GOT-10k / VOT ``list.txt``)."""
    return [line.strip() for line in Path(path).read_text().splitlines() if line.strip()]


def image_files(folder: Path) -> list[Path]:
    """Image files directly in ``folder`` sorted by name (empty list if none or no folder)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def numbered_frames(folder: Path, first: int, last: int, digits: int, suffix: str) -> list[Path]:
    """Paths ``folder/%0{digits}d{suffix}`` for the frame numbers first..last (inclusive)."""
    return [folder / f"{i:0{digits}d}{suffix}" for i in range(first, last + 1)]


def check_exists(paths: Iterable[Path], what: str) -> None:
    """Raise one FileNotFoundError that lists every path of ``paths`` that does not exist."""
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        shown = "\n  ".join(missing[:20])
        more = f"\n  ... and {len(missing) - 20} more" if len(missing) > 20 else ""
        raise FileNotFoundError(f"{what}: {len(missing)} missing path(s):\n  {shown}{more}")


def select(
    sequences: list[Sequence], names: Iterable[str] | None, left_out: Iterable[str] = ()
) -> list[Sequence]:
    """The sequences called ``names`` in that order (all when None); ValueError lists unknowns.
    ``left_out``: names of the data set's sequences that are not in ``sequences`` (broken ones
    a reader left out): valid names, skipped."""
    if names is None:
        return sequences
    by_name = {s.name: s for s in sequences}
    known = {*by_name, *left_out}
    names = list(names)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"unknown sequence(s) {', '.join(unknown)}; valid names: {', '.join(sorted(known))}"
        )
    return [by_name[n] for n in names if n in by_name]
