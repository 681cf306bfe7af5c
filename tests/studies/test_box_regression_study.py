import json
import os

import numpy as np
import pytest
import torch
from torch import nn

from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig
from ebmtrack.models.serialization import save_model
from ebmtrack.ops.boxes import iou_xywh
from ebmtrack.studies import box_regression as study
from ebmtrack.studies.refinement import (
    RefinementConfig,
    RefinementSamples,
    ebm_refine,
    overlap_scores,
    perturb_box_to_iou,
    refinement_frames,
)
from ebmtrack.training.experiment import IoUNetExperiment
from ebmtrack.training.trainer import NonFiniteLossError


@pytest.mark.parametrize("box", [(10.0, 20.0, 40.0, 30.0), (0.0, 0.0, 5.0, 80.0)])
def test_perturbation_hits_the_drawn_iou_and_spreads_over_the_range(box):
    rng = np.random.default_rng(0)
    targets = rng.uniform(0.5, 0.9, 200)
    starts = np.stack([perturb_box_to_iou(np.array(box), t, rng) for t in targets])
    ious = iou_xywh(torch.as_tensor(starts), torch.as_tensor(box).expand(200, 4)).numpy()
    np.testing.assert_allclose(ious, targets, atol=1e-5)
    # Uniform over [0.5, 0.9]: each tenth of the range holds about a tenth of the boxes.
    counts = np.histogram(ious, bins=4, range=(0.5, 0.9))[0]
    assert counts.min() > 30
    # The perturbations move the centre and change the size (not one kind only).
    assert np.ptp(starts[:, 2] / box[2]) > 0.3 and np.ptp(starts[:, 0] + starts[:, 2] / 2) > 1


def test_perturbation_rejects_an_impossible_iou():
    with pytest.raises(ValueError, match="target_iou"):
        perturb_box_to_iou(np.array([0.0, 0.0, 10.0, 10.0]), 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="start_iou"):
        RefinementConfig(start_iou=(0.9, 0.5))


def test_tuning_frames_are_disjoint_from_test_frames_and_offset_zero_is_linspace():
    config = RefinementConfig(frames_per_sequence=40)
    test = refinement_frames(300, config)
    tuning = refinement_frames(300, RefinementConfig(frames_per_sequence=40, frame_offset=0.5))
    np.testing.assert_array_equal(test, np.linspace(0, 299, 40).astype(int))
    assert len(tuning) == 39 and not set(test) & set(tuning) and tuning.max() <= 299


class QuadraticBoxEnergy(nn.Module):
    """Stands in for the IoU-Net: f = -|| relative offset of the box from the truth ||^2, the
    truth being carried as the 'test features'; its optimum is the true box."""

    def modulation(self, ref_feats, ref_box):
        return [torch.zeros(1, 1)]

    def test_features(self, test_feats):
        return [test_feats[0]]

    def predict_iou(self, modulation, test_features, boxes):
        truth = test_features[0][:, None, :]
        scale = truth[..., 2:].repeat(1, 1, 2)
        return -((boxes - truth) / scale).square().sum(-1)


def test_algorithm_s1_on_an_energy_with_the_truth_as_optimum_improves_every_box():
    rng = np.random.default_rng(1)
    truth = torch.tensor([[50.0, 60.0, 40.0, 30.0], [100.0, 80.0, 20.0, 50.0]]).repeat(10, 1)
    starts = torch.as_tensor(
        np.stack([perturb_box_to_iou(b.numpy(), rng.uniform(0.5, 0.9), rng) for b in truth]),
        dtype=torch.float32,
    )
    samples = RefinementSamples("x", [None, None], None, [truth, None], starts, truth)
    refined = ebm_refine(QuadraticBoxEnergy(), samples, [0.1, 1e-12, 0.3], num_iters=30)
    assert refined.shape == (20, 3, 4)
    scores = overlap_scores(starts, refined[:, 0], truth)
    assert scores["improved"] == 1.0
    assert scores["iou_after"] > 0.95 > scores["iou_before"]
    assert scores["above_75"] == 1.0 and len(scores["ious_after"]) == 20
    # Each candidate follows its own step length: a tiny one does not move the box, another
    # one converges to the same optimum.
    torch.testing.assert_close(refined[:, 1], starts, atol=1e-3, rtol=1e-4)
    assert overlap_scores(starts, refined[:, 2], truth)["iou_after"] > 0.95


def test_the_runs_cover_table_2_and_figure_3():
    config = study.StudyConfig()
    runs = study.run_losses(config)
    assert set(study.TABLE_METHODS) <= set(runs)
    assert [runs[f"ml-mcmc-{n}"].params["num_steps"] for n in (1, 4, 8)] == [1, 4, 8]
    for loss in study.CURVE_LOSSES:
        for samples in study.CURVE_SAMPLES:
            name = study.curve_run(loss, samples)
            assert runs[name].name == loss and runs[name].params["num_samples"] == samples


def test_training_skips_finished_and_failed_runs(tmp_path, monkeypatch):
    calls = []

    def diverging(config, run_dir, resume):
        calls.append(run_dir.name)
        raise NonFiniteLossError("the loss became nan")

    monkeypatch.setattr(study, "run_experiment", diverging)
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / IoUNetExperiment.model_file).write_bytes(b"")
    assert study.train_run("done", None, tmp_path / "done") == "skipped"
    assert study.train_run("bad", None, tmp_path / "bad") == "failed"
    assert "nan" in json.loads((tmp_path / "bad" / study.FAILED_FILE).read_text())["error"]
    assert study.train_run("bad", None, tmp_path / "bad") == "skipped"  # the failure is a result
    assert calls == ["bad"]
    # A run that a live process holds is left to it; a dead owner's lock is taken over.
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / "train.lock").write_text(str(os.getpid()))
    assert study.train_run("held", None, tmp_path / "held") == "busy"
    (tmp_path / "held" / "train.lock").write_text("999999999")
    assert study.train_run("held", None, tmp_path / "held") == "failed"
    assert not (tmp_path / "held" / "train.lock").exists() and calls == ["bad", "held"]
    # Any other error is reported and not recorded: the next call tries again.

    def broken(config, run_dir, resume):
        raise RuntimeError("no double backward")

    monkeypatch.setattr(study, "run_experiment", broken)
    assert study.train_run("dsm", None, tmp_path / "dsm").startswith("error (no double")
    assert not (tmp_path / "dsm" / study.FAILED_FILE).exists()


def test_evaluation_resumes_and_the_report_holds_the_key_differences(tmp_path, monkeypatch):
    config = study.StudyConfig()
    rng = np.random.default_rng(0)

    def fake_result(name):
        ious = rng.uniform(0.5, 1.0, 10).round(5).tolist()
        scores = {"iou_after": float(np.mean(ious)), "above_50": 1.0, "above_75": 0.5}
        return {
            **scores,
            "improved": 0.5,
            "step_length": 1e-3,
            "num_boxes": 10,
            "ious_after": ious,
            "iou_before": 0.7,
        }

    head = AtomIoUNet(
        IoUNetConfig(
            input_channels=(8, 8), pred_input_dim=(8, 8), pred_inter_dim=(8, 8), width=0.25
        )
    )
    for name in ("untrained", "nce+", "kld-is", "nce", "ml-is"):
        (tmp_path / name).mkdir()
        result = fake_result(name)
        if name == "untrained":
            result["start"] = {"iou_after": 0.7, "above_50": 1.0, "above_75": 0.375}
        if name != "nce":  # nce is trained but not yet evaluated
            (tmp_path / name / study.RESULT_FILE).write_text(json.dumps(result))
        save_model(head, tmp_path / name / IoUNetExperiment.model_file)
    (tmp_path / "curve-kld-is-m1").mkdir()
    (tmp_path / "curve-kld-is-m1" / study.FAILED_FILE).write_text(json.dumps({"error": "nan"}))
    (tmp_path / "timing.json").write_text(json.dumps({"ml-is": 1.0, "nce": 1.1}))
    evaluated = []

    def evaluate(iou_net, samples, cfg, atom_ascent=False):
        evaluated.append(type(iou_net).__name__)
        return fake_result("nce")

    monkeypatch.setattr(study, "prepare_samples", lambda out, cfg, folder: {})
    monkeypatch.setattr(study, "evaluate_head", evaluate)
    record = study.run_study(tmp_path, config, train=False)
    assert evaluated == ["AtomIoUNet"]  # only nce; the others' results were kept
    assert set(record["differences"]) == {"nce+ - kld-is", "nce - ml-is"}  # others not run
    mean, _ = record["differences"]["nce+ - kld-is"]
    expected = np.mean(record["rows"]["nce+"]["ious_after"]) - np.mean(
        record["rows"]["kld-is"]["ious_after"]
    )
    assert mean == pytest.approx(expected)
    assert record["m_curve"]["kld-is"]["1"] == "failed"
    report = (tmp_path / "report.md").read_text()
    assert "| nce | 128 |" in report and "1.10 |" in report  # timing ratio to ML-IS
    assert (tmp_path / "m-curve.png").stat().st_size > 0
    study.run_study(tmp_path, config, train=False)
    assert evaluated == ["AtomIoUNet"]  # nothing left to evaluate


def test_every_run_is_trained_once_per_seed_with_its_seed(monkeypatch, tmp_path):
    config = study.StudyConfig(seeds=(1, 2))
    runs = study.run_losses(config)
    one_seed = study.run_losses(study.StudyConfig())
    assert len(runs) == 2 * len(one_seed) and set(one_seed) <= set(runs)
    assert runs["nce+-seed2"] == runs["nce+"] and "curve-kld-is-m4-seed2" in runs
    assert study.split_run("curve-nce+-m1-seed2") == ("curve-nce+-m1", 2)
    assert study.split_run("ml-mcmc-8") == ("ml-mcmc-8", 1)
    for name in ("nce+", "nce+-seed2", "curve-nce+-m1-seed2"):
        trainer = study.experiment_config(name, runs[name], config, tmp_path).trainer
        assert trainer.seed == study.split_run(name)[1]
        assert trainer.samples_per_epoch == (1024 if name.startswith("curve") else 2048)
    trained = []
    monkeypatch.setattr(study, "train_run", lambda name, exp, d: trained.append(name) or "done")
    study.run_study(tmp_path, config, only=("nce+", "mse-seed2"), evaluate=False)
    assert trained == ["nce+", "nce+-seed2", "mse-seed2"]  # a method's name: all its seeds
    with pytest.raises(ValueError, match="seeds"):
        study.StudyConfig(seeds=(1, 1))
    with pytest.raises(ValueError, match="seeds"):
        study.StudyConfig(seeds=())


def test_bad_seeds_option_is_refused_in_one_line(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        study.main(["--out", str(tmp_path / "out"), "--seeds", "1,x"])
    assert exit_info.value.code == 2
    assert "--seeds" in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists()


def _seed_row(ious_per_sequence):
    ious = [v for sequence in ious_per_sequence for v in sequence]
    return {
        "iou_after": float(np.mean(ious)),
        "ious_after": ious,
        "sequences": ["a", "b"][: len(ious_per_sequence)],
        "sequence_boxes": [len(sequence) for sequence in ious_per_sequence],
    }


def test_seed_summary_averages_sequence_means_with_spreads_over_seeds_and_sequences():
    # Sequence a has 1 box, b has 3: a mean over sequences, not over boxes (that would be 0.675).
    first = {1: _seed_row([[0.9], [0.5, 0.6, 0.7]]), 2: _seed_row([[0.7], [0.6, 0.6, 0.6]])}
    summary = study.seed_summary([*first.values(), {"failed": "nan"}])
    assert summary["per_seed"] == pytest.approx([0.75, 0.65])
    assert summary["mean"] == pytest.approx(0.70)
    assert summary["std_over_seeds"] == pytest.approx(0.1 / np.sqrt(2))
    assert summary["per_sequence"] == pytest.approx({"a": 0.8, "b": 0.6})
    assert summary["se_over_sequences"] == pytest.approx(0.1)  # std(0.8, 0.6) / sqrt(2)
    assert summary["num_seeds"] == 2 and summary["failed_seeds"] == 1
    second = {1: _seed_row([[0.8], [0.5, 0.5, 0.5]]), 2: _seed_row([[0.6], [0.6, 0.6, 0.6]])}
    diff = study.seed_difference(first, second)
    assert diff["mean"] == pytest.approx(0.075)  # per seed: 0.1, 0.05
    assert diff["std_over_seeds"] == pytest.approx(0.05 / np.sqrt(2))
    assert diff["se_over_sequences"] == pytest.approx(0.025)  # per sequence: 0.1, 0.05
    # one seed: no spread over seeds; no common seed: nothing
    alone = study.seed_summary([first[1]])
    assert alone["std_over_seeds"] is None and alone["mean"] == pytest.approx(0.75)
    assert study.seed_difference({1: first[1]}, {2: second[2]}) == {}
    assert study.seed_summary([{"iou_after": 0.7, "ious_after": [0.7]}]) == {}  # no sequences


def test_evaluation_records_sequences_and_the_report_covers_the_seeds(tmp_path):
    truths = [torch.tensor([[50.0, 60.0, 40.0, 30.0]]).repeat(n, 1) for n in (2, 3)]
    starts = [t + torch.tensor([4.0, -3.0, 5.0, 2.0]) for t in truths]
    sets = [
        RefinementSamples(name, [None, None], None, [t, None], s, t)
        for name, s, t in zip(("a", "b"), starts, truths)
    ]
    config = study.StudyConfig(seeds=(1, 3), step_lengths=(1e-12, 0.1))
    result = study.evaluate_head(QuadraticBoxEnergy(), {"tuning": sets, "test": sets}, config)
    assert result["sequences"] == ["a", "b"] and result["sequence_boxes"] == [2, 3]
    assert result["step_length"] == 0.1 and len(result["ious_after"]) == 5
    rows = {
        "nce+": _seed_row([[0.8, 0.8], [0.7, 0.7, 0.7]]),
        "nce+-seed3": _seed_row([[0.9, 0.9], [0.6, 0.6, 0.6]]),
        "kld-is": _seed_row([[0.8, 0.8], [0.6, 0.6, 0.6]]),
        "kld-is-seed3": result,
    }
    for name, row in rows.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / study.RESULT_FILE).write_text(
            json.dumps(
                {**row, "improved": 0.5, "step_length": 1e-3, "above_50": 1.0, "above_75": 0.5}
            )  # fmt: skip
        )
    record = study.write_report(tmp_path, config)
    assert record["over_seeds"]["nce+"]["mean"] == pytest.approx(0.75)
    assert record["over_seeds"]["nce+"]["std_over_seeds"] == pytest.approx(0.0)
    assert record["over_seeds"]["kld-is"]["per_seed"][1] == pytest.approx(
        np.mean([np.mean(result["ious_after"][:2]), np.mean(result["ious_after"][2:])])
    )
    assert record["over_seeds_differences"]["nce+ - kld-is"]["num_seeds"] == 2
    report = (tmp_path / "report.md").read_text()
    assert "| nce+ | 2 | 0 | 0.7500 | 0.0000 |" in report
    assert "| nce+ | 128 |" in report  # the main table shows the first seed's run
