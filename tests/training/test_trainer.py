import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from training_toy import ToyModule, ToyRegression, toy_config

from ebmtrack.training import NonFiniteLossError, Trainer
from ebmtrack.training.checkpoint import MODEL_FILE, latest_checkpoint

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(latest_checkpoint(run_dir / "checkpoints").path / MODEL_FILE))


def test_training_lowers_the_loss_and_logs_every_epoch(tmp_path):
    trainer = Trainer(
        ToyModule(), ToyRegression(), toy_config(), tmp_path, val_data=ToyRegression(seed=1)
    )
    results = trainer.fit()
    losses = [r.train["loss"] for r in results]
    assert losses[-1] < 0.5 * losses[0]
    assert results[-1].val["loss"] < results[0].val["loss"]
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    assert rows[0].startswith("epoch,split,loss,lr,samples_per_s,time_s,mae")
    assert len(rows) == 1 + 2 * 3
    # StepLR(2, 0.2): epochs 1-2 at 3e-2, epoch 3 at 6e-3.
    assert [r.train["lr"] for r in results] == pytest.approx([3e-2, 3e-2, 6e-3])
    assert latest_checkpoint(tmp_path / "checkpoints").epoch == 3
    assert len(list((tmp_path / "checkpoints").glob("epoch-*"))) == 2  # keep_checkpoints


def test_resume_after_a_stop_reproduces_the_uninterrupted_run(tmp_path):
    # Dropout makes every step random: only exact RNG handling gives equal weights.
    config = toy_config(epochs=4)
    Trainer(ToyModule(dropout=0.3), ToyRegression(), config, tmp_path / "full").fit()

    first = Trainer(ToyModule(dropout=0.3), ToyRegression(), config, tmp_path / "cut")
    first.fit(stop_after_epoch=2)
    del first
    # What a kill during epoch 3's checkpoint leaves: its CSV row and a half-written folder.
    with open(tmp_path / "cut" / "metrics.csv", "a") as handle:
        handle.write("3,train,999,0,0,0,999\n")
    (tmp_path / "cut" / "checkpoints" / ".tmp-epoch-0003-1").mkdir()
    torch.manual_seed(12345)  # the "new process" starts from other RNG states
    resumed = Trainer(ToyModule(dropout=0.3, seed=99), ToyRegression(), config, tmp_path / "cut")
    assert resumed.resume().epoch == 2
    resumed.fit()

    full, cut = final_weights(tmp_path / "full"), final_weights(tmp_path / "cut")
    assert full.keys() == cut.keys()
    for key in full:
        torch.testing.assert_close(cut[key], full[key], rtol=0, atol=1e-6)

    def epoch_split_loss(run: str) -> list[list[str]]:
        lines = (tmp_path / run / "metrics.csv").read_text().splitlines()[1:]
        return [line.split(",")[:3] for line in lines]

    # Each epoch is logged once (train + val rows), with the same losses as without the stop.
    assert epoch_split_loss("cut") == epoch_split_loss("full")
    assert [row[0] for row in epoch_split_loss("cut")] == ["1", "2", "3", "4"]


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    # Index 0 is in one of the 8 batches of epoch 2 but, with this seed, not ... in epoch 1:
    # the 128 samples per epoch are a permutation prefix of the 256; find such an index.
    from ebmtrack.training.batch_sampler import epoch_order

    config = toy_config(epochs=3, val_every=0)
    seen_1 = set(epoch_order(256, 128, config.seed, 1).tolist())
    seen_2 = set(epoch_order(256, 128, config.seed, 2).tolist())
    bad = min(seen_2 - seen_1)
    trainer = Trainer(ToyModule(), ToyRegression(nan_index=bad), config, tmp_path)
    with pytest.raises(NonFiniteLossError, match=r"loss became nan at epoch 2 .*epoch-0001"):
        trainer.fit()
    checkpoint = latest_checkpoint(tmp_path / "checkpoints")
    assert checkpoint.epoch == 1
    weights = final_weights(tmp_path)
    assert all(torch.isfinite(w).all() for w in weights.values())
    # The module itself was not updated with the NaN gradient either.
    assert all(torch.isfinite(p).all() for p in trainer.module.parameters())


@pytest.mark.slow  # two fresh Python processes importing torch
def test_two_gloo_processes_match_one_process_with_the_same_total_batch(tmp_path):
    # The script trains toy_config() on 2 processes, 8 samples each per batch of 16.
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(HERE / "ddp_toy_main.py"),
        str(tmp_path / "ddp"),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]

    single_run = Trainer(
        ToyModule(),
        ToyRegression(),
        toy_config(),
        tmp_path / "single",
        val_data=ToyRegression(seed=1),
    )
    single_results = single_run.fit()
    ddp, single = final_weights(tmp_path / "ddp"), final_weights(tmp_path / "single")
    for key in single:
        torch.testing.assert_close(ddp[key], single[key], rtol=0, atol=1e-5)
    # The logged losses are averages over both processes, equal to the single-process ones.
    with open(tmp_path / "ddp" / "metrics.csv") as handle:
        ddp_losses = [float(row["loss"]) for row in csv.DictReader(handle)]
    single_losses = [v for r in single_results for v in (r.train["loss"], r.val["loss"])]
    assert ddp_losses == pytest.approx(single_losses, rel=1e-5)
    # Both processes' generator states were gathered into the checkpoint.
    rng = torch.load(
        latest_checkpoint(tmp_path / "ddp" / "checkpoints").path / "rng.pt", weights_only=True
    )
    assert len(rng) == 2


def test_a_module_without_trainable_parameters_is_rejected(tmp_path):
    module = ToyModule().requires_grad_(False)
    with pytest.raises(ValueError, match="requires_grad"):
        Trainer(module, ToyRegression(), toy_config(), tmp_path)


def test_cpu_bf16_runs_the_step_in_bfloat16_and_validates_in_float32(tmp_path):
    module = ToyModule()
    seen = []
    module.net[0].register_forward_hook(lambda mod, args, out: seen.append(out.dtype))
    config = toy_config(epochs=1, cpu_bf16=True)
    result = Trainer(module, ToyRegression(), config, tmp_path, val_data=ToyRegression(seed=1))
    result = result.fit()[-1]
    steps, val_steps = 128 // 16, 64 // 16
    assert seen == [torch.bfloat16] * steps + [torch.float32] * val_steps
    assert math.isfinite(result.train["loss"]) and math.isfinite(result.val["loss"])


def test_cpu_bf16_is_refused_off_the_cpu():
    with pytest.raises(ValueError, match="trainer.cpu_bf16 applies to CPU runs only"):
        toy_config(cpu_bf16=True, device="cuda")
