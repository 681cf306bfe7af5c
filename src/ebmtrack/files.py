"""Writing a file so that no reader ever sees half of it: the content goes to a temporary file
beside the target, which is then renamed over it (a rename within a folder is atomic).

An interrupted write (an error, a stop, a crash) leaves the earlier file as it was; a finished
one replaces it whole. Concurrent writers of one target each write their own temporary file, and
the last rename wins. Files that belong together (a video, its boxes and their scores) are
written as one set by :func:`write_atomic_set`: all renamed after the last one is written.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

__all__ = [
    "TEMPORARY_SUFFIX",
    "new_file_mode",
    "write_atomic",
    "write_atomic_set",
    "write_json_atomic",
    "write_text_atomic",
]

TEMPORARY_SUFFIX = ".tmp"
"""The temporary file of ``NAME.EXT`` is ``.NAME.EXT.<random>.tmp.EXT``: hidden, unique, and it
keeps the extension (``numpy.savez`` and the like add one to a name without it)."""


def new_file_mode() -> int:
    """The permissions an ordinary new file gets under this process's umask (0644 under the
    usual 022)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` to write a temporary file in ``path``'s folder (made if missing),
    then rename it to ``path``; returns ``path``.

    ``write`` must write exactly the path it is given. The file gets the permissions of an
    ordinary new file (0644 under the usual umask, not the 0600 of :func:`tempfile.mkstemp`).
    On any error, ``KeyboardInterrupt`` included, the temporary file is removed and ``path`` is
    left as it was.
    """
    return write_atomic_set([path], lambda tmps: write(tmps[0]))[0]


def write_atomic_set(
    paths: Sequence[str | Path],
    write: Callable[[list[Path]], object],
    hold: Callable[[], AbstractContextManager] = contextlib.nullcontext,
) -> list[Path]:
    """:func:`write_atomic` for files that belong together: ``write(tmps)`` writes each of
    ``paths`` to its temporary file (``tmps[i]`` for ``paths[i]``), then all are renamed into
    place, inside ``hold()`` (e.g. with signals held, so that no stop comes between two
    renames); returns ``paths``.

    On any error before the renames, ``KeyboardInterrupt`` included, the temporary files are
    removed and every path is left as it was: the folder holds the earlier set or the new one.
    A temporary file that ``write`` leaves empty is renamed all the same.
    """
    paths = [Path(path) for path in paths]
    tmps: list[Path] = []
    try:
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(
                dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX + path.suffix
            )
            os.close(fd)
            tmps.append(Path(name))
            os.chmod(name, new_file_mode())
        write(list(tmps))
        with hold():
            for tmp, path in zip(tmps, paths):
                os.replace(tmp, path)
    except BaseException:
        for tmp in tmps:
            tmp.unlink(missing_ok=True)
        raise
    return paths


def write_text_atomic(path: str | Path, text: str) -> Path:
    """:func:`write_atomic` of ``text`` (UTF-8)."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json_atomic(path: str | Path, data: object, indent: int | None = 1) -> Path:
    """:func:`write_atomic` of ``data`` as JSON, with a final newline."""
    return write_text_atomic(path, json.dumps(data, indent=indent) + "\n")
