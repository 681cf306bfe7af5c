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

The exports shipped in the package (:mod:`ebmtrack.exports`) store their large files once, beside
the other shipped weights, and compressed: such a file's entry has ``"stored": {"path": ...,
"sha256": ...}``, a path relative to the export folder (at most two folders up, ending ``.xz``
where the file is LZMA-compressed) and the sha256 of the stored bytes, which is what is
checked; ``sha256`` and ``bytes`` stay those of the file itself, as ``ebmtrack export`` writes
it. :meth:`Export.source` gives such a file decompressed, in memory.
"""

from __future__ import annotations

import hashlib
import json
import lzma
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
    "read_json_object",
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
    for name, entry in files.items():
        if Path(name).name != name or name in (MANIFEST, "", ".", ".."):
            raise ValueError(f"{folder / MANIFEST}: file name {name!r} is not a plain name")
        stored = entry.get("stored")
        if stored is not None:
            _check_stored(folder, name, stored)
    return manifest


def _check_stored(folder: Path, name: str, stored) -> None:
    """A ``stored`` entry: ``{"path": relative path, "sha256": ...}``, the path at most two
    folders up from the export and then plain names."""
    where = f"{folder / MANIFEST}: file {name!r}"
    if not (
        isinstance(stored, dict)
        and isinstance(stored.get("path"), str)
        and isinstance(stored.get("sha256"), str)
    ):
        raise ValueError(f"{where}: 'stored' must be {{'path': ..., 'sha256': ...}}")
    parts = Path(stored["path"]).parts
    ups = len(parts) - len([p for p in parts if p != ".."])
    if (
        Path(stored["path"]).is_absolute()
        or ups > 2
        or parts[:ups] != ("..",) * ups
        or not parts[ups:]
        or any(p in ("", ".") for p in parts[ups:])
    ):
        raise ValueError(f"{where}: stored path {stored['path']!r} is not allowed")


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
        """Where a file of the export is stored, by its manifest name (KeyError if it lists
        none): in the folder, or where its ``stored`` entry says (compressed where that ends
        in ``.xz``: :meth:`source`)."""
        entry = self.manifest["files"][name]
        stored = entry.get("stored")
        return self.folder / (stored["path"] if stored else name)

    def source(self, name: str) -> Path | bytes:
        """A file of the export as its readers take it: its path, or its bytes where it is
        stored compressed."""
        path = self.path(name)
        if path.suffix == ".xz":
            return lzma.decompress(path.read_bytes())
        return path

    def has(self, name: str) -> bool:
        return name in self.manifest["files"]


def _check_value(name: str, value) -> None:
    """Parameters are JSON numbers, booleans, strings or (nested) lists of them, finite, or
    null (an option left unset: ``siamese_penalty`` None is the siamese model's own value)."""
    if value is None or isinstance(value, bool | str):
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
        stored = entry.get("stored")
        path = folder / (stored["path"] if stored else name)
        if not path.is_file():
            raise ValueError(f"{path}: missing (the manifest lists it)")
        if file_sha256(path) != (stored or entry)["sha256"]:
            raise ValueError(f"{path}: sha256 differs from the manifest's (a changed file)")
    if PARAMS not in manifest["files"]:
        raise ValueError(f"{folder / MANIFEST}: lists no {PARAMS}")
    raw = _read_json(folder / PARAMS, "the tracker's parameters")
    for name, value in raw.items():
        _check_value(name, value)
    params = {name: _as_tuples(value) for name, value in raw.items()}
    return Export(folder, manifest, params)


def read_json_object(export: Export, name: str) -> dict:
    """The JSON object in the export's file ``name`` (its calibrator); ValueError for another
    JSON value."""
    data = json.loads(export.path(name).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{export.folder / name}: must hold a JSON object")
    return data
