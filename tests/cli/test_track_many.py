"""``ebmtrack track-many``: the manifest's checks, and local workers writing what ``track``
writes, resumably (the Ray runs: tests/evaluation/test_ray.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import cv2
import pytest
from cli_helpers import generated_sequences

from ebmtrack.cli.main import main

HEADER = "source,x,y,w,h,tracker\n"


def clip(root: Path) -> Path:
    """A video of the first generated sequence's frames (MJPG in .avi: decodes everywhere)."""
    frames = sorted((root / "Square0" / "img").glob("*.png"))
    first = cv2.imread(str(frames[0]))
    path = root / "clip.avi"
    writer = cv2.VideoWriter(
        str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (first.shape[1], first.shape[0])
    )
    for frame in frames:
        writer.write(cv2.imread(str(frame)))
    writer.release()
    return path


def one_error_line(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("ebmtrack track-many: error: "), lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty"),
        ("source,x,y,w\na.mp4,1,2,3\n", "no column 'h'"),
        ("source,x,y,w,h,colour\na.mp4,1,2,3,4,red\n", "unknown column 'colour'"),
        (HEADER, "no rows"),
        (HEADER + "a.mp4,1,2,3,4,kcf\nb.mp4,1,two,3,4,kcf\n", "line 3, column y: 'two'"),
        (HEADER + "a.mp4,1,2,0,4,kcf\n", "line 2: w and h must be > 0"),
        (HEADER + "a.mp4,1,2,3\n", "line 2: 4 fields, the header has 6"),
        (HEADER + "a.mp4,1,2,3,4,kfc\n", "line 2, column tracker"),
        (HEADER + "a.mp4,1,2,3,4,kcf\na.mp4,5,6,7,8,csrt\n", "line 3: output"),
    ],
)
def test_bad_manifest_is_one_line(tmp_path, capsys, text, says):
    manifest = tmp_path / "m.csv"
    manifest.write_text(text)
    line = one_error_line(capsys, ["track-many", str(manifest), "--out", str(tmp_path / "o")])
    assert says in line and "m.csv" in line
    assert not (tmp_path / "o").exists()


def test_ray_refused_without_ray_or_with_workers(tmp_path, capsys, monkeypatch):
    manifest = tmp_path / "m.csv"
    manifest.write_text(HEADER + "a.mp4,1,2,3,4,kcf\n")
    argv = ["track-many", str(manifest), "--out", str(tmp_path / "o"), "--ray"]
    assert "--workers: not used with --ray" in one_error_line(capsys, [*argv, "--workers", "2"])
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else find_spec(name, *a)
    )
    line = one_error_line(capsys, argv)
    assert line.endswith("--ray needs Ray: pip install 'ebmtrack[ray]'")
    evaluate = ["eval", str(tmp_path), "--trackers", "kcf", "--out", str(tmp_path / "e"), "--ray"]
    assert main([*evaluate, "--workers", "0"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("--workers: not used with --ray (Ray runs a task per CPU of the cluster)")
    )
    assert main(evaluate) == 2
    assert capsys.readouterr().err.strip().endswith("--ray needs Ray: pip install 'ebmtrack[ray]'")


def test_local_workers_write_what_track_writes_and_resume(tmp_path, capsys):
    generated_sequences(tmp_path, count=2, frames=12)
    clip(tmp_path)
    manifest = tmp_path / "m.csv"
    manifest.write_text(
        HEADER + "Square0/img,22,20,20,20,kcf\nclip.avi,22,20,20,20,kcf\n"
        "missing.mp4,1,1,5,5,kcf\nSquare1/img,22,21,20,20,csrt\n"
    )
    out = tmp_path / "out"
    argv = ["track-many", str(manifest), "--out", str(out), "--workers", "2", "--no-progress"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "3 done, 0 skipped (done before), 1 failed: line 4 (missing.mp4): " in err
    assert "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["Square0.txt", "Square1.txt", "clip.txt"]
    for source, init, tracker, name in (
        ("Square0/img", "22,20,20,20", "kcf", "Square0.txt"),
        ("clip.avi", "22,20,20,20", "kcf", "clip.txt"),
        ("Square1/img", "22,21,20,20", "csrt", "Square1.txt"),
    ):
        alone = tmp_path / f"alone-{name}"
        argv_track = ["track", str(tmp_path / source), "--init", init, "--tracker", tracker]
        assert main([*argv_track, "--out", str(alone), "--no-progress"]) == 0
        assert (out / name).read_bytes() == alone.read_bytes(), name
    capsys.readouterr()
    (tmp_path / "missing.mp4").write_bytes(b"not a video")  # now there, and does not decode
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "0 done, 3 skipped (done before), 1 failed: line 4 (missing.mp4): " in err


def test_workers_get_absolute_paths_from_a_relative_manifest_and_out(tmp_path, monkeypatch):
    """A worker runs in a folder of its own (a Ray node's is its session's): the sources and
    outputs it is given do not depend on the driver's working folder."""
    from ebmtrack.evaluation import distributed

    generated_sequences(tmp_path, count=1, frames=3)
    (tmp_path / "m.csv").write_text(HEADER + "Square0/img,22,20,20,20,kcf\n")
    given = []
    monkeypatch.setattr(
        distributed, "stream_local", lambda call, tasks, on_done, workers: given.extend(tasks)
    )
    monkeypatch.chdir(tmp_path)
    main(["track-many", "m.csv", "--out", "out", "--no-progress"])
    ((_, (source, _, _, out)),) = given
    assert (
        Path(source) == tmp_path / "Square0" / "img"
        and Path(out) == tmp_path / "out" / "Square0.txt"
    )
