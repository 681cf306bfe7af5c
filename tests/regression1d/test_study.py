import json
import math

import numpy as np
import pytest
import torch

from ebmtrack.cli.main import main
from ebmtrack.regression1d import StudyConfig, parse_methods, planned_runs, run_study
from ebmtrack.regression1d.data import sample_dataset, true_density
from ebmtrack.regression1d.floors import smoothed_target_kl, smoothed_true_density
from ebmtrack.regression1d.kl import evaluation_grid, grid_kl_divergence
from ebmtrack.regression1d.model import Regression1dEnergy, _Network
from ebmtrack.regression1d.report import best_mean, summarize, write_tables
from ebmtrack.regression1d.train import TrainConfig, train_model


def _gaussian(grid, mean, std):
    return np.exp(-0.5 * ((grid - mean) / std) ** 2) / std


def test_kl_is_zero_for_identical_densities_and_invariant_to_scale():
    grid = np.linspace(-3, 3, 512)
    p = np.stack([_gaussian(grid, m, 0.3) for m in (-1.0, 0.0, 0.5)])
    assert grid_kl_divergence(p, np.log(p)) == pytest.approx(0.0, abs=1e-12)
    assert grid_kl_divergence(7 * p, np.log(p) + 100.0) == pytest.approx(0.0, abs=1e-12)


def test_kl_matches_the_analytic_value_for_two_gaussians():
    grid = np.linspace(-10, 10, 4001)
    (m1, s1), (m2, s2) = (0.0, 1.0), (0.5, 1.5)
    analytic = math.log(s2 / s1) + (s1**2 + (m1 - m2) ** 2) / (2 * s2**2) - 0.5
    log_q = -0.5 * ((grid - m2) / s2) ** 2 + 1e3  # unnormalized and huge: still fine
    kl = grid_kl_divergence(_gaussian(grid, m1, s1)[None], log_q[None])
    assert kl == pytest.approx(analytic, rel=1e-4)


@pytest.mark.parametrize("dataset", [1, 2])
def test_true_densities_integrate_to_one_and_match_the_samples(dataset):
    ys = np.linspace(-3, 3, 6001)
    for x in (-2.5, -0.3, 0.0, 1.7):
        assert np.trapezoid(true_density(dataset, x, ys), ys) == pytest.approx(1.0, abs=1e-3)
    x, y = sample_dataset(dataset, num=20000, seed=0)
    assert x.min() >= -3 and x.max() <= 3
    right = x >= 0  # data set 1: shifted log-normal, mean exp(0.25^2 / 2) - 1; data set 2: sin x
    expected = math.exp(0.25**2 / 2) - 1 if dataset == 1 else np.sin(x[right]).mean()
    assert y[right].mean() == pytest.approx(expected, abs=0.01)


def test_fast_network_equals_the_plain_network_with_derivatives():
    torch.manual_seed(0)
    model = Regression1dEnergy().double()
    x = torch.linspace(-3, 3, 5, dtype=torch.float64)
    y = torch.randn(5, 7, 1, dtype=torch.float64, requires_grad=True)
    fast, plain = model(x, y), model.reference_forward(x, y)
    assert torch.allclose(fast, plain, atol=1e-12)
    (g_fast,) = torch.autograd.grad(fast.sum(), y, create_graph=True)
    (g_plain,) = torch.autograd.grad(plain.sum(), y, create_graph=True)
    assert torch.allclose(g_fast, g_plain, atol=1e-12)
    (h_fast,) = torch.autograd.grad(g_fast.sum(), y)
    (h_plain,) = torch.autograd.grad(g_plain.sum(), y)
    assert torch.allclose(h_fast, h_plain, atol=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_one_node_network_has_the_plain_networks_gradients(threads):
    torch.manual_seed(0)
    model = Regression1dEnergy(threads=threads).double()
    x = torch.linspace(-3, 3, 5, dtype=torch.float64)
    y = torch.randn(5, 7, 1, dtype=torch.float64)  # data: the hand-written backward applies
    fast, plain = model(x, y), model.reference_forward(x, y)
    assert type(fast.grad_fn.next_functions[0][0]).__name__ == "_NetworkBackward"
    assert torch.allclose(fast, plain, atol=1e-12)
    weights = torch.randn(5, 7, dtype=torch.float64)  # any upstream gradient
    g_fast = torch.autograd.grad((weights * fast).sum(), list(model.parameters()))
    g_plain = torch.autograd.grad((weights * plain).sum(), list(model.parameters()))
    for name, a, b in zip(dict(model.named_parameters()), g_fast, g_plain, strict=True):
        assert torch.allclose(a, b, atol=1e-12), name
    # the work done in pool threads records no graph of its own (grad mode is per thread)
    node = fast.grad_fn.next_functions[0][0]
    assert not any(t.requires_grad for saved in node.saved for t in saved)
    params = [t.detach().requires_grad_(True) for t in model._params()]
    assert torch.autograd.gradcheck(
        lambda *ps: _Network.apply(x, y.reshape(1, -1), threads, *ps), params
    )
    # the samplers' fast path: value and ∇_y f without autograd
    value, grad_y = model.score_and_grad(x, y)
    (grad_plain,) = torch.autograd.grad(model.reference_forward(x, y.requires_grad_(True)).sum(), y)
    assert torch.allclose(value, plain, atol=1e-12)
    assert torch.allclose(grad_y, grad_plain, atol=1e-12)


def test_summary_takes_the_mean_of_the_best_five():
    assert best_mean([5.0, 1.0, 2.0, 3.0, 4.0, 0.5, 9.0]) == pytest.approx(2.1)
    assert best_mean([2.0, 4.0]) == pytest.approx(3.0)
    assert math.isnan(best_mean([]))
    records = [
        {"method": "nce", "dataset": d, "num_samples": 8, "epochs": 1, "kl": kl,
         "seconds_per_epoch": 0.1}
        for d, kl in [(1, 0.2), (1, 0.4), (2, 0.6)]
    ]  # fmt: skip
    (row,) = summarize(records, num_samples=8, epochs=1)
    assert row["kl_1"] == pytest.approx(0.3) and row["kl_2"] == pytest.approx(0.6)
    assert row["kl_mean"] == pytest.approx(0.45) and row["runs_1"] == 2


def test_study_resumes_without_redoing_finished_runs(tmp_path):
    config = StudyConfig(
        methods=("sm",), datasets=(2,), runs=2, epochs=1, figure2_samples=(), grid_size=64
    )
    first = run_study(config, tmp_path, progress=False)
    assert len(first) == 2 and len(planned_runs(config)) == 2
    run_dir = tmp_path / "runs"
    files = sorted(run_dir.glob("*.json"))
    mtimes = {p: p.stat().st_mtime_ns for p in files}
    files[1].unlink()  # as if killed before the second run finished
    (run_dir / ".junk.json.123.tmp").write_text("{")  # a half-written file is not a result
    second = run_study(config, tmp_path, progress=False)
    assert files[0].stat().st_mtime_ns == mtimes[files[0]]  # not redone
    assert files[1].exists()
    redone = json.loads(files[1].read_text())
    assert redone["kl"] == next(r["kl"] for r in first if r["run"] == redone["run"])  # same seed
    assert len(second) == 2
    assert "sm" in write_tables(summarize(second, 1024, 1), tmp_path)
    assert (tmp_path / "table.csv").read_text().startswith("method,kl_1,kl_2,kl_mean,s_per_epoch")


@pytest.mark.slow
def test_an_interrupted_run_resumes_bit_exactly_from_its_epoch_checkpoint(tmp_path):
    config = TrainConfig(method="nce+", dataset=1, seed=3, num_samples=8, epochs=3)
    straight, _ = train_model(config)

    def stop_after_two(epoch):
        if epoch == 2:
            raise KeyboardInterrupt

    checkpoint = tmp_path / "run.partial.pt"
    with pytest.raises(KeyboardInterrupt):
        train_model(config, on_epoch=stop_after_two, checkpoint=checkpoint)
    assert torch.load(checkpoint, weights_only=True)["epoch"] == 2
    epochs_seen = []
    resumed, _ = train_model(config, on_epoch=epochs_seen.append, checkpoint=checkpoint)
    assert epochs_seen == [1, 2, 3]  # progress counts the restored epochs too
    for name, value in straight.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[name]), name
    # A checkpoint of another run is ignored, not resumed from.
    other, _ = train_model(
        TrainConfig(method="nce+", seed=4, num_samples=8, epochs=3), None, checkpoint
    )
    assert not torch.equal(other.head_out.weight, straight.head_out.weight)


def test_bad_study_arguments(capsys, tmp_path):
    with pytest.raises(ValueError, match="nce\\+"):
        parse_methods("nce,foo")
    with pytest.raises(ValueError, match="dataset"):
        StudyConfig(datasets=(3,))
    assert main(["regress1d", "--methods", "bogus", "--out", str(tmp_path)]) == 2
    assert "choose from" in capsys.readouterr().err


def test_smoothed_target_floor_vanishes_with_the_kernel_width():
    for dataset in (1, 2):
        floors = [smoothed_target_kl(dataset, (s,), size=256) for s in (0.2, 0.05, 0.01, 1e-3)]
        assert all(a > b for a, b in zip(floors, floors[1:])), floors
        assert floors[-1] < 1e-5 and floors[0] > 0.3


def test_smoothed_target_floor_matches_the_closed_form_on_data_set_2():
    # N(m, a^2) smoothed by N(0, s^2) is N(m, a^2 + s^2): D_KL per x in closed form.
    grid = evaluation_grid(512).astype(np.float64)
    a, s = 0.15 / (1 + np.exp(-grid)), 0.2
    closed = np.mean(np.log(np.hypot(a, s) / a) + a**2 / (2 * (a**2 + s**2)) - 0.5)
    assert smoothed_target_kl(2, (s,), size=512) == pytest.approx(closed, rel=0.01)


@pytest.mark.parametrize("dataset", [1, 2])
def test_smoothed_true_density_integrates_to_one(dataset):
    y = np.linspace(-8, 8, 8001)
    density = smoothed_true_density(dataset, np.array([-2.0, -0.5, 0.5, 2.0]), y, (0.0025, 0.2))
    np.testing.assert_allclose(np.trapezoid(density, y, axis=1), 1.0, rtol=1e-6)
