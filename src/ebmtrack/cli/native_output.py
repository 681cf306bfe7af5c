"""Lines that C libraries print to stderr themselves (libjpeg's "Premature end of JPEG file",
FFmpeg's "[mov,mp4,... @ 0x...] moov atom not found"), kept out of the command's own output.

OpenCV's and FFmpeg's log levels are set by the command (``OPENCV_LOG_LEVEL``,
``OPENCV_FFMPEG_LOGLEVEL``), but libjpeg (inside OpenCV's image decoder) writes its warnings to
file descriptor 2 directly. :func:`filtered_stderr` puts a pipe in front of descriptor 2 for the
command's life: what matches :data:`LIBRARY_LINE` is counted, not shown; everything else (our
lines, tqdm's bar, worker processes' output) goes through unchanged, as it comes.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["LIBRARY_LINE", "LibraryLines", "filtered_stderr"]

LIBRARY_LINE = re.compile(
    rb"(Corrupt JPEG data|Premature end of JPEG file|Not a JPEG file|Invalid JPEG file structure"
    rb"|Bogus marker length|Unsupported marker type|Warning: unknown JFIF revision number"
    rb"|libpng (warning|error)|\[[\w ,.-]+ @ 0x[0-9a-f]+\])"
)
_PIECES = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")


@dataclass
class LibraryLines:
    """What the filter held back: how many lines, and the first one."""

    count: int = 0
    first: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, line: bytes) -> None:
        with self._lock:
            if not self.count:
                self.first = line.decode(errors="replace").strip()
            self.count += 1


def _pump(source: int, target: int, held: LibraryLines) -> None:
    while True:
        try:
            chunk = os.read(source, 65536)
        except OSError:
            return
        if not chunk:
            return
        out = []
        for piece in _PIECES.findall(chunk):
            if LIBRARY_LINE.match(piece):
                held.add(piece)
            else:
                out.append(piece)
        try:
            os.write(target, b"".join(out))
        except OSError:
            pass  # the terminal went away: keep draining, or writers would block


@contextmanager
def filtered_stderr() -> Iterator[LibraryLines]:
    """Filter file descriptor 2 for the block (child processes started in it inherit the
    filter); yields the :class:`LibraryLines` held back. Does nothing where stderr is no file
    descriptor."""
    held = LibraryLines()
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (AttributeError, OSError, ValueError):
        yield held
        return
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    pump = threading.Thread(target=_pump, args=(read_end, saved, held), daemon=True)
    pump.start()
    try:
        yield held
    finally:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 2)  # our end of the pipe closes: the pump sees its end
        pump.join(timeout=2)  # a child still holding the pipe open must not hang the exit
        os.close(saved)
        if not pump.is_alive():
            os.close(read_end)
