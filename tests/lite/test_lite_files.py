"""The export folder's checks: what is an export, what a loader refuses."""

import json

import pytest

from ebmtrack.lite import files


def write_export(folder, **extra):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "params.json").write_text(json.dumps({"seed": 0, "aug_rotations": [5, -5]}))
    manifest = {
        "format": files.FORMAT,
        "version": files.VERSION,
        "files": {"params.json": {"sha256": files.file_sha256(folder / "params.json")}},
        **extra,
    }
    (folder / files.MANIFEST).write_text(json.dumps(manifest))
    return folder


def test_a_valid_folder_reads_with_tuples_for_lists(tmp_path):
    export = files.read_export(write_export(tmp_path / "e"))
    assert export.params == {"seed": 0, "aug_rotations": (5, -5)}
    assert files.is_export(tmp_path / "e")


def test_an_extra_file_makes_it_no_longer_an_export_to_replace(tmp_path):
    folder = write_export(tmp_path / "e")
    (folder / "notes.txt").write_text("mine")
    assert not files.is_export(folder)
    files.read_export(folder)  # still readable


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda f: (f / "params.json").write_text('{"seed": 1}'), "sha256 differs"),
        (lambda f: (f / "params.json").unlink(), "missing"),
        (lambda f: (f / files.MANIFEST).write_text("{"), "not a JSON file"),
        (lambda f: (f / files.MANIFEST).write_text('{"format": "x"}'), "not an ebmtrack export"),
        (
            lambda f: (f / files.MANIFEST).write_text(
                json.dumps({"format": files.FORMAT, "version": 99, "files": {}})
            ),
            "version 99 unknown",
        ),
        (
            lambda f: (f / files.MANIFEST).write_text(
                json.dumps(
                    {"format": files.FORMAT, "version": 1, "files": {"../x": {"sha256": "0"}}}
                )
            ),
            "not a plain name",
        ),
        (lambda f: (f / files.MANIFEST).unlink(), "no manifest.json"),
    ],
)
def test_a_broken_export_is_refused_naming_the_problem(tmp_path, change, message):
    folder = write_export(tmp_path / "e")
    change(folder)
    with pytest.raises(ValueError, match=message):
        files.read_export(folder)
    # A changed or missing file still leaves an export (its own files only), which a new
    # export may replace; a broken manifest does not.
    assert files.is_export(folder) == (message in ("sha256 differs", "missing"))


def test_parameters_must_be_plain_finite_values(tmp_path):
    folder = tmp_path / "e"
    folder.mkdir()
    (folder / "params.json").write_text('{"seed": NaN}')
    write = json.loads((folder / "params.json").read_text())  # NaN parses in Python's json
    assert write["seed"] != write["seed"]
    manifest = {
        "format": files.FORMAT,
        "version": files.VERSION,
        "files": {"params.json": {"sha256": files.file_sha256(folder / "params.json")}},
    }
    (folder / files.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="seed must be finite"):
        files.read_export(folder)
