"""Pack result files in the formats the GOT-10k and TrackingNet evaluation servers accept.

- GOT-10k: a zip with one folder per sequence, ``NAME/NAME_001.txt`` (one per run, comma
  separated ``x,y,w,h``) and ``NAME/NAME_time.txt`` (one comma-separated column per run), as the
  got10k toolkit writes them. Deterministic trackers may submit a single run.
- TrackingNet: a flat zip of ``NAME.txt`` (comma separated, 2 decimals) for one run.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence as Seq
from pathlib import Path

import numpy as np

from ebmtrack.evaluation.results import has_result, read_result

PACK_FORMATS = ("got10k", "trackingnet")


def _text(array: np.ndarray, fmt: str) -> str:
    buffer = io.StringIO()
    np.savetxt(buffer, array, fmt=fmt, delimiter=",")
    return buffer.getvalue()


def _require_results(out_dir: Path, tracker: str, runs: Seq[int], names: Seq[str]) -> None:
    missing = [
        f"{n} run {r}" for r in runs for n in names if not has_result(out_dir, tracker, r, n)
    ]
    if missing:
        shown = ", ".join(missing[:20]) + (
            f" ... ({len(missing)} in all)" if len(missing) > 20 else ""
        )
        raise FileNotFoundError(f"cannot pack {tracker}: missing results for {shown}")


def pack_got10k(
    out_dir: str | Path, tracker: str, sequence_names: Seq[str], runs: int, zip_path: str | Path
) -> Path:
    """Zip ``tracker``'s runs 0..runs-1 of every sequence for the GOT-10k server."""
    out_dir = Path(out_dir)
    _require_results(out_dir, tracker, range(runs), sequence_names)
    zip_path = Path(zip_path)
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sequence_names:
            columns = []
            for run in range(runs):
                boxes, times = read_result(out_dir, tracker, run, name)
                archive.writestr(f"{name}/{name}_{run + 1:03d}.txt", _text(boxes, "%.4f"))
                columns.append(times if times is not None else np.full(len(boxes), np.nan))
            archive.writestr(f"{name}/{name}_time.txt", _text(np.stack(columns, axis=1), "%.8f"))
    return zip_path


def pack_trackingnet(
    out_dir: str | Path, tracker: str, sequence_names: Seq[str], zip_path: str | Path, run: int = 0
) -> Path:
    """Zip run ``run`` of ``tracker`` on every sequence for the TrackingNet server."""
    out_dir = Path(out_dir)
    _require_results(out_dir, tracker, [run], sequence_names)
    zip_path = Path(zip_path)
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sequence_names:
            boxes, _ = read_result(out_dir, tracker, run, name)
            archive.writestr(f"{name}.txt", _text(boxes, "%.2f"))
    return zip_path
