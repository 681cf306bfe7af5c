"""Report files, metrics.json, per-attribute tables, and server packing formats."""

import json
import zipfile

import numpy as np
import pytest

from ebmtrack.data.datasets import Sequence
from ebmtrack.evaluation.packing import pack_got10k, pack_trackingnet
from ebmtrack.evaluation.report import evaluate_results, write_report
from ebmtrack.evaluation.results import write_result
from ebmtrack.evaluation.scoring import GOT10K_PROTOCOL, OTB_PROTOCOL, score_run


def _sequence(name, n=4, attributes=(), gt=None):
    gt = np.tile([10.0, 10.0, 20.0, 20.0], (n, 1)) if gt is None else gt
    return Sequence(name, tuple(f"{name}/{i}.jpg" for i in range(n)), gt, attributes=attributes)


def test_report_tables_json_and_plots(tmp_path):
    sequences = [_sequence("a", attributes=("OCC",)), _sequence("b", attributes=("OCC", "SV"))]
    perfect = np.tile([10.0, 10.0, 20.0, 20.0], (4, 1))
    half = perfect + [10.0, 0, 0, 0]  # IoU 1/3 after frame 1
    for name, boxes in (("a", perfect), ("b", half)):
        write_result(tmp_path, "good", 0, name, perfect, np.full(4, 0.25))
        write_result(tmp_path, "poor", 0, name, boxes, np.full(4, 0.5))
    write_result(tmp_path, "partial", 0, "a", perfect, np.full(4, 0.25))
    evaluations = evaluate_results(
        tmp_path, ["poor", "good", "partial"], sequences, 1, OTB_PROTOCOL
    )
    report = write_report(evaluations, sequences, tmp_path, "toy", OTB_PROTOCOL, 1, "cmd")
    text = report.read_text()
    assert text.index("| good |") < text.index("| poor |")  # ranked by AUC
    assert "| partial |" in text and "1/2 |" in text and "no result for b run 0" in text
    assert "### Per attribute: AUC (%)" in text and "| SV |" in text
    data = json.loads((tmp_path / "metrics.json").read_text())
    good = data["trackers"]["good"]["overall"]
    assert good["auc"] == pytest.approx(20 / 21) and good["fps"] == pytest.approx(4.0)
    # poor: sequence a perfect (AUC 20/21); b has 1 frame at IoU 1 and 3 at 1/3.
    b_auc = (20 * 1 + 3 * 7) / 21 / 4
    assert data["trackers"]["poor"]["sequences"]["b"]["auc"] == pytest.approx(b_auc, abs=1e-6)
    assert data["trackers"]["poor"]["attributes"]["SV"]["auc"] == pytest.approx(b_auc, abs=1e-6)
    assert len(good["success_curve"]) == 21
    assert (tmp_path / "success.png").stat().st_size > 1000
    assert (tmp_path / "precision.png").stat().st_size > 1000


@pytest.mark.slow
def test_report_scores_unseen_sequences_separately(tmp_path):
    sequences = [_sequence("a"), _sequence("b")]
    perfect = np.tile([10.0, 10.0, 20.0, 20.0], (4, 1))
    write_result(tmp_path, "t", 0, "a", perfect, np.full(4, 0.25))  # seen: perfect
    write_result(tmp_path, "t", 0, "b", perfect + [10.0, 0, 0, 0], np.full(4, 0.25))
    evaluations = evaluate_results(tmp_path, ["t"], sequences, 1, OTB_PROTOCOL)
    report = write_report(evaluations, sequences, tmp_path, "toy", OTB_PROTOCOL, 1, seen=["a"])
    data = json.loads((tmp_path / "metrics.json").read_text())["trackers"]["t"]
    # The unseen mean is sequence b's alone, the overall mean both sequences'.
    assert data["unseen_overall"]["auc"] == pytest.approx(data["sequences"]["b"]["auc"])
    both = (data["sequences"]["a"]["auc"] + data["sequences"]["b"]["auc"]) / 2
    assert data["overall"]["auc"] == pytest.approx(both)
    text = report.read_text()
    assert "no model was trained on" in text and "| a (seen) |" in text and "| b |" in text
    assert (tmp_path / "success_unseen.png").stat().st_size > 1000


def test_got10k_protocol_skips_first_frame_and_clips():
    gt = np.array([[0, 0, 10, 10], [0, 0, 10, 10], [-5, 0, 10, 10]], dtype=float)
    sequence = Sequence("s", ("0.jpg", "1.jpg", "2.jpg"), gt, visible=[True, True, True])
    boxes = np.array([[50, 50, 5, 5], [0, 0, 10, 5], [-5, 0, 10, 10]], dtype=float)
    got = score_run(boxes, sequence, GOT10K_PROTOCOL, image_size=(100, 100))
    np.testing.assert_allclose(got.ious, [0.5, 1.0])  # frame 1 excluded
    otb = score_run(boxes, sequence, OTB_PROTOCOL)
    np.testing.assert_allclose(otb.ious, [1.0, 0.5, 1.0])  # frame 1 replaced by ground truth
    with pytest.raises(ValueError, match="2 result boxes for 3 frames"):
        score_run(boxes[:2], sequence)


def test_pack_got10k_and_trackingnet(tmp_path):
    names = ["GOT-10k_Test_000001", "GOT-10k_Test_000002"]
    for run in range(2):
        for name in names:
            write_result(tmp_path, "t", run, name, np.full((3, 4), 1.234567), [0.1, 0.2, 0.3])
    archive = pack_got10k(tmp_path, "t", names, 2, tmp_path / "t_got10k.zip")
    with zipfile.ZipFile(archive) as z:
        assert sorted(z.namelist()) == sorted(
            f"{n}/{n}_{suffix}" for n in names for suffix in ("001.txt", "002.txt", "time.txt")
        )
        times = np.loadtxt(z.open(f"{names[0]}/{names[0]}_time.txt"), delimiter=",")
        assert times.shape == (3, 2)
        assert z.read(f"{names[0]}/{names[0]}_001.txt").decode().splitlines()[0] == ",".join(
            ["1.2346"] * 4
        )
    archive = pack_trackingnet(tmp_path, "t", names, tmp_path / "t_tn.zip")
    with zipfile.ZipFile(archive) as z:
        assert sorted(z.namelist()) == sorted(f"{n}.txt" for n in names)
        assert z.read(f"{names[1]}.txt").decode().splitlines()[0] == "1.23,1.23,1.23,1.23"
    with pytest.raises(FileNotFoundError, match="missing results for .*run 2"):
        pack_got10k(tmp_path, "t", names, 3, tmp_path / "x.zip")
