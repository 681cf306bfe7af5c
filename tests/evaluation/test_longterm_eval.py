"""Long-term scores in ``ebmtrack eval``'s report where the ground truth marks frames absent:
OxUvA's TPR / TNR / MaxGM and VOT-LT's Pr / Re / F on a constructed run worked out by hand, the
report of sequences without absences unchanged, and ``eval`` end to end on a folder data set
with NaN rows."""

import json
import math

import cv2
import numpy as np
import pytest
from eval_helpers import eval_argv

from ebmtrack.cli.main import main
from ebmtrack.data.datasets import Sequence
from ebmtrack.evaluation.longterm import (
    LongTermRun,
    frame_scores,
    max_geometric_mean,
    oxuva_points,
    score_long_term,
    score_oxuva,
)
from ebmtrack.evaluation.longterm_report import ABSENT_STATUSES, has_absences
from ebmtrack.evaluation.report import evaluate_results, write_report
from ebmtrack.evaluation.results import read_status, status_path, write_result
from ebmtrack.evaluation.scoring import OTB_PROTOCOL

BOX = [10.0, 10.0, 10.0, 10.0]


def _sequence(name="lt"):
    """11 frames, the target at BOX; absent in frames 3, 4, 5 (NaN) and 8 (zero width)."""
    truth = np.tile(BOX, (11, 1))
    truth[3:6] = np.nan
    truth[8] = [10.0, 10.0, 0.0, 10.0]
    return Sequence(name, tuple(f"{i:04d}.png" for i in range(11)), truth)


# frame: box, status, confidence. Frames 1-10; frame 0 is the initialisation.
RUN = [
    (BOX, "init", np.nan),
    (BOX, "normal", 0.9),  # 1 present, IoU 1
    ([15.0, 10.0, 10.0, 10.0], "normal", 0.6),  # 2 present, IoU 50 / 150 = 1/3
    ([0.0, 0.0, 5.0, 5.0], "lost", 0.2),  # 3 absent, says absent
    ([0.0, 0.0, 5.0, 5.0], "normal", 0.3),  # 4 absent, says present
    ([0.0, 0.0, 5.0, 5.0], "not_found", 0.8),  # 5 absent, says absent
    (BOX, "normal", 0.7),  # 6 present (a return), IoU 1
    (BOX, "lost", 0.1),  # 7 present, IoU 1, but says absent
    (BOX, "normal", 0.95),  # 8 absent, says present
    ([10.0, 10.0, 10.0, 20.0], "normal", 0.4),  # 9 present (a return), IoU 100 / 200 = 0.5
    (BOX, "uncertain", 0.5),  # 10 present, IoU 1
]


def _run():
    boxes = np.array([b for b, _, _ in RUN])
    statuses = np.array([s for _, s, _ in RUN])
    confidence = np.array([c for _, _, c in RUN])
    return boxes, statuses, confidence


def test_max_geometric_mean_is_the_toolkits_best_point_on_the_line_to_all_absent():
    tpr, tnr = np.array([0.8, 0.6, 0.5, 0.0, 0.4]), np.array([0.0, 0.25, 0.9, 0.3, 1.0])
    # TNR <= 0.5: the peak sqrt(TPR / (1 - TNR)) / 2; otherwise the point itself.
    want = [0.5 * math.sqrt(0.8), 0.5 * math.sqrt(0.8), math.sqrt(0.45), 0.0, math.sqrt(0.4)]
    np.testing.assert_allclose(max_geometric_mean(tpr, tnr), want, rtol=1e-12)
    t = np.linspace(0.0, 1.0, 100001)[:, None]  # the line, searched
    brute = np.sqrt((1 - t) * tpr * ((1 - t) * tnr + t)).max(axis=0)
    np.testing.assert_allclose(max_geometric_mean(tpr, tnr), brute, atol=1e-9)


def test_oxuva_and_vot_lt_scores_by_hand():
    sequence = _sequence()
    boxes, statuses, confidence = _run()
    run = LongTermRun(boxes, confidence, statuses, np.zeros(11))
    overlaps, present, conf = frame_scores(run, sequence, ABSENT_STATUSES)
    assert present.tolist() == [1, 1, 0, 0, 0, 1, 1, 0, 1, 1]
    # Operating points at each distinct confidence of a frame said present, highest first:
    # 0.95 (frame 8: a false positive), 0.9 (1: hit), 0.7 (6: hit), 0.6 (2: IoU 1/3, a miss),
    # 0.5 (10: hit), 0.4 (9: hit), 0.3 (4: a false positive). 6 present, 4 absent frames.
    thresholds, tpr, tnr = oxuva_points(overlaps >= 0.5, present, conf)
    np.testing.assert_array_equal(thresholds, [0.95, 0.9, 0.7, 0.6, 0.5, 0.4, 0.3])
    np.testing.assert_allclose(tpr, np.array([0, 1, 2, 2, 3, 4, 4]) / 6)
    np.testing.assert_allclose(tnr, [0.75] * 6 + [0.5])
    score = score_oxuva([(overlaps, present, conf)])
    # Its own verdict: hits 1, 6, 9, 10 of 6 present frames; 3 and 5 of 4 absent said absent.
    assert (score.tpr, score.tnr) == pytest.approx((2 / 3, 0.5))
    assert score.gm == pytest.approx(math.sqrt(1 / 3))
    assert score.max_gm == pytest.approx(math.sqrt(1 / 3))  # TNR 0.5: the peak is the point
    # Best at 0.4: TPR 2/3, TNR 3/4, sqrt(1/2).
    assert score.best_threshold == 0.4
    assert (score.best_tpr, score.best_tnr) == pytest.approx((2 / 3, 0.75))
    assert score.best_max_gm == pytest.approx(math.sqrt(0.5))
    assert (score.frames_present, score.frames_absent) == (6, 4)

    vot = score_long_term([(sequence, run)], absent=ABSENT_STATUSES)
    np.testing.assert_array_equal(
        vot.thresholds, [np.inf, 0.95, 0.9, 0.7, 0.6, 0.5, 0.4, 0.3, -np.inf]
    )
    # Predicted frames grow 8; 1; 6; 2; 10; 9; 4 (IoU 0, 1, 1, 1/3, 1, 0.5, 0); 6 present.
    np.testing.assert_allclose(
        vot.precision, [1, 0, 1 / 2, 2 / 3, 7 / 12, 2 / 3, 23 / 36, 23 / 42, 23 / 42]
    )
    np.testing.assert_allclose(
        vot.recall, [0, 0, 1 / 6, 1 / 3, 7 / 18, 5 / 9, 23 / 36, 23 / 36, 23 / 36]
    )
    np.testing.assert_allclose(
        vot.f, [0, 0, 1 / 4, 4 / 9, 7 / 15, 20 / 33, 23 / 36, 23 / 39, 23 / 39]
    )
    assert vot.f_score == pytest.approx(23 / 36) and vot.threshold == 0.4
    assert vot.reacquire == [0.0, 0.0]  # returns at 6 and 9, each hit at once at 0.4


def _write(out, name, sequence, boxes, statuses, confidence, score=7.0):
    scores = np.stack([np.where(np.isnan(confidence), np.nan, score), confidence], axis=1)
    write_result(out, name, 0, sequence.name, boxes, np.full(len(boxes), 0.01), scores, statuses)


@pytest.mark.slow  # the report's plots
def test_the_report_reads_the_scores_from_the_result_files(tmp_path):
    sequence, steady = _sequence(), Sequence("steady", ("a.png", "b.png", "c.png"), [BOX] * 3)
    assert has_absences(sequence) and not has_absences(steady)
    boxes, statuses, confidence = _run()
    _write(tmp_path, "mine", sequence, boxes, statuses, confidence)
    _write(
        tmp_path, "mine", steady, np.array([BOX] * 3), ["init", "normal", "normal"], confidence[:3]
    )
    # Another tracker: the same boxes, no confidence, never says absent (as OpenCV's peers
    # while they hold the target); and one whose results predate statuses.
    write_result(tmp_path, "blind", 0, sequence.name, boxes, np.full(11, 0.01))
    write_result(tmp_path, "blind", 0, steady.name, np.array([BOX] * 3), np.full(3, 0.01))
    assert read_status(tmp_path, "mine", 0, "lt").tolist() == statuses.tolist()
    assert read_status(tmp_path, "blind", 0, "lt") is None
    mine, blind = evaluate_results(tmp_path, ["mine", "blind"], [sequence, steady], 1, OTB_PROTOCOL)
    lt = mine.long_term
    assert lt.sequences == ["lt"] and lt.thresholded == "confidence" and lt.reports_absence
    assert (lt.oxuva.tpr, lt.oxuva.tnr, lt.oxuva.best_max_gm) == pytest.approx(
        (2 / 3, 0.5, math.sqrt(0.5))
    )
    assert lt.vot.f_score == pytest.approx(23 / 36)
    # Blind: every frame said present. Hits 1, 6, 7, 9, 10 of 6; no absent frame said absent.
    b = blind.long_term
    assert b.thresholded == "none" and not b.reports_absence and b.runs_with_status == 0
    assert (b.oxuva.tpr, b.oxuva.tnr) == pytest.approx((5 / 6, 0.0))
    assert b.oxuva.max_gm == pytest.approx(0.5 * math.sqrt(5 / 6))
    # Pr: IoU summed over all 10 frames (4 + 1/3 + 0.5 = 29/6) / 10; Re: 29/6 / 6.
    assert b.vot.f_score == pytest.approx(2 * (29 / 60) * (29 / 36) / (29 / 60 + 29 / 36))
    report = write_report([mine, blind], [sequence, steady], tmp_path, "t", OTB_PROTOCOL, 1)
    text = report.read_text()
    section = text.split("## Long-term: sequences with absent frames", 1)[1]
    assert "flagged invisible): lt (1 of the 2 scored)." in section
    assert "| mine | 63.9 | 63.9 | 63.9 | 0.400 | 0 | 66.7 | 50.0 | 57.7 | 70.7 | 0.400 |" in text
    assert "| blind |" in section and "| 0.0 |" in section.split("| blind |")[1].split("\n")[0]
    assert "No frame `lost` or `not_found` here: blind." in section
    assert "blind (1 of 1)" in section  # results without statuses
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    entry = metrics["trackers"]["mine"]["long_term"]
    assert entry["oxuva"]["best_threshold"] == 0.4 and entry["frames_absent"] == 4
    assert entry["vot_lt"]["f"] == pytest.approx(23 / 36, abs=1e-6)
    assert metrics["trackers"]["blind"]["long_term"]["vot_lt"]["threshold"] is None
    # The OTB scores of lt count its 7 present frames only (frame 0 included), as before.
    assert mine.sequences["lt"].ious.size == 7


@pytest.mark.slow
def test_sequences_without_absences_leave_the_report_as_it_was(tmp_path):
    steady = Sequence("steady", tuple(f"{i}.png" for i in range(5)), [BOX] * 5)
    boxes = np.array([BOX, BOX, [12.0, 10, 10, 10], [14.0, 10, 10, 10], BOX])
    statuses = ["init", "normal", "lost", "not_found", "normal"]
    confidence = np.array([np.nan, 0.9, 0.2, 0.1, 0.8])
    outputs = []
    for folder, with_statuses in (("new", True), ("old", False)):
        out = tmp_path / folder
        _write(out, "t", steady, boxes, statuses if with_statuses else None, confidence)
        (evaluation,) = evaluate_results(out, ["t"], [steady], 1, OTB_PROTOCOL)
        assert evaluation.long_term is None
        write_report([evaluation], [steady], out, "t", OTB_PROTOCOL, 1)
        outputs.append(((out / "report.md").read_text(), (out / "metrics.json").read_text()))
    assert status_path(tmp_path / "new", "t", 0, "steady").is_file()
    assert not status_path(tmp_path / "old", "t", 0, "steady").exists()
    assert outputs[0] == outputs[1]
    assert "Long-term" not in outputs[0][0] and "long_term" not in outputs[0][1]


def _folder_with_absences(root):
    """A folder data set: Gone, 8 frames, the target absent in frames 3 and 4 (NaN rows);
    Steady, 6 frames, never absent."""
    for name, count, gone in (("Gone", 8, (3, 4)), ("Steady", 6, ())):
        (root / name / "img").mkdir(parents=True)
        lines = []
        for k in range(count):
            cv2.imwrite(str(root / name / "img" / f"{k + 1:04d}.png"), np.full((40, 60, 3), 9 * k))
            lines.append("nan,nan,nan,nan" if k in gone else "5,10,10,10")
        (root / name / "groundtruth_rect.txt").write_text("\n".join(lines) + "\n")
    return root


@pytest.mark.slow
def test_eval_on_a_folder_with_nan_rows_reports_long_term_scores(tmp_path, drift_tracker, capsys):
    data = _folder_with_absences(tmp_path / "data")
    out = tmp_path / "out"
    assert main(eval_argv(data, out, drift_tracker)) == 0
    report = (out / "report.md").read_text()
    assert "## Long-term: sequences with absent frames" in report
    assert "flagged invisible): Gone (1 of the 2 scored)." in report
    metrics = json.loads((out / "metrics.json").read_text())
    entry = metrics["trackers"]["drift"]["long_term"]
    assert entry["sequences"] == ["Gone"]
    assert (entry["frames_present"], entry["frames_absent"]) == (5, 2)
    # drift (step 0) holds the box, never says absent: every present frame a hit, TNR 0.
    assert (entry["oxuva"]["tpr"], entry["oxuva"]["tnr"]) == (1.0, 0.0)
    assert entry["oxuva"]["max_gm"] == 0.5 and entry["runs_with_status"] == 1
    assert read_status(out, "drift", 0, "Gone").tolist() == ["init"] + ["normal"] * 7
    # Resumed, and as an older folder (no status files): the report is still made.
    assert main(eval_argv(data, out, drift_tracker)) == 0
    assert "found from before" in capsys.readouterr().out
    for name in ("Gone", "Steady"):
        status_path(out, "drift", 0, name).unlink()
    assert main(["eval", str(data), "--out", str(out), "--report-only", "--no-progress"]) == 0
    again = json.loads((out / "metrics.json").read_text())["trackers"]["drift"]["long_term"]
    assert again["oxuva"] == entry["oxuva"] and again["runs_with_status"] == 0
    assert "drift (1 of 1)" in (out / "report.md").read_text()
