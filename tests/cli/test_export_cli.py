"""``ebmtrack export``: what it writes, and the inputs it refuses in one line, losing nothing."""

import json

import pytest
from cli_helpers import ebmtrack, error_line


def test_a_folder_holding_other_files_is_refused_and_kept(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    line = error_line(ebmtrack("export", "--tracker", "atom", "--out", out), "export")
    assert "not empty and not an earlier export" in line
    assert (out / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_a_file_as_out_is_refused(tmp_path):
    out = tmp_path / "file"
    out.write_text("x")
    assert "is a file" in error_line(ebmtrack("export", "--out", out), "export")
    assert out.read_text() == "x"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--tracker", "csrt"], "--tracker csrt: cannot be exported"),
        (["--tracker", "atom", "--option", "speed=3"], "speed"),
        (["--tracker", "nosuch"], "nosuch"),
        # the torch tracker's options: checked as it checks them, not refused as the runtime's
        (["--option", "search_size=100"], "search_size=100: search_size must be a multiple of 16"),
        (["--runtime", "lite"], "--runtime lite: an export is made from the torch tracker"),
        (
            ["--tracker", "atom-polished", "--option", "box_climb=ebm"],
            "box_climb 'ebm' is not one the lite runtime runs",
        ),
    ],
)
def test_a_tracker_it_cannot_export_is_one_line(tmp_path, args, message):
    out = tmp_path / "out"
    line = error_line(ebmtrack("export", *args, "--out", out), "export")
    assert message in line
    assert not out.exists()


@pytest.mark.slow
def test_export_writes_a_manifest_of_every_file_and_replaces_an_earlier_export(tmp_path):
    out = tmp_path / "atom"
    done = ebmtrack("export", "--tracker", "atom", "--out", out, "--option", "seed=3")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"exported atom to {out}")
    manifest = json.loads((out / "manifest.json").read_text())
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([*manifest["files"], "manifest.json"])
    assert {"backbone-float32.onnx", "backbone-int8.onnx", "params.json"} <= set(names)
    assert json.loads((out / "params.json").read_text())["seed"] == 3
    assert {"torch", "onnxruntime", "numpy", "opencv", "ebmtrack"} <= set(manifest["versions"])
    again = ebmtrack("export", "--tracker", "atom", "--out", out)
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "params.json").read_text())["seed"] == 0


def test_no_progress_is_taken_as_by_every_command(tmp_path):
    """Refused where export draws no bar, it made scripts that pass it to every command fail."""
    from ebmtrack.cli.main import build_parser

    args = build_parser().parse_args(["export", "--out", str(tmp_path / "x"), "--no-progress"])
    assert args.no_progress is True
