"""Writes the exports shipped in the package (:mod:`ebmtrack.exports`) from the torch trackers:
``ebmtrack export`` of each tracker of ``SHIPPED_EXPORTS`` with its default options, then

- the small files (``params.json``, ``calibrator.json``) and the manifest into
  ``src/ebmtrack/exports/NAME/``;
- each large file (``.onnx``, ``.npz``) once, LZMA-compressed, into ``src/ebmtrack/weights/`` as
  ``export_NAME_FILE.xz`` (a file two trackers share, as the backbone of the two trackers with a
  box head, is stored once, named after the first), the manifest's entry pointing at it
  (``stored``: its path and the sha256 of the stored bytes; ``sha256`` stays the file's own, as
  a fresh export's);
- NanoTrack's files and licence: the manifest points at the copies shipped in the weights folder.

Only the backbone file the runtime runs by default is kept (the manifest's ``backbone.runtime``:
int8); the float32 one is left out for size. Prints the weights table's entries (``table.py``) and
the README's rows. Usage (PyTorch installed)::

    python scripts/ship_exports.py
    python scripts/ship_exports.py --keep-graphs   # a change of parameters only

``--keep-graphs`` writes the small files and manifests anew and keeps the stored large files
(``.onnx``, ``.npz``) and their manifest entries as they are: the graphs' float32 bytes depend on
the CPU that exports them (``tests/lite/test_shipped_exports.py``), so a change that leaves them
alone should not swap them for this CPU's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "ebmtrack"
LARGE = (".onnx", ".npz")
# Trackers whose large files are another's (the same graphs: atom-lt is atom's estimator with
# the long-term mode): with --keep-graphs, one not shipped yet keeps that one's entries.
SAME_GRAPHS = {"atom-lt": "atom"}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def ship(
    name: str,
    work: Path,
    exports: Path,
    weights: Path,
    stored: dict[str, str],
    keep_graphs: bool = False,
) -> None:
    """Export ``name`` into ``work`` and write its shipped form; ``stored``: content sha256 ->
    the stored file's name, shared by the trackers. ``keep_graphs``: the large files' entries
    are the shipped manifest's (module docstring)."""
    from ebmtrack.export import export_tracker

    source = export_tracker(name, work / name)
    manifest = json.loads((source / "manifest.json").read_text())
    kept = {}
    if keep_graphs:
        shipped = exports / name / "manifest.json"
        if not shipped.is_file():
            shipped = exports / SAME_GRAPHS[name] / "manifest.json"
        old = json.loads(shipped.read_text())["files"]
        kept = {file: entry for file, entry in old.items() if file.endswith(LARGE)}
    backbone = manifest["backbone"]
    for runtime, file in list(backbone["files"].items()):
        if runtime != backbone["runtime"]:
            del backbone["files"][runtime]
            del manifest["files"][file]
    out = exports / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for file, entry in manifest["files"].items():
        if file in kept:
            manifest["files"][file] = kept[file]
            continue
        data = (source / file).read_bytes()
        assert sha256(data) == entry["sha256"], file
        shipped = weights / file
        if shipped.is_file() and sha256(shipped.read_bytes()) == entry["sha256"]:  # NanoTrack's
            entry["stored"] = {"path": f"../../weights/{file}", "sha256": entry["sha256"]}
        elif file.endswith(LARGE):
            if entry["sha256"] not in stored:
                stored[entry["sha256"]] = f"export_{name}_{file}.xz"
                packed = lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)
                (weights / stored[entry["sha256"]]).write_bytes(packed)
            target = weights / stored[entry["sha256"]]
            entry["stored"] = {
                "path": f"../../weights/{target.name}",
                "sha256": sha256(target.read_bytes()),
            }
        else:
            (out / file).write_bytes(data)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


def main() -> None:
    from ebmtrack.exports import SHIPPED_EXPORTS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=ROOT, help="the package (src/ebmtrack)")
    parser.add_argument(
        "--keep-graphs",
        action="store_true",
        help="keep the stored large files; write the small files and manifests anew",
    )
    args = parser.parse_args()
    exports, weights = args.dest / "exports", args.dest / "weights"
    if not args.keep_graphs:
        for old in weights.glob("export_*.xz"):
            old.unlink()
    stored: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as work:
        for name in SHIPPED_EXPORTS:
            ship(name, Path(work), exports, weights, stored, args.keep_graphs)
            print(f"{name}: {exports / name}")
    if args.keep_graphs:
        return
    print("\n# weights/table.py")
    for file in stored.values():
        tracker, _, part = file[len("export_") : -len(".xz")].partition("_")
        tag = f"{tracker}/{part.rsplit('.', 1)[0]}"
        digest = sha256((weights / file).read_bytes())
        print(f'    ShippedFile(\n        "export",\n        "mobilenetv2",\n        "{tag}",')
        print(f'        "{file}",\n        "{digest}",\n    ),')
    print("\n# weights/README.md")
    for file in stored.values():
        size = (weights / file).stat().st_size
        digest = sha256((weights / file).read_bytes())
        print(f"| `{file}` | {size / 2**20:.2f} MiB | `{digest}` |")


if __name__ == "__main__":
    main()
