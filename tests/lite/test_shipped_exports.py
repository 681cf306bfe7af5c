"""The exports shipped in the package (:mod:`ebmtrack.exports`): each reads, its stored files are
the weights table's, and a fresh export of its tracker gives the same files."""

import hashlib
import json
import lzma

import pytest

from ebmtrack.exports import SHIPPED_EXPORTS, shipped_export
from ebmtrack.lite.files import read_export
from ebmtrack.weights.table import FOLDER, SHIPPED


def test_every_shipped_export_reads_and_its_stored_files_are_in_the_weights_table():
    table = {entry.file: entry.sha256 for entry in SHIPPED if entry.role == "export"}
    used = set()
    for name in SHIPPED_EXPORTS:
        export = read_export(shipped_export(name))  # every stored sha256 checked
        assert export.manifest["tracker"] == name
        for file, entry in export.manifest["files"].items():
            stored = entry.get("stored")
            if stored is None:
                assert (export.folder / file).is_file()
                continue
            path = export.path(file)
            assert path.parent.resolve() == FOLDER
            if path.suffix == ".xz":
                assert table[path.name] == stored["sha256"]
                used.add(path.name)
                data = lzma.decompress(path.read_bytes())
                assert hashlib.sha256(data).hexdigest() == entry["sha256"]
                assert len(data) == entry["bytes"]
    assert used == set(table)  # no stored file left over


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED_EXPORTS)
def test_a_fresh_export_gives_the_shipped_files(name, tmp_path):
    from ebmtrack.export import export_tracker

    fresh = export_tracker(name, tmp_path / name)
    manifest = json.loads((fresh / "manifest.json").read_text())
    shipped = read_export(shipped_export(name)).manifest
    for key in ("tracker", "options", "backbone", "classifier", "head", "calibrator", "siamese"):
        expected = manifest.get(key)
        if key == "backbone":  # the shipped export keeps the file its runtime runs only
            runtime = expected["runtime"]
            expected = {**expected, "files": {runtime: expected["files"][runtime]}}
        assert shipped.get(key) == expected, key
    for file, entry in shipped["files"].items():
        # byte for byte with this torch and onnx: python scripts/ship_exports.py where they differ
        assert manifest["files"][file]["sha256"] == entry["sha256"], (
            f"{file} differs from a fresh export: run python scripts/ship_exports.py"
        )


@pytest.mark.parametrize("path", ["/etc/passwd", "../../../x.onnx", "../a/../../../x", ".."])
def test_a_stored_path_outside_the_package_is_refused(tmp_path, path):
    manifest = json.loads((shipped_export("atom") / "manifest.json").read_text())
    entry = next(e for e in manifest["files"].values() if "stored" in e)
    entry["stored"]["path"] = path
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="not allowed"):
        read_export(tmp_path)
