"""Calibration metrics, and eval results that record each frame's score and confidence."""

from pathlib import Path

import cv2
import numpy as np
import pytest

from ebmtrack.data.datasets import Sequence
from ebmtrack.evaluation.calibration import (
    auroc,
    calibration_summary,
    expected_calibration_error,
    frame_ious,
    reliability,
)
from ebmtrack.evaluation.report import evaluate_results, write_report
from ebmtrack.evaluation.results import read_confidence, read_result, write_result
from ebmtrack.evaluation.runner import TrackerSpec, run_evaluation
from ebmtrack.evaluation.scoring import OTB_PROTOCOL
from ebmtrack.tracking.base import TrackResult


def test_ece_of_calibrated_and_of_overconfident_predictions():
    rng = np.random.default_rng(0)
    p = rng.random(200_000)
    right = rng.random(p.size) < p
    assert expected_calibration_error(p, right) < 0.01
    assert expected_calibration_error(np.full(1000, 0.9), np.arange(1000) < 600) == (
        pytest.approx(0.3)
    )
    counts, mean_conf, share = reliability(np.array([0.05, 0.15, 0.95]), np.array([0, 1, 1]))
    assert counts.tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 0, 1]
    assert np.isnan(mean_conf[4]) and share[9] == 1.0


def test_auroc():
    positive = np.array([True, True, False, False])
    assert auroc(np.array([0.9, 0.8, 0.2, 0.1]), positive) == 1.0
    assert auroc(np.array([0.1, 0.2, 0.8, 0.9]), positive) == 0.0
    assert auroc(np.full(4, 0.5), positive) == 0.5
    assert np.isnan(auroc(np.ones(3), np.ones(3, bool)))


def test_summary_counts_lost_frames():
    confidence = np.array([0.9, 0.9, 0.2, 0.3, np.nan])
    ious = np.array([0.8, 0.1, 0.1, 0.7, 0.9])
    summary = calibration_summary(confidence, ious)
    assert summary["frames"] == 4
    assert summary["lost_precision"] == 0.5  # of the two lost frames, one is wrong
    assert summary["lost_recall"] == 0.5  # of the two wrong frames, one is called lost
    assert summary["auroc_wrong"] == 0.625


def _sequence(root: Path, n=6) -> Sequence:
    root.mkdir(parents=True, exist_ok=True)
    frames = []
    for i in range(n):
        frames.append(root / f"{i:04d}.png")
        cv2.imwrite(str(frames[-1]), np.full((20, 30, 3), 30 * i, np.uint8))
    gt = np.tile([2.0, 5.0, 6.0, 6.0], (n, 1))
    gt[3] = np.nan  # target absent: not scored
    return Sequence("seq", tuple(frames), gt, dataset="folder")


class DriftTracker:
    """Drifts 2 px a frame and says so: its confidence falls as its box leaves the target."""

    name = "drift"

    def initialize(self, frame, box):
        self.box = np.asarray(box, dtype=float)

    def track(self, frame):
        self.box = self.box + [2, 0, 0, 0]
        return TrackResult(self.box.copy(), score=7.0, confidence=max(0.0, 1 - self.box[0] / 8))


@pytest.mark.slow  # the report's plots
def test_eval_records_confidence_and_reports_its_calibration(tmp_path):
    sequence = _sequence(tmp_path / "seq")
    spec = TrackerSpec("drift", DriftTracker)
    run_evaluation([spec], [sequence], tmp_path / "out", workers=0, progress=False)
    score, confidence = read_confidence(tmp_path / "out", "drift", 0, "seq")
    assert np.isnan(score[0]) and np.all(score[1:] == 7.0)
    assert confidence[1:] == pytest.approx([0.5, 0.25, 0.0, 0.0, 0.0])
    lines = (tmp_path / "out/results/drift/default_000/seq_confidence.txt").read_text().split("\n")
    assert lines[0] == "score\tconfidence\ttarget" and lines[1].endswith("unknown")
    assert lines[2].endswith("uncertain") and lines[3].endswith("lost")
    boxes, _ = read_result(tmp_path / "out", "drift", 0, "seq")
    ious = frame_ious(boxes, sequence)
    assert np.isnan(ious[0]) and np.isnan(ious[3])
    (evaluation,) = evaluate_results(tmp_path / "out", ["drift"], [sequence], 1, OTB_PROTOCOL)
    assert evaluation.calibration == calibration_summary(confidence, ious)
    assert evaluation.calibration["frames"] == 4
    report = write_report([evaluation], [sequence], tmp_path / "out", "t", OTB_PROTOCOL, 1)
    assert "## Confidence" in report.read_text()


@pytest.mark.slow
def test_results_without_confidence_read_as_before(tmp_path):
    sequence = _sequence(tmp_path / "seq")
    boxes = np.tile([2.0, 5.0, 6.0, 6.0], (6, 1))
    write_result(tmp_path / "out", "old", 0, "seq", boxes, np.zeros(6))
    assert read_confidence(tmp_path / "out", "old", 0, "seq") is None
    (evaluation,) = evaluate_results(tmp_path / "out", ["old"], [sequence], 1, OTB_PROTOCOL)
    assert evaluation.calibration is None and evaluation.overall is not None
    report = write_report([evaluation], [sequence], tmp_path / "out", "t", OTB_PROTOCOL, 1)
    assert "## Confidence" not in report.read_text()
