"""VOT's supervised experiment: resets 5 frames after a failure, burn-in 10, and accuracy,
robustness and EAO as pysot's VOT benchmarks define them, on cases computed by hand."""

import json

import cv2
import numpy as np
import pytest
from eval_helpers import eval_argv

from ebmtrack.cli.main import main
from ebmtrack.data.datasets import Sequence
from ebmtrack.evaluation.vot import (
    FAILURE,
    INIT,
    SKIPPED,
    TRACKED,
    expected_overlap_curve,
    read_trajectory,
    score_supervised,
    track_supervised,
    write_trajectory,
)
from ebmtrack.tracking.base import TrackResult

SIZE = (100, 100)


def _box_with_iou(iou: float) -> np.ndarray:
    """A 10 x 10 box at (0, 0) shifted right so that its IoU with the ground truth at (0, 0)
    is ``iou``: (10 - d) / (10 + d) = iou."""
    return np.array([10 * (1 - iou) / (1 + iou), 0, 10, 10])


def _trajectory(entries):
    """(boxes, codes) from a list of codes (int) and IoUs (float)."""
    boxes = np.full((len(entries), 4), np.nan)
    codes = np.full(len(entries), TRACKED)
    for i, entry in enumerate(entries):
        if isinstance(entry, int):
            codes[i] = entry
        else:
            boxes[i] = _box_with_iou(entry)
    return boxes, codes


def _sequence(name, n):
    return Sequence(name, ("x",) * n, np.tile([0.0, 0.0, 10.0, 10.0], (n, 1)), dataset="vot")


def test_eao_of_a_case_computed_by_hand():
    # A: 6 frames, no failure. B: 10 frames, a failure at frame 2, re-initialised at 2 + 5 = 7.
    a = _trajectory([INIT, 0.8, 0.6, 0.4, 0.2, 0.5])
    b = _trajectory([INIT, 0.9, FAILURE, SKIPPED, SKIPPED, SKIPPED, SKIPPED, INIT, 0.5, 0.7])
    sequences = [_sequence("A", 6), _sequence("B", 10)]
    sizes = {"A": SIZE, "B": SIZE}
    score = score_supervised({"A": [a], "B": [b]}, sequences, sizes, interval=(2, 5), burnin=0)
    # Fragments: A = [., .8, .6, .4, .2, .5]; B1 = [., .9, 0, 0, ...] (0 after its failure, to
    # every length); B2 = [., .5, .7] (unknown after the sequence's end). phi[L] = mean over
    # fragments known at L of their mean over frames 1..L:
    phi = [1, (0.8 + 0.9 + 0.5) / 3, (0.7 + 0.45 + 0.6) / 3, (0.6 + 0.3) / 2, (0.5 + 0.225) / 2]
    phi += [(0.5 + 0.18) / 2, 0.9 / 6, 0.9 / 7, 0.9 / 8, 0.9 / 9]
    np.testing.assert_allclose(score.curve, phi, atol=1e-9)
    assert score.eao == pytest.approx(np.mean(phi[1:5]), abs=1e-9)  # lengths 2..5 (1-based)
    assert score.eao == pytest.approx(0.5322916667, abs=1e-9)
    assert score.lost == 1 and score.robustness == pytest.approx(100 / 16)
    # Accuracy without burn-in: every tracked frame's overlap, pooled.
    assert score.accuracy == pytest.approx(np.mean([0.8, 0.6, 0.4, 0.2, 0.5, 0.9, 0.5, 0.7]))
    # With VOT's burn-in of 10 frames from each initialisation, none of these frames counts.
    burnt = score_supervised({"A": [a], "B": [b]}, sequences, sizes, interval=(2, 5))
    assert np.isnan(burnt.accuracy) and burnt.eao == score.eao


def test_runs_weigh_alike_and_accuracy_averages_runs_per_frame():
    one = _trajectory([INIT, 0.8, 0.6])
    two = _trajectory([INIT, 0.4, FAILURE])
    score = score_supervised(
        {"A": [one, two]}, [_sequence("A", 3)], {"A": SIZE}, interval=(2, 3), burnin=0
    )
    np.testing.assert_allclose(score.curve, [1, 0.6, (0.7 + 0.2) / 2])
    assert score.accuracy == pytest.approx(np.mean([0.6, 0.6]))  # frame 1: (0.8+0.4)/2; 2: 0.6
    assert score.lost == 0.5 and score.robustness == pytest.approx(100 * 0.5 / 3)
    rows = np.array([[0, 1.0, np.nan], [0, 0.5, 0.0]])
    curve = expected_overlap_curve(rows, np.array([1.0, 3.0]))
    np.testing.assert_allclose(curve, [1, (1 + 1.5) / 4, 0.25])


class _Scripted:
    """Tracks well except at chosen frames (counted over the whole sequence), where it jumps
    away; records its initialisations."""

    def __init__(self, lose_at):
        self.lose_at, self.inits, self.frame = set(lose_at), [], 0

    def initialize(self, frame, box):
        self.inits.append(int(frame[0, 0, 0]))
        self.box = np.asarray(box, float)

    def track(self, frame):
        index = int(frame[0, 0, 0])
        return TrackResult(self.box + ([50.0, 50, 0, 0] if index in self.lose_at else 0))


class _Frames(Sequence):
    def frame(self, index):
        return np.full((40, 40, 3), index, np.uint8)


def test_the_tracker_is_reset_five_frames_after_a_failure(tmp_path):
    sequence = _Frames("S", ("x",) * 20, np.tile([5.0, 5, 10, 10], (20, 1)), dataset="vot")
    tracker = _Scripted(lose_at={3, 10})
    boxes, codes, times = track_supervised(tracker, sequence)
    assert tracker.inits == [0, 8, 15]  # failure at 3 -> 3 + 5; at 10 -> 15
    assert list(codes[:9]) == [INIT, TRACKED, TRACKED, FAILURE, 0, 0, 0, 0, INIT]
    assert codes[10] == FAILURE and codes[15] == INIT and np.all(codes[16:] == TRACKED)
    assert np.isnan(boxes[3]).all() and times.shape == (20,)
    write_trajectory(tmp_path / "S_001.txt", boxes, codes)
    lines = (tmp_path / "S_001.txt").read_text().splitlines()
    assert lines[:4] == ["1", "5.0000,5.0000,10.0000,10.0000", lines[1], "2"]
    again_boxes, again_codes = read_trajectory(tmp_path / "S_001.txt")
    np.testing.assert_array_equal(again_codes, codes)
    np.testing.assert_allclose(again_boxes[codes == TRACKED], boxes[codes == TRACKED])


def test_eval_runs_the_supervised_experiment_on_a_vot_folder(tmp_path, capsys, drift_tracker):
    # A VOT folder: a 10 x 10 target moving 2 px per frame; drift@still never moves, so it
    # loses the target at frame 5 (IoU of boxes 10 px apart: 0), is re-initialised at 10 ...
    root = tmp_path / "vot"
    (root / "Move" / "color").mkdir(parents=True)
    (root / "list.txt").write_text("Move\n")
    lines = []
    for k in range(16):
        cv2.imwrite(str(root / "Move" / "color" / f"{k + 1:08d}.jpg"), np.zeros((40, 60, 3)))
        x = 2 + 2 * k
        lines.append(",".join(map(str, [x, 5, x + 10, 5, x + 10, 15, x, 15])))
    (root / "Move" / "groundtruth.txt").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    flags = ["--experiment", "supervised", "--eao-interval", "2,6", "--option", "drift.step=2"]
    assert main(eval_argv(f"vot:{root}", out, "drift,drift@still", *flags)) == 0
    printed = capsys.readouterr().out
    assert "| Tracker | Accuracy | Robustness | Lost | EAO |" in printed
    trajectory = (out / "results/drift@still/baseline_000/Move.txt").read_text().splitlines()
    assert trajectory[:11] == ["1", *trajectory[1:5], "2", "0", "0", "0", "0", "1"]
    metrics = json.loads((out / "metrics.json").read_text())["trackers"]
    assert metrics["drift"]["lost"] == 0 and metrics["drift"]["eao"] == 1.0
    assert metrics["drift@still"]["lost"] == 2  # frames 5 and 15
    # Still box at frame k after an init: IoU (10 - 2k) / (10 + 2k) -> 2/3, 3/7, 1/4, 1/9.
    ious = [2 / 3, 3 / 7, 1 / 4, 1 / 9]
    phi = [np.mean(ious[:n]) for n in range(1, 5)] + [np.sum(ious) / 5]  # lengths 2..6
    # Fragments: frames 0-10 (fails at 5, 0 after), 10-15 (fails at 15, the end): both known.
    assert metrics["drift@still"]["eao"] == pytest.approx(np.mean(phi), abs=1e-6)
    assert main(eval_argv(f"vot:{root}", out, "drift", *flags, "--pack", "got10k")) == 2
    assert "--pack: not used by --experiment supervised" in capsys.readouterr().err


def test_pysot_vot_results_import_and_score_as_ours(tmp_path, capsys, drift_tracker):
    root = tmp_path / "vot"
    (root / "Move" / "color").mkdir(parents=True)
    (root / "list.txt").write_text("Move\n")
    lines = []
    for k in range(12):
        cv2.imwrite(str(root / "Move" / "color" / f"{k + 1:08d}.jpg"), np.zeros((40, 60, 3)))
        x = 2 + 2 * k
        lines.append(f"{x},5,10,10")
    (root / "Move" / "groundtruth.txt").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    flags = ["--experiment", "supervised", "--eao-interval", "2,6"]
    assert main(eval_argv(f"vot:{root}", out, "drift", *flags)) == 0
    # pysot's layout: results/VOT2018/TRACKER/baseline/SEQ/SEQ_001.txt, codes and x,y,w,h.
    theirs = tmp_path / "pysot" / "baseline" / "Move"
    theirs.mkdir(parents=True)
    ours = (out / "results/drift/baseline_000/Move.txt").read_text()
    (theirs / "Move_001.txt").write_text(ours.replace(".0000", ""))  # pysot writes integers too
    argv = eval_argv(f"vot:{root}", out, "drift", *flags, "--import", f"other={tmp_path / 'pysot'}")
    assert main(argv) == 0
    assert "other: imported 1 sequence(s) from a vot-baseline folder, 1 run(s)" in (
        capsys.readouterr().out
    )
    metrics = json.loads((out / "metrics.json").read_text())["trackers"]
    for key in ("accuracy", "robustness", "lost", "eao"):
        assert metrics["other"][key] == metrics["drift"][key], key
    assert metrics["drift"]["lost"] == 1  # the still box fails at frame 5, restarts at 10
