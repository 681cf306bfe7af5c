"""``--ray``: ``eval``'s jobs and ``track-many``'s videos as Ray tasks write the files a local
run writes (a Ray of 2 CPUs started by the module)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import generated_sequences  # noqa: E402

from ebmtrack.cli.main import main  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def result_files(folder: Path) -> dict[str, bytes]:
    """The result files but the per-frame times (they vary from run to run)."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted((folder / "results").rglob("*"))
        if path.is_file() and not path.name.endswith("_time.txt")
    }


def test_eval_on_ray_writes_the_local_results(tmp_path, local_ray, capsys):
    data = generated_sequences(tmp_path / "data", count=2, frames=12)
    common = ["eval", f"otb:{data}", "--trackers", "kcf,csrt", "--no-progress"]
    assert main([*common, "--out", str(tmp_path / "local")]) == 0
    assert main([*common, "--out", str(tmp_path / "ray"), "--ray"]) == 0
    assert "4 sequence runs done, 0 found from before, 0 failed" in capsys.readouterr().out
    local, on_ray = result_files(tmp_path / "local"), result_files(tmp_path / "ray")
    assert len(local) == 2 * 2 * 3 + 2 * 2  # boxes, confidences, statuses; options, provenance
    assert on_ray == local
    times = sorted((tmp_path / "ray" / "results").rglob("*_time.txt"))
    assert len(times) == 4
    assert main([*common, "--out", str(tmp_path / "ray"), "--ray"]) == 0  # resumes: all there
    assert "0 sequence runs done, 4 found from before, 0 failed" in capsys.readouterr().out


def test_track_many_on_ray_writes_the_local_outputs(tmp_path, local_ray, capsys):
    generated_sequences(tmp_path, count=2, frames=12)
    manifest = tmp_path / "m.csv"
    manifest.write_text(
        "source,x,y,w,h,tracker,out\nSquare0/img,22,20,20,20,kcf,a.csv\n"
        "Square1/img,22,21,20,20,csrt,\nnone/img,1,1,5,5,kcf,\n"
    )
    common = ["track-many", str(manifest), "--no-progress"]
    assert main([*common, "--out", str(tmp_path / "local")]) == 1
    assert main([*common, "--out", str(tmp_path / "ray"), "--ray"]) == 1
    err = capsys.readouterr().err
    assert "2 done, 0 skipped (done before), 1 failed: line 4 (none/img): " in err
    assert "Traceback" not in err
    for name in ("a.csv", "Square1.txt"):
        on_ray = (tmp_path / "ray" / name).read_bytes()
        assert on_ray == (tmp_path / "local" / name).read_bytes()
    assert sorted(p.name for p in (tmp_path / "ray").iterdir()) == ["Square1.txt", "a.csv"]
