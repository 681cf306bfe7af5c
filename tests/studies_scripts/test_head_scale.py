"""The record of the box heads against their training pairs: rows from the runs' files, replaced
not repeated, and a figure from the record."""

import csv
import json

import head_scale
import pytest


def _eval_folder(tmp_path, name, auc, op75):
    folder = tmp_path / name
    folder.mkdir()
    trackers = {"atom-iounet": {"overall": {"auc": auc, "op75": op75}, "sequences": {}}}
    (folder / "metrics.json").write_text(json.dumps({"trackers": trackers}))
    return folder


def test_eval_rows_are_the_mean_over_seeds_and_replace_an_older_row(tmp_path):
    record = tmp_path / "record.csv"
    folders = [
        _eval_folder(tmp_path, f"s{i}", auc, 0.4) for i, auc in enumerate((0.60, 0.66, 0.69))
    ]
    args = [
        "--record",
        str(record),
        "add-eval",
        "--loss",
        "mse",
        "--pairs",
        "16384",
        "--tracker",
        "atom-iounet",
    ]
    assert head_scale.main(args + [str(f) for f in folders]) == 0
    assert head_scale.main(args + [str(folders[0])]) == 0
    rows = head_scale.read_record(record)
    auc = [r for r in rows if r["measure"] == "auc13_atom-iounet"]
    assert len(auc) == 1 and float(auc[0]["value"]) == pytest.approx(60.0)
    assert "1 seeds" in auc[0]["note"]
    assert [float(r["value"]) for r in rows if r["measure"] == "op75_13_atom-iounet"] == [
        pytest.approx(40.0)
    ]


def test_validation_rows_take_the_pairs_of_their_epoch(tmp_path):
    metrics = tmp_path / "metrics.csv"
    with metrics.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["epoch", "split", "loss", "pairs_seen", "rank_corr", "top1_iou"])
        w.writerow([1, "train", 0.2, 16384, "", ""])
        w.writerow([1, "val", 0.1, "", 0.7, 0.79])
        w.writerow([2, "train", 0.1, 32768, "", ""])
        w.writerow([2, "val", 0.1, "", 0.75, 0.81])
    rows = head_scale.validation_rows(metrics, "nce+", "run")
    got = {(int(r["pairs"]), r["measure"]): float(r["value"]) for r in rows}
    assert got == {
        (16384, "val_rank_corr"): 0.7,
        (16384, "val_top1_iou"): 0.79,
        (32768, "val_rank_corr"): 0.75,
        (32768, "val_top1_iou"): 0.81,
    }


def test_plot_writes_a_png(tmp_path):
    rows = [
        head_scale.row(loss, pairs, "clips_ceiling", 0.8, "")
        for loss in ("mse", "nce+")
        for pairs in (16384, 32768)
    ]
    out = tmp_path / "fig.png"
    head_scale.plot(rows, out, {"atom": 66.0})
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_file_of_the_wrong_kind_is_one_line_and_keeps_the_record(tmp_path, capsys):
    record = tmp_path / "record.csv"
    record.write_text("loss,pairs,measure,value,note\nmse,16384,clips_ceiling,0.8000,x\n")
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"tracks": {}}))
    args = [
        "--record",
        str(record),
        "add-bench",
        "--loss",
        "mse",
        "--pairs",
        "16384",
        "--report",
        str(report),
    ]
    assert head_scale.main(args) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert head_scale.read_record(record)[0]["value"] == "0.8000"


def _sequence_folder(tmp_path, name, aucs, tracker="atom-iounet"):
    folder = tmp_path / name
    folder.mkdir()
    sequences = {q: {"auc": auc, "op75": auc / 2} for q, auc in aucs.items()}
    trackers = {tracker: {"overall": {}, "sequences": sequences}}
    (folder / "metrics.json").write_text(json.dumps({"trackers": trackers}))
    return folder


def test_paired_differences_are_per_sequence_over_the_seeds(tmp_path):
    # side a: two seeds averaging 0.7 and 0.5 on the two sequences; side b: 0.6 and 0.6
    a = [
        _sequence_folder(tmp_path, "a0", {"x": 0.8, "y": 0.4}),
        _sequence_folder(tmp_path, "a1", {"x": 0.6, "y": 0.6}),
    ]
    b = [_sequence_folder(tmp_path, "b0", {"x": 0.6, "y": 0.6}, tracker="atom")]
    got = head_scale.paired(a, "atom-iounet", b, "atom")
    assert got["sequences"]["x"] == pytest.approx((70.0, 60.0))
    assert got["mean_diff"] == pytest.approx(0.0)
    # differences +10 and -10: standard deviation 10 * sqrt(2), over sqrt(2) sequences
    assert got["se"] == pytest.approx(10.0)
    assert got["better"] == 1
    assert got["op75"] == pytest.approx((30.0, 30.0))


def test_paired_refuses_sides_of_different_sequences(tmp_path, capsys):
    a = _sequence_folder(tmp_path, "a", {"x": 0.5, "y": 0.5})
    b = _sequence_folder(tmp_path, "b", {"x": 0.5, "z": 0.5})
    args = ["paired", "--a", str(a), "--b", str(b), "--tracker", "atom-iounet"]
    assert head_scale.main(args) == 2
    assert capsys.readouterr().err.strip() == "error: the two sides do not hold the same sequences"
    with pytest.raises(SystemExit):
        head_scale.main(["paired", "--a", str(a), "--b", str(b)])
    assert "--tracker" in capsys.readouterr().err
