"""``ebmtrack eval --shard K/N``: shares of the jobs that together are one evaluation, and
``--report-only``, which builds the one report from them."""

import json

import pytest
from eval_helpers import eval_argv, sequences_folder

from ebmtrack.cli.main import main
from ebmtrack.data.datasets import load_dataset
from ebmtrack.evaluation.runner import Job, TrackerSpec, shard_jobs

FLAGS = ["--runs", "2", "--option", "drift@exact.step=1"]


def _boxes(out):
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted((out / "results").rglob("*"))
        if p.is_file() and not p.name.endswith("_time.txt")
    }


def _without_fps(value):
    if isinstance(value, dict):
        return {k: _without_fps(v) for k, v in value.items() if k != "fps"}
    return value


def test_shards_are_a_partition_balanced_by_frames(tmp_path):
    sequences = load_dataset(str(sequences_folder(tmp_path / "data", count=5)))
    spec = TrackerSpec("t", dict)
    jobs = [Job(spec, r, s) for r in range(3) for s in sequences]
    shares = [shard_jobs(jobs, (k, 4)) for k in range(1, 5)]
    labels = sorted(j.label for share in shares for j in share)
    assert labels == sorted(j.label for j in jobs)  # every job once
    assert [len(s) for s in shares] == [4, 4, 4, 3]  # equal frames per job: 15 jobs over 4
    assert [j.label for j in shard_jobs(list(reversed(jobs)), (2, 4))] == [
        j.label for j in shares[1]
    ]  # the order jobs are listed in does not matter
    with pytest.raises(ValueError, match="1 <= K <= N"):
        shard_jobs(jobs, (5, 4))


def test_shards_together_equal_one_run_and_their_report_its_report(
    tmp_path, capsys, drift_tracker
):
    data = sequences_folder(tmp_path / "data")
    whole, shared = tmp_path / "whole", tmp_path / "shared"
    assert main(eval_argv(data, whole, "drift,drift@exact", *FLAGS)) == 0
    for k in (1, 2, 3):
        assert main(eval_argv(data, shared, "drift,drift@exact", *FLAGS, "--shard", f"{k}/3")) == 0
        assert f"shard {k}/3: 4 sequence runs done" in capsys.readouterr().out
    assert not (shared / "report.md").exists()  # shares write no report
    assert _boxes(shared) == _boxes(whole)
    assert main(["eval", str(data), "--out", str(shared), "--report-only"]) == 0
    assert "| drift@exact |" in capsys.readouterr().out
    merged = json.loads((shared / "metrics.json").read_text())
    single = json.loads((whole / "metrics.json").read_text())
    assert merged["runs"] == 2 and _without_fps(merged) == _without_fps(single)


def test_mixed_options_are_refused(tmp_path, capsys, drift_tracker):
    data = sequences_folder(tmp_path / "data")
    out = tmp_path / "out"
    assert main(eval_argv(data, out, "drift", "--shard", "1/2")) == 0
    assert main(eval_argv(data, out, "drift", "--shard", "2/2", "--option", "drift.step=2")) == 2
    assert "holds drift results made with options {}" in capsys.readouterr().err
    report = ["eval", str(data), "--out", str(out), "--report-only", "--trackers", "drift"]
    assert main([*report, "--option", "drift.step=2"]) == 2
    assert "holds drift results made with options {}" in capsys.readouterr().err
    assert main([*report, "--shard", "1/2"]) == 2
    with pytest.raises(SystemExit) as stop:  # argparse's usage error
        main(eval_argv(data, out, "drift", "--shard", "3/2"))
    assert stop.value.code == 2 and "1 <= K <= N" in capsys.readouterr().err
    assert main(["eval", str(data), "--out", str(tmp_path / "empty"), "--report-only"]) == 2
    assert "holds no results to report" in capsys.readouterr().err
