import json
import os
from pathlib import Path
from types import SimpleNamespace

import box_regression as study
import box_regression_report as study_report
import box_regression_runs as study_runs
import numpy as np
import pytest
import torch
from refinement import (
    RefinementConfig,
    RefinementSamples,
    ebm_refine,
    overlap_scores,
    perturb_box_to_iou,
    refinement_frames,
)
from torch import nn

from ebmtrack.data.datasets.sequence import Sequence
from ebmtrack.models.iou_net import AtomIoUNet, IoUNetConfig
from ebmtrack.models.serialization import load_model, save_model
from ebmtrack.ops.boxes import iou_xywh
from ebmtrack.training.box_regression import BoxLossConfig
from ebmtrack.training.experiment import IoUNetExperiment, run_experiment
from ebmtrack.training.feature_cache import build_chunked_cache
from ebmtrack.training.presets import DEFAULT_HOLDOUT, preset_config
from ebmtrack.training.sources.pack import PACK_HOLDOUT
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
    config = study_runs.StudyConfig()
    runs = study_runs.run_losses(config)
    assert set(study_runs.TABLE_METHODS) <= set(runs)
    assert [runs[f"ml-mcmc-{n}"].params["num_steps"] for n in (1, 4, 8)] == [1, 4, 8]
    for loss in study_runs.CURVE_LOSSES:
        for samples in study_runs.CURVE_SAMPLES:
            name = study_runs.curve_run(loss, samples)
            assert runs[name].name == loss and runs[name].params["num_samples"] == samples


def test_training_skips_finished_and_failed_runs(tmp_path, monkeypatch):
    calls = []

    def diverging(config, run_dir, resume):
        calls.append(run_dir.name)
        raise NonFiniteLossError("the loss became nan")

    monkeypatch.setattr(study_runs, "run_experiment", diverging)
    mse = study_runs.experiment_config(
        "mse", BoxLossConfig("mse"), study_runs.StudyConfig(), tmp_path
    )
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / IoUNetExperiment.model_file).write_bytes(b"")
    assert study_runs.train_run("done", mse, tmp_path / "done") == "skipped"
    assert study_runs.train_run("bad", mse, tmp_path / "bad") == "failed"
    assert "nan" in json.loads((tmp_path / "bad" / study_runs.FAILED_FILE).read_text())["error"]
    assert (
        study_runs.train_run("bad", mse, tmp_path / "bad") == "skipped"
    )  # the failure is a result
    assert calls == ["bad"]
    # A run that a live process holds is left to it; a dead owner's lock is taken over.
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / "train.lock").write_text(str(os.getpid()))
    assert study_runs.train_run("held", mse, tmp_path / "held") == "busy"
    (tmp_path / "held" / "train.lock").write_text("999999999")
    assert study_runs.train_run("held", mse, tmp_path / "held") == "failed"
    assert not (tmp_path / "held" / "train.lock").exists() and calls == ["bad", "held"]
    # Any other error is reported and not recorded: the next call tries again.

    def broken(config, run_dir, resume):
        raise RuntimeError("no double backward")

    monkeypatch.setattr(study_runs, "run_experiment", broken)
    assert study_runs.train_run("dsm", mse, tmp_path / "dsm").startswith("error (no double")
    assert not (tmp_path / "dsm" / study_runs.FAILED_FILE).exists()


def test_evaluation_resumes_and_the_report_holds_the_key_differences(tmp_path, monkeypatch):
    config = study_runs.StudyConfig()
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
            (tmp_path / name / study_runs.RESULT_FILE).write_text(json.dumps(result))
        save_model(head, tmp_path / name / IoUNetExperiment.model_file)
    (tmp_path / "curve-kld-is-m1").mkdir()
    (tmp_path / "curve-kld-is-m1" / study_runs.FAILED_FILE).write_text(json.dumps({"error": "nan"}))
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
    config = study_runs.StudyConfig(seeds=(1, 2))
    runs = study_runs.run_losses(config)
    one_seed = study_runs.run_losses(study_runs.StudyConfig())
    assert len(runs) == 2 * len(one_seed) and set(one_seed) <= set(runs)
    assert runs["nce+-seed2"] == runs["nce+"] and "curve-kld-is-m4-seed2" in runs
    assert study_runs.split_run("curve-nce+-m1-seed2") == ("curve-nce+-m1", 2)
    assert study_runs.split_run("ml-mcmc-8") == ("ml-mcmc-8", 1)
    for name in ("nce+", "nce+-seed2", "curve-nce+-m1-seed2"):
        trainer = study_runs.experiment_config(name, runs[name], config, tmp_path).trainer
        assert trainer.seed == study_runs.split_run(name)[1]
        assert trainer.samples_per_epoch == (1024 if name.startswith("curve") else 2048)
    trained = []
    monkeypatch.setattr(study, "train_run", lambda name, exp, d: trained.append(name) or "done")
    study.run_study(tmp_path, config, only=("nce+", "mse-seed2"), evaluate=False)
    assert trained == ["nce+", "nce+-seed2", "mse-seed2"]  # a method's name: all its seeds
    with pytest.raises(ValueError, match="seeds"):
        study_runs.StudyConfig(seeds=(1, 1))
    with pytest.raises(ValueError, match="seeds"):
        study_runs.StudyConfig(seeds=())


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
    summary = study_report.seed_summary([*first.values(), {"failed": "nan"}])
    assert summary["per_seed"] == pytest.approx([0.75, 0.65])
    assert summary["mean"] == pytest.approx(0.70)
    assert summary["std_over_seeds"] == pytest.approx(0.1 / np.sqrt(2))
    assert summary["per_sequence"] == pytest.approx({"a": 0.8, "b": 0.6})
    assert summary["se_over_sequences"] == pytest.approx(0.1)  # std(0.8, 0.6) / sqrt(2)
    assert summary["num_seeds"] == 2 and summary["failed_seeds"] == 1
    second = {1: _seed_row([[0.8], [0.5, 0.5, 0.5]]), 2: _seed_row([[0.6], [0.6, 0.6, 0.6]])}
    diff = study_report.seed_difference(first, second)
    assert diff["mean"] == pytest.approx(0.075)  # per seed: 0.1, 0.05
    assert diff["std_over_seeds"] == pytest.approx(0.05 / np.sqrt(2))
    assert diff["se_over_sequences"] == pytest.approx(0.025)  # per sequence: 0.1, 0.05
    # one seed: no spread over seeds; no common seed: nothing
    alone = study_report.seed_summary([first[1]])
    assert alone["std_over_seeds"] is None and alone["mean"] == pytest.approx(0.75)
    assert study_report.seed_difference({1: first[1]}, {2: second[2]}) == {}
    assert (
        study_report.seed_summary([{"iou_after": 0.7, "ious_after": [0.7]}]) == {}
    )  # no sequences


def test_evaluation_records_sequences_and_the_report_covers_the_seeds(tmp_path):
    truths = [torch.tensor([[50.0, 60.0, 40.0, 30.0]]).repeat(n, 1) for n in (2, 3)]
    starts = [t + torch.tensor([4.0, -3.0, 5.0, 2.0]) for t in truths]
    sets = [
        RefinementSamples(name, [None, None], None, [t, None], s, t)
        for name, s, t in zip(("a", "b"), starts, truths)
    ]
    config = study_runs.StudyConfig(seeds=(1, 3), step_lengths=(1e-12, 0.1))
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
        (tmp_path / name / study_runs.RESULT_FILE).write_text(
            json.dumps(
                {**row, "improved": 0.5, "step_length": 1e-3, "above_50": 1.0, "above_75": 0.5}
            )  # fmt: skip
        )
    record = study_report.write_report(tmp_path, config)
    assert record["over_seeds"]["nce+"]["mean"] == pytest.approx(0.75)
    assert record["over_seeds"]["nce+"]["std_over_seeds"] == pytest.approx(0.0)
    assert record["over_seeds"]["kld-is"]["per_seed"][1] == pytest.approx(
        np.mean([np.mean(result["ious_after"][:2]), np.mean(result["ious_after"][2:])])
    )
    assert record["over_seeds_differences"]["nce+ - kld-is"]["num_seeds"] == 2
    report = (tmp_path / "report.md").read_text()
    assert "| nce+ | 2 | 0 | 0.7500 | 0.0000 |" in report
    assert "| nce+ | 128 |" in report  # the main table shows the first seed's run


def _smoke(seed, folder):
    """synthetic-smoke with a feature cache of 8 pairs in ``folder``, one epoch of 8, batch 4."""
    config = preset_config("synthetic-smoke")
    config.loss = BoxLossConfig("nce", {"num_samples": 8})
    cache = config.feature_cache
    cache.enabled, cache.train_pairs, cache.chunk_size, cache.batch_size = True, 8, 4, 4
    cache.folder = str(folder)
    trainer = config.trainer
    trainer.epochs, trainer.lr_step_epochs, trainer.samples_per_epoch = 1, 1, 8
    trainer.batch_size, trainer.val_samples, trainer.progress, trainer.seed = 4, 4, False, seed
    return config


def _weights(run_dir):
    return load_model(run_dir / IoUNetExperiment.model_file, expected="AtomIoUNet").state_dict()


def test_other_seeds_train_on_the_data_seeds_cache_without_rebuilding_it(tmp_path):
    features = tmp_path / "features"
    run_experiment(_smoke(1, features), tmp_path / "one")
    chunks = {p: p.stat().st_mtime_ns for p in features.rglob("*.safetensors")}
    assert study_runs.stale_chunks(_smoke(2, features)) == []  # checked against the data seed's key
    assert len(study_runs.stale_chunks(_smoke(2, features), data_seed=2)) == len(chunks)
    study_runs.train_on_shared_cache(_smoke(2, features), tmp_path / "two", data_seed=1)
    assert {p: p.stat().st_mtime_ns for p in features.rglob("*.safetensors")} == chunks
    assert json.loads((tmp_path / "two" / study_runs.DATA_SEED_FILE).read_text())["data_seed"] == 1
    assert "seed: 2" in (tmp_path / "two" / "config.yaml").read_text()
    one, two = _weights(tmp_path / "one"), _weights(tmp_path / "two")
    assert any(not torch.equal(one[k], two[k]) for k in one)  # another initialisation and draws
    # With the data seed itself it trains the same head as run_experiment.
    study_runs.train_on_shared_cache(_smoke(1, features), tmp_path / "again", data_seed=1)
    again = _weights(tmp_path / "again")
    assert all(torch.equal(one[k], again[k]) for k in one)


def test_train_run_sends_other_seeds_to_the_shared_cache(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(
        study_runs, "run_experiment", lambda c, d, resume: calls.append(("run", d.name))
    )
    monkeypatch.setattr(
        study_runs,
        "train_on_shared_cache",
        lambda c, d, seed: calls.append(("shared", d.name, seed)),
    )
    config = study_runs.StudyConfig(seeds=(1, 2))
    for name in ("nce+", "nce+-seed2"):
        experiment = study_runs.experiment_config(name, BoxLossConfig("nce+"), config, tmp_path)
        assert study_runs.train_run(name, experiment, tmp_path / name) == "done"
    assert calls == [("run", "nce+"), ("shared", "nce+-seed2", study_runs.DATA_SEED)]


def test_a_linked_feature_cache_is_read_but_never_written(tmp_path):
    def encode(indices):
        return {"x": torch.arange(indices.start, indices.stop, dtype=torch.float32)}

    source = tmp_path / "source"
    build_chunked_cache(4, encode, source / "train", "old", chunk_size=2, progress=False)
    folder = tmp_path / "out" / "features"
    (folder / "train").mkdir(parents=True)
    (folder / "train" / "chunk-00001.safetensors").write_bytes(b"made here")
    assert study_runs.link_features(source, folder) == 1  # a file of the folder is kept
    link = folder / "train" / "chunk-00000.safetensors"
    assert link.is_symlink() and link.resolve() == (source / "train" / link.name).resolve()
    assert study_runs.link_features(source, folder) == 0
    before = {p.name: p.read_bytes() for p in (source / "train").iterdir()}
    # A run that finds the chunks stale rebuilds them in the folder, replacing the links.
    build_chunked_cache(4, encode, folder / "train", "new", chunk_size=2, progress=False)
    assert {p.name: p.read_bytes() for p in (source / "train").iterdir()} == before
    assert not link.is_symlink()


def test_pack_preset_tunes_on_the_pack_holdout_and_tests_on_every_test_sequence(
    tmp_path, monkeypatch
):
    config = study_runs.StudyConfig()
    assert config.preset == "pack-cpu" and config.frames_per_sequence == 15
    assert study_runs.StudyConfig(preset="default-cpu").frames_per_sequence == 40
    with pytest.raises(ValueError, match="preset"):
        study_runs.StudyConfig(preset="atom-r18")
    pack_tracks = str(Path(preset_config("pack-cpu").data.pack) / "sequences")
    test_folder = str(tmp_path / "test")
    sources = study.evaluation_sources(config, test_folder)
    assert sources == {"test": (test_folder, None), "tuning": (pack_tracks, list(PACK_HOLDOUT))}
    with pytest.raises(ValueError, match="training pack"):
        study.evaluation_sources(config, pack_tracks)
    old = study.evaluation_sources(study_runs.StudyConfig(preset="default-cpu"), test_folder)
    assert old["test"] == old["tuning"] == (test_folder, list(DEFAULT_HOLDOUT))

    names = {test_folder: ["Car1", "Woman"], pack_tracks: [*PACK_HOLDOUT, "bike1"]}
    loaded, made = [], []

    def load_folder(folder):
        loaded.append(str(folder))
        truth = np.array([[10.0, 10.0, 20.0, 20.0]])
        return [Sequence(name, (Path("x.jpg"),), truth) for name in names[str(folder)]]

    def refinement_samples(sequence, backbone, layers, refinement, params):
        made.append((sequence.name, refinement))
        n = refinement.frames_per_sequence
        feats = lambda k: [torch.zeros(k, 2, 3, 3), torch.zeros(k, 2, 2, 2)]  # noqa: E731
        boxes = lambda k: torch.ones(k, 4)  # noqa: E731
        return RefinementSamples(sequence.name, feats(1), boxes(1), feats(n), boxes(n), boxes(n))

    monkeypatch.setattr(study, "load_folder", load_folder)
    monkeypatch.setattr(study, "refinement_samples", refinement_samples)
    module = SimpleNamespace(backbone=None, layers=("a", "b"))  # all refinement_samples needs
    monkeypatch.setattr(IoUNetExperiment, "build_module", lambda experiment: module)
    samples = study.prepare_samples(tmp_path, config, test_folder)
    assert [s.name for s in samples["test"]] == ["Car1", "Woman"]
    assert [s.name for s in samples["tuning"]] == list(PACK_HOLDOUT)  # not the training track
    by_name = {name: refinement for name, refinement in made}
    assert by_name["Car1"].frames_per_sequence == 15 and by_name["Car1"].seed == 0
    tuning = by_name[PACK_HOLDOUT[0]]
    assert tuning.frames_per_sequence == 20 and tuning.seed == 1 and tuning.frame_offset == 0
    assert sorted(loaded) == sorted([test_folder, pack_tracks])
    study.prepare_samples(tmp_path, config, test_folder)  # stored: nothing read again
    assert len(loaded) == 2
    study.prepare_samples(tmp_path, study_runs.StudyConfig(frames_per_sequence=5), test_folder)
    assert len(loaded) == 4  # another protocol: built again


def test_the_report_compares_with_the_top_group_and_the_start_boxes(tmp_path):
    config = study_runs.StudyConfig(seeds=(1, 2))
    rng = np.random.default_rng(3)
    starts = [[0.6, 0.7], [0.8, 0.5, 0.6]]
    (tmp_path / "untrained").mkdir()
    untrained = {**_seed_row([[0.6, 0.7], [0.8, 0.5, 0.6]]), "improved": 0.0, "step_length": 1}
    untrained.update(
        above_50=1.0,
        above_75=0.2,
        num_boxes=5,
        start=_seed_row(starts) | {"above_50": 1.0, "above_75": 0.2},
    )
    (tmp_path / "untrained" / study_runs.RESULT_FILE).write_text(json.dumps(untrained))
    rows = {}
    for method in (*study_runs.TOP_GROUP, "dsm", "mse"):
        for seed in config.seeds:
            name = study_runs.seeded_run(method, seed)
            rows[name] = _seed_row([rng.uniform(0.5, 0.9, 2).tolist(), rng.uniform(0.5, 0.9, 3)])
            rows[name]["ious_after"] = [float(v) for v in rows[name]["ious_after"]]
            if method == "mse":  # with ATOM's ascent too
                rows[name]["atom"] = {"ious_after": [0.8] * 5, "iou_after": 0.8, "improved": 1.0}
                rows[name]["atom"].update(above_50=1.0, above_75=1.0)
            (tmp_path / name).mkdir()
            (tmp_path / name / study_runs.RESULT_FILE).write_text(
                json.dumps(
                    {
                        **rows[name],
                        "improved": 0.5,
                        "step_length": 1e-3,
                        "above_50": 1.0,
                        "above_75": 0.5,
                    }
                )  # fmt: skip
            )
    record = study_report.write_report(tmp_path, config)
    top = [
        np.mean([rows[study_runs.seeded_run(m, s)]["ious_after"] for m in study_runs.TOP_GROUP], 0)
        for s in config.seeds
    ]
    sequence_mean = lambda ious: np.mean([np.mean(ious[:2]), np.mean(ious[2:])])  # noqa: E731
    assert record["over_seeds"]["top-4"]["per_seed"] == pytest.approx(
        [sequence_mean(t) for t in top]
    )
    start = sequence_mean(sum(starts, []))
    assert record["over_seeds"]["start"]["mean"] == pytest.approx(start)
    dsm = [sequence_mean(rows[study_runs.seeded_run("dsm", s)]["ious_after"]) for s in config.seeds]
    assert record["over_seeds_differences"]["dsm - start"]["mean"] == pytest.approx(
        np.mean(dsm) - start
    )
    assert record["over_seeds_differences"]["dsm - top-4"]["num_seeds"] == 2
    assert "ml-mcmc-8 - top-4" not in record["over_seeds_differences"]  # not run
    assert record["over_seeds"]["nce+"]["step_length"] == [1e-3, 1e-3]
    assert record["over_seeds"]["mse-atom"]["mean"] == pytest.approx(0.8)
    assert "| top-4 | 2 | 0 |" in (tmp_path / "report.md").read_text()
