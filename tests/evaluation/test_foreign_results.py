"""Scoring result files made by other tools (pysot, pytracking, got10k folders) against the same
ground truth: each layout, imported, scores exactly as the same boxes written by us."""

import json

import numpy as np
import pytest
from eval_helpers import eval_argv, sequences_folder

from ebmtrack.cli.main import main
from ebmtrack.evaluation.foreign import detect_layout
from ebmtrack.evaluation.results import read_result


def _ours(tmp_path, capsys):
    """Our own results of drift@exact (boxes = ground truth, x off by one after frame 3) and
    drift on three sequences, two runs."""
    data = sequences_folder(tmp_path / "data")
    out = tmp_path / "out"
    flags = ["--option", "drift@exact.step=1", "--runs", "2"]
    assert main(eval_argv(data, out, "drift,drift@exact", *flags)) == 0
    capsys.readouterr()
    return data, out


def _write_foreign(folder, layout, out, tracker, runs=2):
    """``tracker``'s results in ``out`` rewritten in another tool's layout."""
    for name in ("Seq0", "Seq1", "Seq2"):
        for run in range(runs if layout != "flat" else 1):
            boxes, times = read_result(out, tracker, run, name)
            if layout == "pysot":  # comma separated, as pysot writes them
                path = folder / f"{name}.txt"
                text = "\n".join(",".join(f"{v:.4f}" for v in row) for row in boxes)
            elif layout == "pytracking":  # tab separated integers, PARAM_RRR folders
                path = folder / f"default_{run:03d}" / f"{name}.txt"
                text = "\n".join("\t".join(str(int(v)) for v in row) for row in boxes)
                path.parent.mkdir(parents=True, exist_ok=True)
                np.savetxt(path.with_name(f"{name}_time.txt"), times, fmt="%.6f")
            else:  # got10k: SEQ/SEQ_001.txt, times one column per run
                path = folder / name / f"{name}_{run + 1:03d}.txt"
                text = "\n".join(",".join(f"{v:.4f}" for v in row) for row in boxes)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text + "\n")
    if layout == "got10k":
        for name in ("Seq0", "Seq1", "Seq2"):
            columns = [read_result(out, tracker, r, name)[1] for r in range(runs)]
            np.savetxt(folder / name / f"{name}_time.txt", np.stack(columns, 1), delimiter=",")


@pytest.mark.parametrize(
    ("layout", "detected"), [("pysot", "flat"), ("pytracking", "runs"), ("got10k", "got10k")]
)
def test_imported_results_score_as_ours(tmp_path, capsys, drift_tracker, layout, detected):
    data, out = _ours(tmp_path, capsys)
    foreign = tmp_path / layout
    _write_foreign(foreign, layout, out, "drift")
    assert detect_layout(foreign, ["Seq0"]) == detected
    assert main(eval_argv(data, out, "drift", "--runs", "2", "--import", f"other={foreign}")) == 0
    printed = capsys.readouterr().out
    assert f"other: imported 3 sequence(s) from a {detected} folder" in printed
    assert "| other |" in printed
    metrics = json.loads((out / "metrics.json").read_text())["trackers"]
    ours, theirs = metrics["drift"], metrics["other"]
    # pysot's folder holds one run; drift's two runs are alike, so the scores are too.
    for key in ("auc", "precision", "norm_precision", "ao", "sr50", "op75"):
        assert theirs["overall"][key] == pytest.approx(ours["overall"][key], abs=1e-9)
    assert (theirs["overall"]["fps"] is None) == (layout == "pysot")
    missing = [f"no result for Seq{i} run 1" for i in range(3)] if layout == "pysot" else []
    assert theirs["problems"] == missing


def test_an_import_names_what_it_misses_and_refuses_another_folder(
    tmp_path, capsys, drift_tracker
):
    data, out = _ours(tmp_path, capsys)
    foreign = tmp_path / "pysot"
    _write_foreign(foreign, "pysot", out, "drift@exact")
    (foreign / "Seq2.txt").unlink()
    assert main(eval_argv(data, out, "drift", "--runs", "2", "--import", f"x={foreign}")) == 0
    assert "no results for 1: Seq2" in capsys.readouterr().out
    assert "x: no result for Seq2 run 0" in (out / "report.md").read_text()
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    (elsewhere / "Seq0.txt").write_text("1,2,3,4\n")
    assert main(eval_argv(data, out, "drift", "--import", f"x={elsewhere}")) == 2
    assert "holds x results made with options" in capsys.readouterr().err
    assert main(eval_argv(data, out, "drift", "--import", f"y={tmp_path / 'nothing'}")) == 2
    assert "not a folder" in capsys.readouterr().err
    assert main(eval_argv(data, out, "drift", "--import", f"z={tmp_path / 'data'}")) == 2
    assert "holds no result file of the data set's sequences" in capsys.readouterr().err
