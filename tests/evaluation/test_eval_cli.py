"""``ebmtrack eval`` end to end on a generated sequence."""

import json

import cv2
import numpy as np
import pytest

from ebmtrack.cli.main import main


def _generated_otb(root, n=12, size=20):
    rng = np.random.default_rng(2)
    texture = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
    yy, xx = np.mgrid[0:90, 0:120]
    background = np.stack([xx, yy, (xx + yy) // 2], axis=2).astype(np.uint8)
    (root / "Square" / "img").mkdir(parents=True)
    boxes = []
    for k in range(n):
        x, y = 15 + 3 * k, 20 + k
        frame = background.copy()
        frame[y : y + size, x : x + size] = texture
        cv2.imwrite(str(root / "Square" / "img" / f"{k + 1:04d}.png"), frame[:, :, ::-1])
        boxes.append(f"{x},{y},{size},{size}")
    (root / "Square" / "groundtruth_rect.txt").write_text("\n".join(boxes) + "\n")
    return root


@pytest.mark.slow
def test_eval_runs_scores_and_resumes(tmp_path, capsys):
    data = _generated_otb(tmp_path / "data")
    out = tmp_path / "out"
    argv = [
        "eval",
        str(data),
        "--trackers",
        "csrt",
        "--out",
        str(out),
        "--workers",
        "0",
        "--no-progress",
    ]
    assert main(argv) == 0
    assert "1 sequence runs done" in capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["protocol"] == "otb" and metrics["dataset"] == "folder:data"
    assert metrics["trackers"]["csrt"]["overall"]["auc"] > 0.7
    report = (out / "report.md").read_text()
    assert "| csrt |" in report and "--trackers csrt" in report
    assert main(argv) == 0
    assert "0 sequence runs done, 1 found from before" in capsys.readouterr().out


def test_eval_errors_are_one_line(tmp_path, capsys):
    data = _generated_otb(tmp_path / "data")
    out = str(tmp_path / "out")
    assert main(["eval", str(data), "--trackers", "goturn", "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown tracker 'goturn'" in err and "\n" not in err
    assert main(["eval", str(data), "--trackers", "vit", "--out", out]) == 2
    assert "vitTracker.onnx" in capsys.readouterr().err
    assert main(["eval", str(tmp_path / "nothing"), "--trackers", "kcf", "--out", out]) == 2
    assert "not a folder" in capsys.readouterr().err
    argv = ["eval", str(data), "--trackers", "kcf", "--out", out, "--seen", "Square,Nope"]
    assert main(argv) == 2
    assert "--seen names sequences not in the data set: Nope" in capsys.readouterr().err


def test_eval_packs_got10k_test_results(tmp_path, capsys):
    split = tmp_path / "got" / "test"
    seq = split / "GOT-10k_Test_000001"
    _generated_otb(tmp_path / "tmp")
    seq.mkdir(parents=True)
    for i, frame in enumerate(sorted((tmp_path / "tmp" / "Square" / "img").iterdir())):
        (seq / f"{i + 1:08d}.png").write_bytes(frame.read_bytes())
    first = (tmp_path / "tmp" / "Square" / "groundtruth_rect.txt").read_text().splitlines()[0]
    (seq / "groundtruth.txt").write_text(first + "\n")
    (split / "list.txt").write_text("GOT-10k_Test_000001\n")
    out = tmp_path / "out"
    argv = [
        "eval",
        f"got10k:{tmp_path / 'got'}",
        "--split",
        "test",
        "--trackers",
        "kcf",
        "--out",
        str(out),
        "--workers",
        "0",
        "--no-progress",
        "--pack",
        "got10k",
    ]
    assert main(argv) == 0
    assert (out / "kcf_got10k.zip").is_file()
    report = (out / "report.md").read_text()
    assert "Not scored" in report


def test_eval_tracker_options(tmp_path, capsys):
    data = _generated_otb(tmp_path / "data")
    out = str(tmp_path / "out")
    base = ["eval", str(data), "--trackers", "kcf", "--out", out, "--workers", "0", "--no-progress"]
    assert main(base + ["--option", "kcf.net=x.onnx"]) == 2
    assert "tracker 'kcf' takes no option(s) net" in capsys.readouterr().err
    assert main(base + ["--option", "csrt.x=1"]) == 2
    assert "not among --trackers" in capsys.readouterr().err
    assert main(base + ["--option", "kcf"]) == 2
    assert "TRACKER.KEY=VALUE" in capsys.readouterr().err
