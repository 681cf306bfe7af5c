"""What ``ebmtrack demo`` leaves in its folder: the earlier run's files or this run's, never a
mix; and a ``metrics.json`` that says what the runtime ran with."""

import json

import pytest

from ebmtrack.cli.main import main
from ebmtrack.evaluation import demo
from ebmtrack.evaluation.demo import DemoConfig, run_demo

NAMES = ["demo.mp4", "demo.gif", "boxes.txt", "success.png", "metrics.json"]  # as written


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_an_interrupted_demo_keeps_the_earlier_files_whole(tmp_path, capsys, monkeypatch):
    out = tmp_path / "demo"
    argv = ["demo", "--tracker", "kcf", "--max-frames", "12", "--no-progress", "--out"]
    assert main([*argv, str(out)]) == 0
    earlier = _snapshot(out)
    assert sorted(earlier) == sorted(NAMES)
    capsys.readouterr()
    drawn = []

    def stopped_at_frame_6(*args, **kwargs):  # Ctrl-C while the video is being written
        drawn.append(1)
        if len(drawn) == 6:
            raise KeyboardInterrupt
        return draw(*args, **kwargs)

    draw = demo.draw_track
    monkeypatch.setattr(demo, "draw_track", stopped_at_frame_6)
    assert main([*argv, str(out)]) == 130
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert (
        line
        == f"ebmtrack demo: interrupted; {out} keeps the earlier {', '.join(NAMES)} as they were"
    )
    assert _snapshot(out) == earlier  # no temporary file left, nothing truncated
    monkeypatch.undo()
    assert main([*argv, str(out)]) == 0  # and the next run replaces them all
    assert _snapshot(out).keys() == earlier.keys()


def test_an_interrupted_first_demo_writes_nothing(tmp_path, capsys, monkeypatch):
    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(demo, "score_run", stopped)  # after the tracking, before any rename
    out = tmp_path / "demo"
    argv = ["demo", "--tracker", "kcf", "--max-frames", "3", "--no-progress", "--out", str(out)]
    assert main(argv) == 130
    assert (
        capsys.readouterr().err.strip() == f"ebmtrack demo: interrupted; nothing written to {out}"
    )
    assert list(out.iterdir()) == []


def test_a_failed_demo_keeps_the_earlier_files(tmp_path, monkeypatch):
    out = tmp_path / "demo"
    run_demo(DemoConfig(out=out, tracker="kcf", max_frames=3, video=False, progress=False))
    earlier = _snapshot(out)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(demo, "plot_success", broken)
    with pytest.raises(OSError):
        run_demo(DemoConfig(out=out, tracker="kcf", max_frames=4, video=False, progress=False))
    assert _snapshot(out) == earlier


@pytest.mark.slow
def test_metrics_say_what_the_default_runtime_ran_with(tmp_path):
    out = tmp_path / "demo"
    run_demo(DemoConfig(out=out, max_frames=3, video=False, progress=False))  # atom, the runtime
    metrics = json.loads((out / "metrics.json").read_text())
    made_by = metrics["produced_by"]["tracker"]
    assert made_by["runtime"] == "lite"
    # one backbone pass: the siamese estimator's, float32 (the export's manifest names it)
    assert metrics["backbone"] == made_by["backbone"] == "nanotrack-v3"
    assert metrics["weights"] == "shipped export atom"
    assert metrics["precision"] == made_by["precision"] == "float32"
    assert metrics["backbone_precision"] == made_by["backbone_precision"] == "float32"
    assert made_by["backbone_runtime"] == "onnx"
    assert metrics["device"] == made_by["device"] == "cpu"
    assert metrics["threads"] == made_by["threads"] == 1  # ONNX Runtime's intra-op threads
    assert len(made_by["backbone_weights_sha256"]) == 64
    assert "torch_threads" not in metrics
    nulls = [key for key, value in metrics.items() if value is None]
    assert nulls == [], f"null in metrics.json: {nulls}"
    environment = metrics["produced_by"]["environment"]
    assert None not in [environment[k] for k in ("onnxruntime", "opencv", "numpy", "ebmtrack")]
    assert environment.get("torch", "not installed") is not None
