"""Result files made by other tools (pysot, pytracking, the got10k toolkit), copied into this
package's layout (:mod:`ebmtrack.evaluation.results`) so that they are scored as ours are, against
the same ground truth with the same conventions.

Layouts read (``DIR`` is the folder given; ``SEQ`` a sequence name of the data set):

=============  ==============================================  ==================================
layout         files                                           made by
=============  ==============================================  ==================================
``got10k``     ``DIR/SEQ/SEQ_001.txt`` (one per run),          the got10k toolkit (GOT-10k, also
               ``DIR/SEQ/SEQ_time.txt`` (a column per run)     its OTB / LaSOT experiments' zip)
``runs``       ``DIR/PARAM_000/SEQ.txt``, ``PARAM_001/...``,   pytracking (``TRACKER/PARAM_RRR``
               ``SEQ_time.txt`` beside                         given as ``TRACKER``)
``flat``       ``DIR/SEQ.txt``, optional ``DIR/SEQ_time.txt``  pysot (OPE), pytracking (one run),
                                                               the got10k toolkit's OTB results
=============  ==============================================  ==================================

For VOT's supervised experiment, :func:`import_trajectories` reads VOT trajectory files (a line
``1``, ``2``, ``0`` or ``x,y,w,h`` per frame) in pysot's layout, ``DIR/baseline/SEQ/SEQ_001.txt``
(or ``DIR/SEQ/SEQ_001.txt``), one file per run.

Boxes are ``x, y, w, h`` per line, comma, tab or space separated (integers or floats). A sequence
with no file is listed as missing; a file with the wrong number of lines is copied and then
reported as bad by the scoring, as our own would be.
"""

from __future__ import annotations

import re
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ebmtrack.data.datasets import Sequence, read_boxes
from ebmtrack.evaluation.results import record_options, write_result

__all__ = ["ImportSummary", "detect_layout", "import_results", "import_trajectories"]

_RUN_FOLDER = re.compile(r".+_(\d{3})")


@dataclass
class ImportSummary:
    """What :func:`import_results` copied: the layout read, run files per sequence, missing."""

    layout: str
    runs: dict[str, int] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = f"{len(self.runs)} sequence(s) from a {self.layout} folder"
        if self.runs:
            text += f", {max(self.runs.values())} run(s)"
        if self.missing:
            text += f"; no results for {len(self.missing)}: {', '.join(self.missing[:5])}"
            text += " ..." if len(self.missing) > 5 else ""
        return text


def _run_folders(folder: Path) -> list[Path]:
    """``PARAM_000``, ``PARAM_001``, ... in ``folder``, in run order (pytracking)."""
    found = [p for p in folder.iterdir() if p.is_dir() and _RUN_FOLDER.fullmatch(p.name)]
    return sorted(found, key=lambda p: int(_RUN_FOLDER.fullmatch(p.name).group(1)))


def detect_layout(folder: Path, names: Seq[str]) -> str:
    """``got10k``, ``runs`` or ``flat`` (see the module's table) for the result folder
    ``folder`` of the sequences ``names``; ValueError when it holds none of their files."""
    if not folder.is_dir():
        raise ValueError(f"{folder}: not a folder")
    if any((folder / n / f"{n}_001.txt").is_file() for n in names):
        return "got10k"
    if any((run / f"{n}.txt").is_file() for run in _run_folders(folder) for n in names):
        return "runs"
    if any((folder / f"{n}.txt").is_file() for n in names):
        return "flat"
    raise ValueError(
        f"{folder} holds no result file of the data set's sequences (looked for SEQ.txt, "
        "SEQ/SEQ_001.txt and PARAM_000/SEQ.txt)"
    )


def _times(path: Path, run: int, frames: int) -> np.ndarray | None:
    """Seconds per frame of run ``run`` from a times file (a column per run), or None when the
    file is absent or does not fit."""
    if not path.is_file():
        return None
    try:
        table = np.loadtxt(path, delimiter="," if "," in path.read_text() else None, ndmin=2)
    except ValueError:
        return None
    if table.shape[0] == 1 and frames != 1:
        table = table.T  # one line of a single run
    if table.shape[0] != frames or run >= table.shape[1]:
        return None
    return table[:, run]


def _run_files(folder: Path, layout: str, name: str) -> list[tuple[Path, Path]]:
    """(boxes file, times file) of each run of sequence ``name``, in run order."""
    if layout == "got10k":
        files, run, times = [], 1, folder / name / f"{name}_time.txt"
        while (folder / name / f"{name}_{run:03d}.txt").is_file():
            files.append((folder / name / f"{name}_{run:03d}.txt", times))
            run += 1
        return files
    if layout == "runs":
        return [
            (run / f"{name}.txt", run / f"{name}_time.txt")
            for run in _run_folders(folder)
            if (run / f"{name}.txt").is_file()
        ]
    path = folder / f"{name}.txt"
    return [(path, folder / f"{name}_time.txt")] if path.is_file() else []


def import_results(
    folder: str | Path, out_dir: str | Path, tracker: str, sequences: Seq[Sequence]
) -> ImportSummary:
    """Copy another tool's result files of ``sequences`` from ``folder`` into ``out_dir`` as
    tracker ``tracker``'s (``OUT/results/TRACKER/default_RRR/SEQ.txt``; times where the tool
    kept them, per run).

    The source folder is recorded as the tracker's options (``imported_from``), so that results
    of another folder are never mixed in under the same name. Raises ValueError when ``folder``
    holds no result file of ``sequences`` or a file is not a boxes file.
    """
    folder = Path(folder)
    names = [s.name for s in sequences]
    layout = detect_layout(folder, names)
    record_options(out_dir, tracker, {"imported_from": str(folder.resolve()), "layout": layout})
    summary = ImportSummary(layout)
    for sequence in sequences:
        files = _run_files(folder, layout, sequence.name)
        if not files:
            summary.missing.append(sequence.name)
            continue
        for run, (box_file, time_file) in enumerate(files):
            boxes = read_boxes(box_file)
            times = _times(time_file, run if layout == "got10k" else 0, len(boxes))
            write_result(out_dir, tracker, run, sequence.name, boxes, times)
        summary.runs[sequence.name] = len(files)
    return summary


def import_trajectories(
    folder: str | Path, out_dir: str | Path, tracker: str, sequences: Seq[Sequence]
) -> ImportSummary:
    """Copy VOT trajectory files of ``sequences`` (pysot's ``baseline/SEQ/SEQ_001.txt``, ...)
    from ``folder`` into ``out_dir`` as tracker ``tracker``'s supervised results. Raises
    ValueError when ``folder`` holds none or a file is not a trajectory."""
    from ebmtrack.evaluation.results import write_trajectory_result
    from ebmtrack.evaluation.vot import read_trajectory, trajectory_lines

    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder}: not a folder")
    names = [s.name for s in sequences]
    base = folder / "baseline" if (folder / "baseline").is_dir() else folder
    if not any((base / n / f"{n}_001.txt").is_file() for n in names):
        raise ValueError(
            f"{folder} holds no VOT trajectory of the data set's sequences (looked for "
            "baseline/SEQ/SEQ_001.txt and SEQ/SEQ_001.txt)"
        )
    record_options(
        out_dir, tracker, {"imported_from": str(folder.resolve()), "layout": "vot-baseline"}
    )
    summary = ImportSummary("vot-baseline")
    for name in names:
        run = 0
        while (base / name / f"{name}_{run + 1:03d}.txt").is_file():
            boxes, codes = read_trajectory(base / name / f"{name}_{run + 1:03d}.txt")
            lines = trajectory_lines(boxes, codes)
            write_trajectory_result(out_dir, tracker, run, name, lines, None)
            run += 1
        if run:
            summary.runs[name] = run
        else:
            summary.missing.append(name)
    return summary
