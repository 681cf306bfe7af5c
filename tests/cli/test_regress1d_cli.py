"""``ebmtrack regress1d``'s options reach the study configuration as given."""

import pytest

import ebmtrack.regression1d as regression1d
from ebmtrack.cli.main import main
from ebmtrack.regression1d import StudyConfig, planned_runs


class _Stop(Exception):
    pass


def _planned(monkeypatch, tmp_path, *options):
    """The runs the command would train (the study is stopped before it trains any)."""
    seen = []

    def fake_run_study(config, *args, **kwargs):
        seen.append(config)
        raise _Stop

    monkeypatch.setattr(regression1d, "run_study", fake_run_study)
    with pytest.raises(_Stop):
        main(["regress1d", "--out", str(tmp_path), "--methods", "nce", "--runs", "1", *options])
    return planned_runs(seen[0])


def test_figure2_runs_zero_means_no_figure2_runs(monkeypatch, tmp_path):
    none = _planned(monkeypatch, tmp_path, "--figure2-m", "4,32", "--figure2-runs", "0")
    assert [k.num_samples for k in none] == [1024, 1024]  # the table's run on both data sets
    two = _planned(monkeypatch, tmp_path, "--figure2-m", "4,32", "--figure2-runs", "2")
    assert sorted({(k.num_samples, k.run) for k in two if k.num_samples != 1024}) == [
        (4, 0), (4, 1), (32, 0), (32, 1)
    ]  # fmt: skip
    default = _planned(monkeypatch, tmp_path, "--figure2-m", "4")
    assert len([k for k in default if k.num_samples == 4]) == 2 * StudyConfig().figure2_runs


def test_negative_figure2_runs_is_refused_in_one_line(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["regress1d", "--out", str(tmp_path), "--figure2-runs", "-1"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--figure2-runs" in err and ">= 0" in err
    with pytest.raises(ValueError, match="figure2_runs"):
        StudyConfig(figure2_runs=-1)
    assert not any(tmp_path.iterdir())  # nothing written
