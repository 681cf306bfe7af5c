import json

import numpy as np
import pytest
from data_scaling import LEVELS, finished_rows, level_config, write_report


def test_slices_are_nested_and_each_keeps_the_held_out_tracks_out(tmp_path):
    configs = {name: level_config(name, "mse", tmp_path) for name in LEVELS}
    parts = [set(c.data.pack_parts) for c in configs.values()]
    assert all(a <= b for a, b in zip(parts, parts[1:]))
    assert configs["a"].data.pack_tracks == 8 and configs["d"].data.pack_tracks == 0
    assert all(c.data.holdout == configs["a"].data.holdout for c in configs.values())
    assert len({c.feature_cache.folder for c in configs.values()}) == len(LEVELS)
    assert level_config("d", "nce+", tmp_path).loss.name == "nce+"


def _row(level, loss, aucs):
    return {
        "level": level,
        "loss": loss,
        "objects": {"a": 8, "d": 20000}[level],
        "validation": {0.2: 50.0, 1.0: 40.0},
        "size_update_rate": 0.2,
        "per_run": [{"s1": a, "s2": b} for a, b in aucs],
        "auc": float(np.mean(aucs)),
    }


def test_report_gathers_every_finished_head_and_pairs_differences_by_sequence(tmp_path):
    for row in (_row("d", "mse", [(70, 50), (72, 52)]), _row("a", "nce+", [(60, 40), (60, 40)])):
        folder = tmp_path / row["level"] / row["loss"]
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps(row))
    rows = finished_rows(tmp_path)
    assert [(r["level"], r["loss"]) for r in rows] == [("a", "nce+"), ("d", "mse")]
    reference = {"per_run": [{"s1": 65.0, "s2": 55.0}], "auc": 60.0, "validation": 50.0}
    write_report(tmp_path, rows, reference)
    table = (tmp_path / "scaling.md").read_text()
    # d/mse: per sequence 71 and 51 against 65 and 55: +6 and -4, mean +1.0, 1 of 2 better.
    # Their spread: 7.07, standard error 5.0.
    assert "| +1.0 (5.0) | 1 of 2 |" in table
    # a/nce+: 60 and 40 against 65 and 55: -5 and -15, mean -10.0, none better.
    assert "| -10.0 (5.0) | 0 of 2 |" in table
    assert (tmp_path / "scaling.png").stat().st_size > 0
    # Per sequence, mean of the seeds: s1 is 65 without a head, 71 for d/mse, 60 for a/nce+.
    assert "| s1 | 65.0 | 60.0 | 71.0 |" in table
    with pytest.raises(KeyError):
        level_config("z", "mse", tmp_path)


def test_level_e_is_slice_d_with_each_of_4x_the_pairs_visited_once(tmp_path):
    d, e = level_config("d", "nce+", tmp_path), level_config("e", "nce+", tmp_path)
    assert e.data == d.data and e.trainer == d.trainer
    assert e.feature_cache.folder != d.feature_cache.folder
    steps = e.trainer.epochs * e.trainer.samples_per_epoch
    assert (d.feature_cache.train_pairs, e.feature_cache.train_pairs) == (steps // 4, steps)
    assert not e.trainer.shuffle  # CachedPairs then visits each cached pair once per pass


def test_seeds_are_the_trackers_own_and_seed_0_resumes_the_default_folder(tmp_path, monkeypatch):
    import data_scaling

    calls = []

    def fake_track(out, name, sequences, options, runs, workers):
        calls.append((out.name, dict(options), runs))
        return [{"s": float(options.get("seed", 0))}]

    monkeypatch.setattr(data_scaling, "track", fake_track)
    per_run = data_scaling.track_seeds(tmp_path / "test", "atom", [], {"a": 1}, 3, 1)
    assert calls == [
        ("test", {"a": 1}, 1),  # the default seed 0: the options of the earlier runs
        ("test-seed1", {"a": 1, "seed": 1}, 1),
        ("test-seed2", {"a": 1, "seed": 2}, 1),
    ]
    assert per_run == [{"s": 0.0}, {"s": 1.0}, {"s": 2.0}]


def test_each_loss_is_paired_with_mse_seed_by_seed(tmp_path):
    rows = [
        _row("d", "mse", [(70, 50), (72, 52)]),
        _row("d", "nce+", [(74, 49), (72, 56)]),
    ]
    reference = {"per_run": [{"s1": 65.0, "s2": 55.0}], "auc": 60.0, "validation": 50.0}
    write_report(tmp_path, rows, reference)
    table = (tmp_path / "scaling.md").read_text()
    # Seed 0: +4 and -1, mean +1.5; seed 1: 0 and +4, mean +2.0; spread of (1.5, 2.0) is 0.35.
    # Seed means by sequence: +2.0 and +1.5, both better; their SE is 0.25.
    assert "| d | nce+ - mse | +1.5 / +2.0 | +1.8 | 0.4 | 0.2 | 2 of 2 |" in table
