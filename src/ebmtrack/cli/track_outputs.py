"""What ``ebmtrack track`` writes: the boxes file in its formats, the video or GIF, atomically.

Formats of the boxes file (``--format``; ``auto`` picks by the suffix of ``--out``: ``.csv``,
``.jsonl``, ``.txt``; otherwise, and on stdout, ``txt`` for one target and ``csv`` for several):

- ``txt``: one ``x,y,w,h`` line per frame, what OTB / got10k / pytracking read (one target);
- ``csv``: a ``frame,target,x,y,w,h,score,status,confidence`` header, then one row per target
  per frame (``frame`` counts from 1, the initial box; ``target`` from 0, in the order of
  ``--init``; ``score`` and ``confidence`` ``nan`` where the tracker has none; ``confidence``
  is :attr:`~ebmtrack.tracking.base.TrackResult.confidence`, P(IoU > 0.5));
- ``jsonl``: one JSON object per frame, ``{"frame": 1, "targets": [{"box": [x, y, w, h],
  "score": null, "status": "normal", "confidence": null}, ...]}``.

Every line is whole when flushed, so a partial file is readable in every format.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

FORMATS = ("txt", "csv", "jsonl")
RENDER_SUFFIXES = (".mp4", ".gif", ".avi", ".mkv", ".webm")
SKIPPED = "skipped"  # the status of a frame that could not be read (--on-bad-frame skip)


BOX_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".txt": "txt"}
# Suffixes of pictures and videos: a boxes file (text) is never written under one of them.
MEDIA_SUFFIXES = (
    *RENDER_SUFFIXES, ".mov", ".m4v", ".wmv", ".flv", ".mpg", ".mpeg", ".ts", ".y4m",
    ".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp",
)  # fmt: skip


def check_out_suffix(name: str, out: Path | None) -> None:
    """ValueError when ``--out``'s suffix says another kind of file than ``--format NAME``
    writes: a picture's or video's (``runs/x.mp4``), or another boxes format's
    (``--format csv --out b.txt``). Other suffixes (none, ``.out``) take any format."""
    if out is None:
        return
    suffix = out.suffix.lower()
    if suffix in MEDIA_SUFFIXES:
        raise ValueError(
            f"--out {out}: a boxes file is text, not {suffix}; give --out a .txt, .csv or "
            ".jsonl name (--render FILE writes the video)"
        )
    named = BOX_SUFFIXES.get(suffix)
    if name != "auto" and named is not None and named != name:
        raise ValueError(
            f"--out {out}: the suffix says {named}, --format says {name}; make them agree "
            f"(--format auto picks by the suffix)"
        )


def resolve_format(name: str, out: Path | None, targets: int) -> str:
    """The format ``--format NAME`` means for ``--out`` and this many targets; ValueError for
    ``txt`` with several targets (that format holds one)."""
    if name == "auto":
        suffix = out.suffix.lower() if out is not None else ""
        name = BOX_SUFFIXES.get(suffix, "txt" if targets == 1 else "csv")
    if name == "txt" and targets > 1:
        raise ValueError(
            f"--format txt holds one target's x,y,w,h; {targets} targets need --format csv or "
            "jsonl (or an --out ending in .csv / .jsonl)"
        )
    return name


def _number(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.4f}"


class BoxWriter:
    """Writes one frame's results per call to an open text file, in ``fmt``."""

    def __init__(self, handle, fmt: str) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        self.handle, self.fmt = handle, fmt
        if fmt == "csv":
            handle.write("frame,target,x,y,w,h,score,status,confidence\n")

    def write(self, frame: int, results: list[tuple]) -> None:
        """``results``: one ``(box, score, status, confidence)`` per target; ``frame`` counts
        from 1."""
        if self.fmt == "txt":
            (box, *_), = results
            self.handle.write(",".join(f"{v:.2f}" for v in box) + "\n")
        elif self.fmt == "csv":
            for target, (box, score, status, confidence) in enumerate(results):
                values = ",".join(f"{v:.2f}" for v in box)
                numbers = f"{_number(score)},{status},{_number(confidence)}"
                self.handle.write(f"{frame},{target},{values},{numbers}\n")
        else:
            targets = [
                {
                    "box": [round(float(v), 2) for v in box],
                    "score": None if math.isnan(score) else round(float(score), 4),
                    "status": status,
                    "confidence": None if math.isnan(confidence) else round(float(confidence), 4),
                }
                for box, score, status, confidence in results
            ]
            self.handle.write(json.dumps({"frame": frame, "targets": targets}) + "\n")


class AtomicOutput:
    """A file written under a temporary name in its destination's folder and renamed into place
    by :meth:`commit`; :meth:`keep_partial` moves it to ``PATH.partial`` instead. A path that
    exists and is not a regular file (``/dev/stdout``, a pipe) is written in place.

    ``visible``: write under ``PATH.partial`` itself from the start (live sources: the boxes can
    be read while tracking runs)."""

    def __init__(self, path: Path, what: str, suffix: str = "", visible: bool = False) -> None:
        self.path, self.what = path, what
        self.complete_size: int | None = None  # bytes of whole lines written, when known
        self.direct = path.exists() and not path.is_file()
        if self.direct:
            self.temp = path
            return
        folder = path.parent
        folder.mkdir(parents=True, exist_ok=True)
        if visible:
            self.temp = self.partial
            self.temp.write_bytes(b"")
            return
        handle, name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=suffix)
        os.close(handle)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(name, 0o666 & ~umask)  # the mode open() would give, not mkstemp's 0600
        self.temp = Path(name)

    @property
    def partial(self) -> Path:
        return self.path.with_name(self.path.name + ".partial")

    def commit(self) -> None:
        """Rename into place; a ``PATH.partial`` an earlier, interrupted run left is removed."""
        if not self.direct:
            os.replace(self.temp, self.path)
            self.partial.unlink(missing_ok=True)

    def keep_partial(self) -> Path:
        """Where what was written stays: ``PATH.partial`` (``PATH`` itself when written in
        place)."""
        if self.direct:
            return self.path
        if self.temp.exists():
            if self.complete_size is not None:  # no torn last line after a failed write
                os.truncate(self.temp, self.complete_size)
            os.replace(self.temp, self.partial)
        return self.partial

    def discard(self) -> None:
        if not self.direct:
            self.temp.unlink(missing_ok=True)


def open_renderer(path: Path, temp: Path, fps: float, size: tuple[int, int], count: int | None):
    """The writer of ``--render PATH`` (written to ``temp``): a GIF through the demo's
    :class:`~ebmtrack.evaluation.render.GifWriter` for ``.gif`` (its size budget; with no known
    frame count the first ``max_frames`` frames), else a video through
    :class:`~ebmtrack.evaluation.render.VideoWriter` (H.264 where this OpenCV encodes it)."""
    from ebmtrack.evaluation.render import GifBudget, GifWriter, VideoWriter

    if path.suffix.lower() == ".gif":
        budget = GifBudget()
        return GifWriter(temp, fps, count or budget.max_frames, budget)
    return VideoWriter(temp, fps, size)
