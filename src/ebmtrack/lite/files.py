"""The folder ``ebmtrack export`` writes and :func:`ebmtrack.lite.load` reads.

::

    manifest.json            format, version, tracker, what each file is, its sha256, and the
                             versions it was exported with
    params.json              the tracker's parameters (its parameter dataclass's fields)
    calibrator.json          the confidence calibrator (where the tracker has one)
    backbone-float32.onnx    the backbone's layers the tracker reads, float32
    backbone-int8.onnx       the same quantized to int8 (where activation ranges ship)
    head-*.onnx, head-predictor.npz   the box head, where the tracker has one
                                       (:mod:`ebmtrack.lite.head`)

Everything read is checked first: the manifest's format and version, every file's sha256
against the manifest, the parameters' names and types; a file that fails is refused with a
ValueError naming it. Arrays are read with ``allow_pickle=False``.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "FORMAT",
    "MANIFEST",
    "VERSION",
    "Export",
    "file_sha256",
    "is_export",
    "read_export",
]

FORMAT = "ebmtrack-lite-export"
VERSION = 1
MANIFEST = "manifest.json"
PARAMS = "params.json"


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path.parent}: no {path.name} ({what})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a JSON file ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: must hold a JSON object")
    return data


def read_manifest(folder: str | Path) -> dict:
    """The manifest of an export folder, its format and version checked (ValueError)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder written by 'ebmtrack export'")
    manifest = _read_json(folder / MANIFEST, "not a folder written by 'ebmtrack export'")
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{folder / MANIFEST}: not an ebmtrack export (format {FORMAT!r})")
    if manifest.get("version") != VERSION:
        raise ValueError(
            f"{folder / MANIFEST}: export version {manifest.get('version')!r} unknown here "
            f"(this runtime reads version {VERSION}): export it again with this version"
        )
    files = manifest.get("files")
    if not isinstance(files, dict) or not all(
        isinstance(name, str) and isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
        for name, entry in files.items()
    ):
        raise ValueError(f"{folder / MANIFEST}: 'files' must map names to {{'sha256': ...}}")
    for name in files:
        if Path(name).name != name or name in (MANIFEST, "", ".", ".."):
            raise ValueError(f"{folder / MANIFEST}: file name {name!r} is not a plain name")
    return manifest


def is_export(folder: str | Path) -> bool:
    """Whether ``folder`` holds an export and nothing else: a valid manifest, and every entry
    of the folder is the manifest or a file it lists (what ``ebmtrack export`` may replace)."""
    try:
        manifest = read_manifest(folder)
    except ValueError:
        return False
    listed = set(manifest["files"]) | {MANIFEST}
    return all(entry.name in listed and entry.is_file() for entry in Path(folder).iterdir())


@dataclass(frozen=True)
class Export:
    """A checked export folder: its ``manifest``, the tracker's ``params`` and ``folder``."""

    folder: Path
    manifest: dict
    params: dict

    def path(self, name: str) -> Path:
        """A file of the export by its manifest name (KeyError if it lists none)."""
        if name not in self.manifest["files"]:
            raise KeyError(name)
        return self.folder / name

    def has(self, name: str) -> bool:
        return name in self.manifest["files"]


def _check_value(name: str, value) -> None:
    """Parameters are JSON numbers, booleans, strings or (nested) lists of them, finite."""
    if isinstance(value, bool | str):
        return
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"{PARAMS}: {name} must be finite, got {value!r}")
        return
    if isinstance(value, list):
        for item in value:
            _check_value(name, item)
        return
    raise ValueError(f"{PARAMS}: {name} has a value of type {type(value).__name__}")


def _as_tuples(value):
    return tuple(_as_tuples(v) for v in value) if isinstance(value, list) else value


def read_export(folder: str | Path) -> Export:
    """Read and check an export folder (ValueError naming the first problem)."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    for name, entry in manifest["files"].items():
        path = folder / name
        if not path.is_file():
            raise ValueError(f"{path}: missing (the manifest lists it)")
        if file_sha256(path) != entry["sha256"]:
            raise ValueError(f"{path}: sha256 differs from the manifest's (a changed file)")
    if PARAMS not in manifest["files"]:
        raise ValueError(f"{folder / MANIFEST}: lists no {PARAMS}")
    raw = _read_json(folder / PARAMS, "the tracker's parameters")
    for name, value in raw.items():
        _check_value(name, value)
    params = {name: _as_tuples(value) for name, value in raw.items()}
    return Export(folder, manifest, params)
