"""Result files in pytracking's layout, written atomically.

``OUT/results/TRACKER/default_RRR/SEQ.txt`` holds one ``x y w h`` line per frame (tab separated,
floats, row 1 = the init box) and ``SEQ_time.txt`` the seconds each frame took (init included,
image reading excluded). RRR is the 0-based run index. ``SEQ_confidence.txt``, where a tracker
gives one, has a header line ``score confidence target`` and one line per frame: the tracker's
raw score, its confidence (the probability that the box overlaps the target with IoU > 0.5) and
the target state derived from it (``tracked`` / ``uncertain`` / ``lost`` / ``unknown``;
:class:`~ebmtrack.tracking.base.TargetPresence`), tab separated, ``nan`` where there is none (row
1). ``SEQ_status.txt``, where the tracker's statuses were recorded, holds one line per frame: the
status the tracker reported (:class:`~ebmtrack.tracking.base.TrackStatus`: ``normal``, ``lost``,
``not_found``, ...; ``init`` on row 1), the long-term scores' reading of whether the tracker
says the target is there. Results without these files (older ones, other tools') read as
before. The box file is written last, so its presence means the sequence is complete.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import tempfile
from pathlib import Path

import numpy as np

from ebmtrack.data.datasets import read_boxes
from ebmtrack.files import TEMPORARY_SUFFIX, new_file_mode, write_atomic
from ebmtrack.tracking.base import target_presence

PARAMETER_NAME = "default"


SUPERVISED_NAME = "baseline"  # VOT's supervised experiment: trajectories with reset codes


def run_dir(out_dir: str | Path, tracker: str, run: int, parameter: str = PARAMETER_NAME) -> Path:
    """Folder of the result files of ``tracker``'s run ``run`` (0-based); ``parameter`` is
    ``default`` for one-pass results, :data:`SUPERVISED_NAME` for VOT's supervised ones."""
    return Path(out_dir) / "results" / tracker / f"{parameter}_{run:03d}"


def confidence_path(out_dir: str | Path, tracker: str, run: int, sequence: str) -> Path:
    """The per-frame score and confidence file of one tracker, run and sequence."""
    return run_dir(out_dir, tracker, run) / f"{sequence}_confidence.txt"


def status_path(out_dir: str | Path, tracker: str, run: int, sequence: str) -> Path:
    """The per-frame status file of one tracker, run and sequence."""
    return run_dir(out_dir, tracker, run) / f"{sequence}_status.txt"


def result_paths(
    out_dir: str | Path, tracker: str, run: int, sequence: str, parameter: str = PARAMETER_NAME
) -> tuple[Path, Path]:
    """(boxes file, times file) of one tracker, run and sequence."""
    folder = run_dir(out_dir, tracker, run, parameter)
    return folder / f"{sequence}.txt", folder / f"{sequence}_time.txt"


def remove_unfinished(
    out_dir: str | Path, tracker: str, run: int, sequence: str, parameter: str = PARAMETER_NAME
) -> None:
    """Remove the temporary files a writer killed mid-write (SIGKILL) left of one tracker, run
    and sequence; its finished files stay."""
    box_path, time_path = result_paths(out_dir, tracker, run, sequence, parameter)
    scores_path = confidence_path(out_dir, tracker, run, sequence)
    statuses = status_path(out_dir, tracker, run, sequence)
    for name in (box_path.name, time_path.name, scores_path.name, statuses.name):
        for tmp in box_path.parent.glob(f".{glob.escape(name)}.*{TEMPORARY_SUFFIX}*"):
            tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def _stops_held():
    """SIGINT and SIGTERM wait until the block has ended (where the platform can hold them): a
    stop then never lands between creating a temporary file and renaming or removing it."""
    held = {signal.SIGINT, signal.SIGTERM}
    try:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, OSError, ValueError):  # no POSIX signal masks
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _write_atomic(path: Path, array: np.ndarray | str, fmt: str = "") -> None:
    """:func:`~ebmtrack.files.write_atomic` of a string or a tab-separated table; a stop (SIGINT,
    SIGTERM) arriving meanwhile takes effect after the rename."""

    def write(tmp: Path) -> None:
        with tmp.open("w") as handle:
            if isinstance(array, str):
                handle.write(array)
            else:
                np.savetxt(handle, array, fmt=fmt, delimiter="\t")

    with _stops_held():
        write_atomic(path, write)


def write_result(
    out_dir: str | Path,
    tracker: str,
    run: int,
    sequence: str,
    boxes,
    times=None,
    scores=None,
    statuses=None,
) -> Path:
    """Write boxes (N, 4), per-frame times (N,) and, when given, per-frame (score, confidence)
    pairs ``scores`` (N, 2) and statuses (N,) (strings without white space) atomically; returns
    the boxes file. Without ``times`` (result files of a tool that kept none) no times file is
    written."""
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    box_path, time_path = result_paths(out_dir, tracker, run, sequence)
    if times is not None:
        times = np.asarray(times, dtype=np.float64).reshape(-1)
        if len(times) != len(boxes):
            raise ValueError(f"{len(boxes)} boxes but {len(times)} times")
        _write_atomic(time_path, times, "%.6f")
    else:
        time_path.unlink(missing_ok=True)
    if scores is not None:
        scores = np.asarray(scores, dtype=np.float64).reshape(-1, 2)
        if len(scores) != len(boxes):
            raise ValueError(f"{len(boxes)} boxes but {len(scores)} scores")
        lines = ["score\tconfidence\ttarget"] + [
            f"{score:.6g}\t{confidence:.6g}\t{target_presence(confidence).value}"
            for score, confidence in scores
        ]
        _write_atomic(confidence_path(out_dir, tracker, run, sequence), "\n".join(lines) + "\n")
    if statuses is not None:
        statuses = [str(status) for status in np.asarray(statuses, dtype=object).reshape(-1)]
        if len(statuses) != len(boxes):
            raise ValueError(f"{len(boxes)} boxes but {len(statuses)} statuses")
        if any(not status or len(status.split()) != 1 for status in statuses):
            raise ValueError("a status must be one word")
        _write_atomic(status_path(out_dir, tracker, run, sequence), "\n".join(statuses) + "\n")
    _write_atomic(box_path, boxes, "%.4f")
    return box_path


def has_result(
    out_dir: str | Path, tracker: str, run: int, sequence: str, parameter: str = PARAMETER_NAME
) -> bool:
    """Whether the sequence was completed in an earlier (possibly interrupted) evaluation."""
    return result_paths(out_dir, tracker, run, sequence, parameter)[0].is_file()


def write_trajectory_result(
    out_dir: str | Path, tracker: str, run: int, sequence: str, lines: list[str], times
) -> Path:
    """Write a supervised (VOT) trajectory, one line per frame (``1``, ``2``, ``0`` or
    ``x,y,w,h``), and its times (None: no times file), atomically, trajectory last; returns
    its path."""
    box_path, time_path = result_paths(out_dir, tracker, run, sequence, SUPERVISED_NAME)
    if times is None:
        time_path.unlink(missing_ok=True)
    else:
        _write_atomic(time_path, np.asarray(times, dtype=np.float64).reshape(-1), "%.6f")
    _write_atomic(box_path, np.asarray(lines, dtype=object).reshape(-1, 1), "%s")
    return box_path


def read_result(
    out_dir: str | Path, tracker: str, run: int, sequence: str
) -> tuple[np.ndarray, np.ndarray | None]:
    """Boxes (N, 4) and times (N,) or None when there is no times file.

    Accepts tab, comma or space separators (pytracking and got10k files alike).
    """
    box_path, time_path = result_paths(out_dir, tracker, run, sequence)
    boxes = read_boxes(box_path)
    times = np.loadtxt(time_path, ndmin=1) if time_path.is_file() else None
    return boxes, times


def recorded_value(value) -> str:
    """An option value as ``options.json`` records it: a path (a Path, or text naming an
    existing file or folder) resolved, so that one folder spelled two ways is one value."""
    if isinstance(value, Path) or (isinstance(value, str) and value and os.path.exists(value)):
        return str(Path(value).expanduser().resolve())
    return str(value)


def read_options(out_dir: str | Path, tracker: str) -> dict[str, str] | None:
    """The options recorded for ``tracker``'s results in ``out_dir`` (values through
    :func:`recorded_value`, so that an older record of a relative path compares), or None."""
    path = Path(out_dir) / "results" / tracker / "options.json"
    if not path.is_file():
        return None
    return {k: recorded_value(v) for k, v in json.loads(path.read_text()).items()}


def options_mismatch(out_dir, tracker: str, before: dict, options: dict) -> ValueError:
    return ValueError(
        f"{out_dir} holds {tracker} results made with options {before}, not {options}; use "
        f"another output folder, or name this setting as a variant "
        f"(--trackers {tracker.partition('@')[0]}@NAME)"
    )


def record_options(out_dir: str | Path, tracker: str, options: dict[str, str]) -> None:
    """Record ``options`` as ``OUT/results/TRACKER/options.json``, or check them against the
    record there (ValueError when they differ: results of two settings are never mixed).

    The record is created exclusively (written aside, then hard-linked into place), so that of
    several shares of one evaluation started at once the first one's options are kept and a
    share with other options is refused.
    """
    path = Path(out_dir) / "results" / tracker / "options.json"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        with _stops_held():
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".options.", suffix=".tmp")
            try:
                os.chmod(tmp, new_file_mode())
                with os.fdopen(fd, "w") as handle:
                    handle.write(json.dumps(options, indent=1) + "\n")
                os.link(tmp, path)
            except FileExistsError:
                pass  # another share wrote it first: compared below
            except OSError:  # a file system without hard links: not exclusive, still atomic
                os.replace(tmp, path)
            finally:
                Path(tmp).unlink(missing_ok=True)
    before = read_options(out_dir, tracker)
    if before != {k: recorded_value(v) for k, v in options.items()}:
        raise options_mismatch(out_dir, tracker, before, options)


def read_confidence(
    out_dir: str | Path, tracker: str, run: int, sequence: str
) -> tuple[np.ndarray, np.ndarray] | None:
    """(score (N,), confidence (N,)) of one result, or None when it has no confidence file.
    Raises ValueError for a malformed file."""
    path = confidence_path(out_dir, tracker, run, sequence)
    if not path.is_file():
        return None
    lines = path.read_text().splitlines()
    if not lines or lines[0].split("\t")[:2] != ["score", "confidence"]:
        raise ValueError(f"{path}: expected a header line 'score<TAB>confidence<TAB>target'")
    try:
        values = np.array([[float(v) for v in line.split("\t")[:2]] for line in lines[1:]])
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    values = values.reshape(-1, 2)
    return values[:, 0], values[:, 1]


def read_status(out_dir: str | Path, tracker: str, run: int, sequence: str) -> np.ndarray | None:
    """The statuses (N,) str of one result, or None when it has no status file."""
    path = status_path(out_dir, tracker, run, sequence)
    if not path.is_file():
        return None
    lines = [line.strip() for line in path.read_text().splitlines()]
    return np.array([line for line in lines if line], dtype=str)
