"""Single-object tracking data sets: one :class:`Sequence` record, one reader per layout.

``load_dataset("otb:PATH")`` reads a data set in an explicit layout; ``load_dataset("PATH")``
detects the layout from the files found there (see :func:`detect_layout`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ebmtrack.data.datasets.benchmarks import (
    load_got10k,
    load_lasot,
    load_nfs,
    load_trackingnet,
    load_uav123,
)
from ebmtrack.data.datasets.folder import load_folder, load_otb, load_vot
from ebmtrack.data.datasets.sequence import Sequence, parse_boxes, read_boxes, select

# Layout name -> reader(root, split). Readers without splits ignore split=None.
LAYOUTS: dict[str, Callable[..., list[Sequence]]] = {
    "otb": lambda root, split=None: load_otb(root),
    "nfs": lambda root, split=None: load_nfs(root),
    "uav123": lambda root, split=None: load_uav123(root, split or "UAV123"),
    "lasot": lambda root, split=None: load_lasot(root, split or "test"),
    "got10k": lambda root, split=None: load_got10k(root, split or "val"),
    "trackingnet": lambda root, split=None: load_trackingnet(root, split or "test"),
    "vot": lambda root, split=None: load_vot(root),
    "folder": lambda root, split=None: load_folder(root),
}


def detect_layout(root: str | Path) -> str:
    """Name the layout of the data set at ``root`` from the files there; "folder" as fallback.

    GOT-10k: ``{train,val,test}/list.txt`` or a split folder with ``list.txt`` and
    ``GOT-10k_*`` folders; TrackingNet: ``TEST/`` or ``TRAIN_k/`` chunks; UAV123:
    ``anno/UAV123``; NFS: ``NAME/30/NAME.txt``; LaSOT: ``CLASS/CLASS-K/groundtruth.txt``; VOT:
    ``list.txt`` with ``NAME/groundtruth.txt``. Anything else is read as a folder of OTB/VOT-style
    sequences.
    """
    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"dataset: not a folder: {root}")
    if any((root / s / "list.txt").is_file() for s in ("train", "val", "test")) or (
        (root / "list.txt").is_file() and any(root.glob("GOT-10k_*"))
    ):
        return "got10k"
    if (root / "TEST" / "anno").is_dir() or any(root.glob("TRAIN_*/anno")):
        return "trackingnet"
    if (root / "anno" / "UAV123").is_dir() or (root / "anno" / "UAV20L").is_dir():
        return "uav123"
    if any(root.glob("*/30/*.txt")) or any(root.glob("*/240/*.txt")):
        return "nfs"
    if any(root.glob("*/*-[0-9]*/groundtruth.txt")):
        return "lasot"
    if (root / "list.txt").is_file():
        return "vot"
    return "folder"


def parse_dataset_spec(spec: str) -> tuple[str, Path]:
    """Split ``"layout:PATH"`` into (layout, path); a bare path gets its detected layout."""
    layout, sep, rest = spec.partition(":")
    if sep and layout in LAYOUTS:
        return layout, Path(rest)
    if sep and len(layout) > 1 and not Path(spec).exists():
        raise ValueError(
            f"unknown dataset layout {layout!r}; valid layouts: {', '.join(LAYOUTS)} "
            "(or give a path and let the layout be detected)"
        )
    return detect_layout(spec), Path(spec)


# The readers that can leave a broken sequence out (and say why) instead of refusing the set.
SKIPS_BROKEN: dict[str, Callable[..., list[Sequence]]] = {
    "otb": load_otb,
    "vot": load_vot,
    "folder": load_folder,
}


def load_dataset(
    spec: str,
    split: str | None = None,
    sequences: list[str] | None = None,
    problems: dict[str, str] | None = None,
) -> list[Sequence]:
    """Read the data set named by ``spec`` (``layout:PATH`` or ``PATH``).

    Args:
        spec: e.g. ``"otb:/data/OTB100"``, ``"got10k:/data/GOT-10k"`` or a path.
        split: the split for LaSOT (test/train/all), GOT-10k (train/val/test), TrackingNet
            (test/train/TRAIN_k) and UAV123 (UAV123/UAV20L); each layout's default when None.
        sequences: keep only these sequence names, in this order.
        problems: for the layouts of :data:`SKIPS_BROKEN` (otb, vot, folder), a broken sequence
            among those kept (e.g. more boxes than frames) is left out and its problem put here
            (name -> problem), and a broken one not kept is ignored; without it, or for the
            other layouts, one error names every broken sequence of the data set.
    """
    layout, root = parse_dataset_spec(spec)
    if problems is None or layout not in SKIPS_BROKEN:
        return select(LAYOUTS[layout](root, split), sequences)
    broken: dict[str, str] = {}
    kept = select(SKIPS_BROKEN[layout](root, problems=broken), sequences, left_out=broken)
    problems.update({n: p for n, p in broken.items() if sequences is None or n in sequences})
    return kept


__all__ = [
    "LAYOUTS",
    "Sequence",
    "detect_layout",
    "load_dataset",
    "load_folder",
    "load_got10k",
    "load_lasot",
    "load_nfs",
    "load_otb",
    "load_trackingnet",
    "load_uav123",
    "load_vot",
    "parse_boxes",
    "parse_dataset_spec",
    "read_boxes",
]
