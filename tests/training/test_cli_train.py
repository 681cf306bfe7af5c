import csv

import pytest
import torch

from ebmtrack.cli.main import main
from ebmtrack.models.serialization import load_model

TINY = [
    "--preset",
    "synthetic-smoke",
    "--samples-per-epoch",
    "8",
    "--batch-size",
    "4",
    "--set",
    "trainer.val_samples=4",
    "--threads",
    "1",
    "--no-progress",
]


@pytest.fixture(autouse=True)
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_train_then_resume_to_more_epochs(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), "--epochs", "1", *TINY]) == 0
    assert "epoch 1: train loss" in capsys.readouterr().out
    assert (out / "config.yaml").is_file() and (out / "checkpoints" / "epoch-0001").is_dir()
    first = load_model(out / "iou_net.safetensors", expected="AtomIoUNet")
    assert first.config.backbone == "mobilenetv2"

    # Starting over in the same folder is refused; --resume reads the run's saved config and
    # --epochs extends it.
    assert main(["train", "--out", str(out), "--epochs", "2", *TINY]) == 2
    assert "already holds a run (checkpoint epoch-0001); resume it" in capsys.readouterr().err
    assert main(["train", "--out", str(out), "--resume", "--epochs", "2", "--threads", "1"]) == 0
    assert "epoch 2: train loss" in capsys.readouterr().out
    with open(out / "metrics.csv") as handle:
        rows = list(csv.DictReader(handle))
    # Validation rows also rank the proposals (columns added when first seen).
    assert rows[0]["rank_corr"] == "" and -1 <= float(rows[1]["rank_corr"]) <= 1
    assert [(r["epoch"], r["split"]) for r in rows] == [
        ("1", "train"),
        ("1", "val"),
        ("2", "train"),
        ("2", "val"),
    ]
    second = load_model(out / "iou_net.safetensors")
    changed = [
        not torch.equal(a, b)
        for a, b in zip(first.state_dict().values(), second.state_dict().values())
    ]
    assert any(changed)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "nope"], "unknown preset 'nope'; choose from atom-r18, synthetic-smoke"),
        (["--set", "trainer.epoch=3"], "unknown key(s) epoch in config.trainer"),
        (["--loss", "l1"], "unknown box loss 'l1'"),
        (["--loss", "nce+", "--set", "loss.params.betta=1"], "unknown param(s) betta of loss"),
        ([*TINY, "--loss", "nce+", "--set", "loss.params.beta=-1"], "beta must be positive"),
        (
            [],
            "--preset atom-r18 (the default) needs --backbone-weights FILE for backbone resnet18 "
            "(ImageNet weights, e.g. torchvision's resnet18-*.pth; none ship) and training data: "
            "--got10k DIR, --lasot DIR, --trackingnet DIR and/or --coco DIR; --preset "
            "synthetic-smoke runs on generated data alone",
        ),
        (["--set", "pretrained=false"], "needs training data: --got10k DIR"),
        (["--set", "pretrained=false", "--got10k", "missing"], "training data missing"),
    ],
)
def test_bad_settings_exit_2_with_one_line(tmp_path, capsys, args, message):
    assert main(["train", "--out", str(tmp_path / "run"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
