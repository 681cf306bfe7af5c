"""``ebmtrack eval`` on a folder that grows: a new tracker added, the same folder spelled
another way, named variants of one tracker, the table printed, files readable by others."""

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from eval_helpers import eval_argv, sequences_folder

from ebmtrack.cli.main import main
from ebmtrack.evaluation.results import read_options, result_paths
from ebmtrack.evaluation.runner import TrackerSpec, recorded_options


def _auc(out, name):
    return json.loads((out / "metrics.json").read_text())["trackers"][name]["overall"]["auc"]


def test_a_new_tracker_extends_a_folder_spelled_either_way(
    tmp_path, capsys, monkeypatch, drift_tracker
):
    data = sequences_folder(tmp_path / "data")
    peers = tmp_path / "peers"
    peers.mkdir()
    monkeypatch.chdir(tmp_path)
    # kcf with --peer-models (which kcf does not read): nothing recorded for it.
    assert main(eval_argv("data", "runs/e", "kcf", "--peer-models", "peers")) == 0
    assert read_options(tmp_path / "runs/e", "kcf") == {}
    # The same folder, absolute, with a new tracker: accepted; the report has both.
    assert main(eval_argv(data, tmp_path / "runs/e", "drift")) == 0
    out = capsys.readouterr().out
    assert "| kcf |" in out and "| drift |" in out  # the results table, printed
    metrics = json.loads((tmp_path / "runs/e/metrics.json").read_text())
    assert set(metrics["trackers"]) == {"kcf", "drift"}
    # An option equal to the default changes nothing, so it is accepted as the same setting.
    assert main(eval_argv(data, "runs/e", "drift", "--option", "drift.step=0.0")) == 0
    # Another setting is refused, naming the way out.
    assert main(eval_argv(data, "runs/e", "drift", "--option", "drift.step=2")) == 2
    err = capsys.readouterr().err
    assert "use another output folder, or name this setting as a variant" in err
    assert "--trackers drift@NAME" in err


def test_paths_are_recorded_resolved(tmp_path, monkeypatch, drift_tracker):
    (tmp_path / "models").mkdir()
    monkeypatch.chdir(tmp_path)
    relative = TrackerSpec("drift", None, {"model_dir": "models"}, tracker="drift")
    absolute = TrackerSpec("drift", None, {"model_dir": tmp_path / "models"}, tracker="drift")
    assert recorded_options(relative) == recorded_options(absolute)
    assert recorded_options(relative) == {"model_dir": str((tmp_path / "models").resolve())}


def test_named_variants_share_one_report(tmp_path, capsys, drift_tracker):
    data = sequences_folder(tmp_path / "data")
    out = tmp_path / "out"
    flags = ["--option", "DRIFT@exact.step=1"]  # names are case-insensitive
    assert main(eval_argv(data, out, "drift,drift@exact", *flags)) == 0
    assert read_options(out, "drift") == {} and read_options(out, "drift@exact") == {"step": "1"}
    boxes = np.loadtxt(result_paths(out, "drift@exact", 0, "Seq1")[0])
    np.testing.assert_allclose(boxes[:, 0], 8 + np.arange(6))  # the ground truth's x
    # The still box loses the target moving 1 px / frame: IoU (10 - k) / (10 + k) at frame k.
    assert _auc(out, "drift@exact") == round(20 / 21, 6) and _auc(out, "drift") < 0.7
    table = capsys.readouterr().out
    assert table.index("| drift@exact |") < table.index("| drift |")  # sorted by AUC
    assert "drift@exact" in (out / "report.md").read_text()
    assert main(eval_argv(data, out, "drift@Fast!")) == 2
    assert "NAME@VARIANT" in capsys.readouterr().err


def test_result_files_are_readable_by_others(tmp_path, drift_tracker):
    data = sequences_folder(tmp_path / "data", count=1)
    previous = os.umask(0o022)
    try:
        assert main(eval_argv(data, tmp_path / "out", "drift")) == 0
    finally:
        os.umask(previous)
    for path in result_paths(tmp_path / "out", "drift", 0, "Seq0"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    assert stat.S_IMODE((tmp_path / "out/results/drift/options.json").stat().st_mode) == 0o644


PEERS = Path(__file__).resolve().parents[2] / ".." / "shared" / "peers"


@pytest.mark.slow
@pytest.mark.skipif(not (PEERS / "nanotrack_head_sim.onnx").is_file(), reason="no peer models")
def test_the_reported_case_csrt_then_nanotrack_into_one_folder(tmp_path, monkeypatch, capsys):
    # Once refused: "runs/eval3 holds csrt results made with options {}, not {'model_dir': ...}",
    # and again with the folder spelled absolutely.
    data = sequences_folder(tmp_path / "data", count=1)
    monkeypatch.chdir(tmp_path)
    peers = os.path.relpath(PEERS.resolve(), tmp_path)
    assert main(eval_argv("data", "runs/eval3", "csrt", "--peer-models", peers)) == 0
    flags = ["--peer-models", str(PEERS.resolve())]
    assert main(eval_argv(data, tmp_path / "runs/eval3", "nanotrack,csrt", *flags)) == 0
    assert read_options(tmp_path / "runs/eval3", "nanotrack") == {
        "model_dir": str(PEERS.resolve())
    }
    assert "| nanotrack |" in capsys.readouterr().out
