"""The commands' checks of the paths they are given, before any work: an output folder or file
that cannot be written, and an output that would replace or go into an input (one line each,
:class:`~ebmtrack.cli.main.CLIError` naming the flag)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ebmtrack.cli.main import CLIError

__all__ = ["check_not_an_input", "check_output_file", "check_output_folder", "sequence_folder"]


def _folder_problem(folder: Path) -> str | None:
    """Why files cannot be created in ``folder`` (created if missing), or None. Creates
    nothing: a folder that does not exist yet is judged by its nearest existing parent."""
    existing = folder
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        return f"cannot write to {existing}: {err.strerror or err}"
    return None


def check_output_folder(path: Path, flag: str = "--out") -> None:
    """Refuse, before any work, an output folder that is a file, lies under a file or cannot
    be written (CLIError naming ``flag``)."""
    if path.exists() and not path.is_dir():
        raise CLIError(f"{flag} {path}: is a file, not a folder")
    problem = _folder_problem(path)
    if problem:
        raise CLIError(f"{flag} {path}: {problem}")


def check_output_file(path: Path, flag: str) -> None:
    """Refuse an output file path that is a folder, lies under a file, or cannot be written."""
    if path.is_dir():
        raise CLIError(f"{flag} {path}: is a folder, not a file")
    if path.exists() and not path.is_file():
        return  # a device or a pipe (/dev/stdout): written in place
    problem = _folder_problem(path.parent)
    if problem:
        raise CLIError(f"{flag} {path}: {problem}")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a == b or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def sequence_folder(frames: Path) -> Path:
    """The folder of the sequence whose frames are in ``frames``, links resolved: ``frames``
    itself, or its parent when the frames sit in ``img/`` (OTB, LaSOT: the ground truth is
    beside ``img/``)."""
    found = Path(frames).resolve()
    return found.parent if found.name == "img" else found


def check_not_an_input(path: Path, flag: str, inputs: dict[str, Path | None]) -> None:
    """Refuse an output that would replace an input: ``path`` that is one of ``inputs`` (what ->
    path; a link or another name of the same file counts) or lies inside an input folder.
    Both sides are compared with their links resolved, so an output reached through a link
    into an input folder (or an input reached through one) is refused too. CLIError naming
    ``flag``; nothing is written by a refused command."""
    target = path.resolve()
    for what, source in inputs.items():
        if source is None or not Path(source).exists():
            continue
        found = Path(source).resolve()
        if found.is_dir() and (target == found or found in target.parents):
            raise CLIError(
                f"{flag} {path}: lies inside the {what} {source}; an output never goes into "
                "its input: give a path outside it"
            )
        if _same_file(target, found):
            raise CLIError(
                f"{flag} {path}: is the {what} itself; an output never replaces its input: "
                "give another path"
            )
