"""Our scores equal the got10k toolkit's ExperimentOTB on identical inputs."""

import contextlib
import io
import os
from pathlib import Path

import numpy as np
import pytest

got10k_otb = pytest.importorskip("got10k.experiments.otb")
got10k_datasets = pytest.importorskip("got10k.datasets")
from got10k.utils.metrics import rect_iou  # noqa: E402

from ebmtrack.data.datasets import load_otb  # noqa: E402
from ebmtrack.evaluation import metrics as M  # noqa: E402
from ebmtrack.evaluation.report import evaluate_results  # noqa: E402
from ebmtrack.evaluation.results import write_result  # noqa: E402
from ebmtrack.evaluation.scoring import OTB_PROTOCOL  # noqa: E402


def _random_boxes(rng, n, jitter):
    base = np.array([40.0, 30.0, 20.0, 15.0])
    walk = np.cumsum(rng.normal(0, 1.5, (n, 4)) * [1, 1, 0.3, 0.3], axis=0)
    gt = base + walk
    pred = gt + rng.normal(0, jitter, (n, 4)) * [1, 1, 0.5, 0.5]
    pred[:, 2:] = np.maximum(pred[:, 2:], 1.0)
    return np.round(gt, 3), np.round(pred, 3)


def test_otb_scores_match_got10k_toolkit(tmp_path):
    rng = np.random.default_rng(7)
    data = tmp_path / "otb"
    got_results = tmp_path / "results" / "OTB2015" / "mine"
    ours = tmp_path / "ours"
    # Real OTB names so got10k's reader accepts them; Jogging has two targets.
    for name, n, jitter in (("Crossing", 30, 2.0), ("Couple", 20, 8.0), ("Jogging", 25, 4.0)):
        (data / name / "img").mkdir(parents=True)
        for i in range(1, n + 1):
            (data / name / "img" / f"{i:04d}.jpg").write_bytes(b"")
        gt_files = (
            ["groundtruth_rect.txt"]
            if name != "Jogging"
            else ["groundtruth_rect.1.txt", "groundtruth_rect.2.txt"]
        )
        for k, gt_file in enumerate(gt_files, start=1):
            gt, pred = _random_boxes(rng, n, jitter)
            np.savetxt(data / name / gt_file, gt, fmt="%.3f", delimiter=",")
            got_name = name if len(gt_files) == 1 else f"{name}.{k}"
            our_name = name if len(gt_files) == 1 else f"{name}_{k}"
            (got_results / "times").mkdir(parents=True, exist_ok=True)
            np.savetxt(got_results / f"{got_name}.txt", pred, fmt="%.3f", delimiter=",")
            write_result(ours, "mine", 0, our_name, pred, np.full(n, 0.01))

    experiment = got10k_otb.ExperimentOTB.__new__(got10k_otb.ExperimentOTB)
    with contextlib.redirect_stdout(io.StringIO()):
        experiment.dataset = got10k_datasets.OTB(str(data), 2015, download=False)
    experiment.result_dir = str(tmp_path / "results" / "OTB2015")
    experiment.report_dir = str(tmp_path / "reports")
    experiment.nbins_iou, experiment.nbins_ce = 21, 51
    experiment.plot_curves = lambda names: None
    cwd = os.getcwd()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            performance = experiment.report(["mine"])["mine"]
    finally:
        os.chdir(cwd)

    sequences = load_otb(data)
    (evaluation,) = evaluate_results(ours, ["mine"], sequences, 1, OTB_PROTOCOL)
    assert sorted(evaluation.sequences) == ["Couple", "Crossing", "Jogging_1", "Jogging_2"]
    for name, score in evaluation.sequences.items():
        reference = performance["seq_wise"][name.replace("_", ".")]
        summary = score.summary()
        assert summary["auc"] == pytest.approx(reference["success_score"], abs=1e-9)
        assert summary["precision"] == pytest.approx(reference["precision_score"], abs=1e-9)
        assert summary["op50"] == pytest.approx(reference["success_rate"], abs=1e-9)
        np.testing.assert_allclose(score.success, reference["success_curve"], atol=1e-9)
        np.testing.assert_allclose(score.precision, reference["precision_curve"], atol=1e-9)
    overall = evaluation.overall.summary()
    assert overall["auc"] == pytest.approx(performance["overall"]["success_score"], abs=1e-9)
    assert overall["precision"] == pytest.approx(
        performance["overall"]["precision_score"], abs=1e-9
    )
    # The fixture is not trivial: scores are neither 0 nor 1.
    assert 0.2 < overall["auc"] < 0.95


def test_iou_matches_got10k_rect_iou_with_and_without_bound():
    rng = np.random.default_rng(3)
    a = np.concatenate([rng.uniform(-20, 90, (500, 2)), rng.uniform(1, 60, (500, 2))], axis=1)
    b = np.concatenate([rng.uniform(-20, 90, (500, 2)), rng.uniform(1, 60, (500, 2))], axis=1)
    np.testing.assert_allclose(M.box_iou(a, b), rect_iou(a.copy(), b.copy()), atol=1e-12)
    bounded = rect_iou(a.copy(), b.copy(), bound=(80, 60))
    ours = M.box_iou(M.clip_to_image(a, 80, 60), M.clip_to_image(b, 80, 60))
    np.testing.assert_allclose(ours, bounded, atol=1e-12)
    assert Path(got10k_otb.__file__).name == "otb.py"
