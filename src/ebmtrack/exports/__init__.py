"""The exports shipped in the package: every registered tracker the torch-free runtime
(:mod:`ebmtrack.lite`) runs, as ``ebmtrack export`` writes it with the tracker's default options,
one folder per tracker (``exports/NAME/``: its manifest, parameters and calibrator). Their large
files are stored once, LZMA-compressed, beside the other shipped weights (``ebmtrack/weights``,
the weights table's role ``export``; NanoTrack's two files are the ones shipped there already),
and each manifest points at them (:mod:`ebmtrack.lite.files`). They hold the backbone file the
runtime runs by default only (int8; the float32 file of ``backbone_runtime="onnx"`` is left out
for size: ``ebmtrack export`` writes it).

``python scripts/ship_exports.py`` writes them from the torch trackers; ``tests/lite`` checks
each against a fresh export.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["FOLDER", "SHIPPED_EXPORTS", "shipped_export"]

FOLDER = Path(__file__).resolve().parent

SHIPPED_EXPORTS = ("atom", "atom-iounet", "atom-polished", "atom-lt")
"""The registered trackers that ship as exports (``ebmtrack.export.EXPORTABLE``)."""


def shipped_export(name: str) -> Path | None:
    """The folder of tracker ``name``'s shipped export, None where none ships."""
    folder = FOLDER / name
    return folder if name in SHIPPED_EXPORTS and (folder / "manifest.json").is_file() else None
