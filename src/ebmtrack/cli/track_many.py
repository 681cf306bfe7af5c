"""``ebmtrack track-many``: ``ebmtrack track`` over the videos of a manifest, in local worker
processes or as Ray tasks.

The manifest is a CSV file with a header: ``source,x,y,w,h`` (the video file or frame folder,
relative to the manifest's folder, and its first box) and optionally ``tracker`` (default
``track``'s) and ``out`` (the boxes file, relative to ``--out``; default ``NAME.txt`` after the
source). One video is one task, tracked as ``ebmtrack track SOURCE --init X,Y,W,H --tracker
TRACKER --out FILE --threads 1`` would: the same file. Outputs are renamed into place when
complete, so a file that exists is finished and a rerun skips it; a task that fails (a file that
does not exist or does not decode) is one line, and the others go on.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import glob
import io
import logging
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ebmtrack.cli.main import CLIError, add_progress_argument, positive_int
from ebmtrack.cli.ray_option import add_ray_argument, ray_target

logger = logging.getLogger("ebmtrack")

REQUIRED = ("source", "x", "y", "w", "h")
OPTIONAL = ("tracker", "out")
DEFAULT_TRACKER = "atom"  # track's --tracker default


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "track-many",
        help="track the videos of a manifest (CSV), in worker processes or on a Ray cluster",
        description=(
            "Track every video of MANIFEST, a CSV file with a header source,x,y,w,h (a video "
            "file or frame folder, relative to the manifest's folder, and its first box) and "
            "optional columns tracker (default atom) and out (the boxes file, relative to "
            "--out; default NAME.txt after the source). Each output is what ebmtrack track "
            "writes for that video; an output that exists is finished and skipped, so the "
            "same command resumes. A video that fails is one line; the others go on."
        ),
    )
    parser.add_argument("manifest", type=Path, help="CSV file: source,x,y,w,h[,tracker][,out]")
    parser.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="folder of the boxes files"
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        help="worker processes (default 1), one thread each; not with --ray",
    )
    add_ray_argument(parser, "the videos")
    add_progress_argument(parser)
    parser.set_defaults(
        func=run, interrupted_note="finished videos are kept in {out}; the same command resumes"
    )


@dataclass(frozen=True)
class Row:
    """One video of the manifest: its line number, source, first box, tracker and output."""

    line: int
    source: Path
    box: tuple[float, float, float, float]
    tracker: str
    out: Path
    named: str  # the source as the manifest writes it

    @property
    def label(self) -> str:
        return f"line {self.line} ({self.named})"


def default_output(source: Path) -> str:
    """``NAME.txt``: a video's stem, a folder's name (its parent's for a sequence's ``img``)."""
    if source.suffix and not source.is_dir():
        return source.stem + ".txt"
    name = source.parent.name if source.name == "img" else source.name
    return name + ".txt"


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise CLIError(f"{where}: {text.strip()!r} is not a number")
    return value


def read_manifest(path: Path, out_dir: Path) -> Iterator[Row]:
    """The rows of the manifest, checked as they are read: CLIError (one line naming the line
    and column) for a missing column, an unknown one, a bad number or tracker."""
    from ebmtrack.tracking.registry import canonical_name, get_factory

    if not path.is_file():
        raise CLIError(f"MANIFEST {path}: file not found")
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = [name.strip().lower() for name in next(reader, [])]
        if not header:
            raise CLIError(f"MANIFEST {path}: empty; give a header {','.join(REQUIRED)}")
        for name in REQUIRED:
            if name not in header:
                raise CLIError(
                    f"MANIFEST {path}: no column {name!r} in the header (needs "
                    f"{','.join(REQUIRED)}; optional {','.join(OPTIONAL)})"
                )
        unknown = [name for name in header if name not in REQUIRED + OPTIONAL]
        if unknown:
            raise CLIError(
                f"MANIFEST {path}: unknown column {unknown[0]!r} (columns: "
                f"{','.join(REQUIRED + OPTIONAL)})"
            )
        for fields in reader:
            line = reader.line_num
            if not any(field.strip() for field in fields):
                continue
            if len(fields) != len(header):
                raise CLIError(
                    f"MANIFEST {path} line {line}: {len(fields)} fields, the header has "
                    f"{len(header)}"
                )
            values = {name: field.strip() for name, field in zip(header, fields)}
            where = f"MANIFEST {path} line {line}"
            if not values["source"]:
                raise CLIError(f"{where}, column source: empty")
            box = tuple(_number(values[k], f"{where}, column {k}") for k in ("x", "y", "w", "h"))
            if box[2] <= 0 or box[3] <= 0:
                raise CLIError(f"{where}: w and h must be > 0, got {box[2]:g} and {box[3]:g}")
            tracker = values.get("tracker") or DEFAULT_TRACKER
            try:
                tracker = canonical_name(tracker)
                get_factory(tracker)
            except ValueError as err:
                raise CLIError(f"{where}, column tracker: {err}") from None
            source = path.parent / values["source"]
            out = out_dir / (values.get("out") or default_output(source))
            yield Row(line, source, box, tracker, out, values["source"])


def _track_parser() -> argparse.ArgumentParser:
    from ebmtrack.cli import track
    from ebmtrack.cli.main import ArgumentParser

    parser = ArgumentParser(prog="ebmtrack")
    track.add_parser(parser.add_subparsers(dest="command"))
    return parser


def track_one(source: str, box: str, tracker: str, out: str) -> tuple[str, str]:
    """``ebmtrack track SOURCE --init BOX --tracker TRACKER --out OUT`` in this process:
    ``("done", its summary line)`` or ``("failed", the one line of its error)``. The tracker
    is the one an earlier video of this process left where it is the same
    (:mod:`ebmtrack.evaluation.tracker_cache`): built once per worker, not once per video."""
    from ebmtrack.cli.main import _one_line

    words = ["track", source, "--init", box, "--tracker", tracker, "--out", out]
    words += ["--threads", "1", "--no-progress"]
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            args = _track_parser().parse_args(words)
            args.reuse_trackers = True  # the worker's tracker serves its next video too
            args.func(args)
    except SystemExit:  # an argument refused: argparse's line
        return "failed", said.getvalue().strip().splitlines()[-1]
    except Exception as err:
        if type(err).__module__ == "cv2":
            return "failed", f"OpenCV: {getattr(err, 'err', '') or err}"
        return "failed", _one_line(err)
    return "done", said.getvalue().strip().splitlines()[-1]


def _remove_stale(out: Path) -> None:
    """Remove the temporary files of ``out`` that a worker killed mid-video left (its retry
    wrote ``out``, after them)."""
    finished = out.stat().st_mtime
    for temp in out.parent.glob(f".{glob.escape(out.name)}.*"):
        with contextlib.suppress(OSError):
            if temp.stat().st_mtime < finished:
                temp.unlink()


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ebmtrack.evaluation.distributed import connect_ray, stream_local, stream_ray

    ray = ray_target(args)
    workers = args.workers or 1
    outputs: dict[Path, int] = {}
    total = skipped = 0
    for row in read_manifest(args.manifest, args.out):  # every check before any task
        earlier = outputs.setdefault(row.out.resolve(), row.line)
        if earlier != row.line:
            raise CLIError(
                f"MANIFEST {args.manifest} line {row.line}: output {row.out} is line "
                f"{earlier}'s too; give one of them another out"
            )
        total += 1
    if total == 0:
        raise CLIError(f"MANIFEST {args.manifest}: no rows; give one video per row")
    del outputs
    if args.out.exists() and not args.out.is_dir():
        raise CLIError(f"--out {args.out}: not a folder")
    done, failed = 0, []
    with tqdm(total=total, unit="video", desc="track-many", disable=args.no_progress) as bar:

        def tasks():
            nonlocal skipped
            for row in read_manifest(args.manifest, args.out):
                if row.out.is_file():
                    skipped += 1
                    bar.update()
                    continue
                box = ",".join(f"{v:g}" for v in row.box)
                # Absolute: a worker (a Ray node's above all) runs in a folder of its own.
                source, out = str(row.source.absolute()), str(row.out.absolute())
                yield (row.label, row.out), (source, box, row.tracker, out)

        def on_done(key: tuple[str, Path], value, error: str | None) -> None:
            nonlocal done
            label, out = key
            if error is None and value[0] == "done":
                done += 1
                _remove_stale(out)
            else:
                failed.append(f"{label}: {error or value[1]}")
                logger.warning("%s failed: %s", label, error or value[1])
            bar.update()

        if ray:
            connect_ray(ray if isinstance(ray, str) else None)
            stream_ray(track_one, tasks(), on_done)
        else:
            stream_local(track_one, tasks(), on_done, workers=workers)
    line = (
        f"ebmtrack track-many: {done} done, {skipped} skipped (done before), {len(failed)} failed"
    )
    if failed:
        line += ": " + "; ".join(failed)
    print(line, file=sys.stderr if failed else sys.stdout)
    return 1 if failed else 0
