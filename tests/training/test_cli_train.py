import csv

import pytest
import torch
import yaml

from ebmtrack.cli.main import main
from ebmtrack.models.serialization import load_model, read_provenance
from ebmtrack.training.config import config_to_dict, read_config_file, save_config
from ebmtrack.training.dimp import DiMPTrainingConfig
from ebmtrack.training.presets import preset_config
from ebmtrack.training.runs import export_checkpoint

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
    # The head says which backbone weights its features came from (synthetic-smoke's random
    # ones), so a tracker with the ImageNet weights refuses it.
    provenance = read_provenance(out / "iou_net.safetensors")
    assert provenance["backbone_weights_from"].startswith("random initialisation")
    assert "cpu: backbone eager float32" in provenance["trained_on"]

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
        # A setting of another kind of experiment is refused, not ignored.
        (
            [*TINY, "--set", "dimp.num_iter=3"],
            "error: --set dimp.num_iter=3: dimp does not apply to iou-net experiments (--preset "
            "synthetic-smoke); it is a setting of dimp experiments",
        ),
        (
            ["--preset", "dimp-cpu", "--loss", "nce+"],
            "error: --loss: loss does not apply to dimp experiments (--preset dimp-cpu)",
        ),
        (
            ["--preset", "dimp-cpu", "--set", "head_width=0.5"],
            "--set head_width=0.5: head_width does not apply to dimp experiments",
        ),
        # The data source is named, and a field of another source is refused, not ignored.
        (
            [*TINY, "--set", "data.source=nope"],
            "data.source must be one of datasets, folder, pack, synthetic, got 'nope'",
        ),
        (
            [*TINY, "--got10k", "x"],
            "data.roots does not apply to data.source synthetic; it is a setting of data.source "
            "datasets",
        ),
        # Another source starts from its defaults, which the flags fill in.
        ([*TINY, "--set", "data.source=datasets", "--got10k", "missing"], "training data missing"),
        (
            [*TINY, "--set", "model=dimp"],
            "--set model=dimp: the kind of experiment is fixed by --preset synthetic-smoke "
            "(iou-net); for dimp, start from one of its presets: dimp-cpu, dimp-pack-cpu",
        ),
    ],
)
def test_bad_settings_exit_2_with_one_line(tmp_path, capsys, args, message):
    assert main(["train", "--out", str(tmp_path / "run"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_a_config_file_of_another_kind_is_refused(tmp_path, capsys):
    path = save_config(preset_config("dimp-cpu"), tmp_path / "dimp.yaml")
    assert main(["train", "--out", str(tmp_path / "run"), *TINY, "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"--config {path}: the kind of experiment is fixed by --preset synthetic-smoke" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_a_preset_without_its_data_names_the_data_root(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("EBMTRACK_DATA", str(tmp_path / "data"))
    assert main(["train", "--out", str(tmp_path / "run"), "--preset", "pack-cpu"]) == 2
    err = capsys.readouterr().err
    assert f"needs the data in {tmp_path / 'data' / 'train'} (data.pack: not a folder;" in err
    assert "set EBMTRACK_DATA=DIR (the data root), or --set data.pack=DIR)" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.parametrize("written_by", ["one class for both kinds", "before dimp"])
def test_a_run_saved_by_earlier_versions_resumes(tmp_path, capsys, written_by):
    """config.yaml as earlier versions wrote it: the settings of both kinds with ``model``, or
    (runs from before DiMP experiments) neither ``model`` nor ``dimp``."""
    config = preset_config("synthetic-smoke")
    trainer = config.trainer
    trainer.epochs, trainer.samples_per_epoch, trainer.batch_size = 1, 8, 4
    trainer.val_samples, trainer.progress = 4, False
    data = {**config_to_dict(config), "dimp": config_to_dict(DiMPTrainingConfig())}
    del data["data"]["source"]  # earlier versions named no data source
    if written_by == "before dimp":
        del data["model"], data["dimp"]
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["train", "--out", str(out), "--resume", "--threads", "1"]) == 0
    assert f"wrote {out / 'iou_net.safetensors'}" in capsys.readouterr().out
    assert load_model(out / "iou_net.safetensors", expected="AtomIoUNet").config.width == 0.25
    saved = read_config_file(out / "config.yaml")  # rewritten by the present version
    assert saved["model"] == "iou-net" and "dimp" not in saved


@pytest.mark.slow
def test_export_writes_the_latest_checkpoints_model_and_takes_no_other_flag(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), "--epochs", "1", *TINY]) == 0
    exported = tmp_path / "exported.safetensors"
    assert main(["train", "--out", str(out), "--export", str(exported)]) == 0
    assert f"wrote {exported} (the model of epoch 1 of {out})" in capsys.readouterr().out
    final, again = load_model(out / "iou_net.safetensors"), load_model(exported)
    for (name, value), (other, copy) in zip(
        final.state_dict().items(), again.state_dict().items(), strict=True
    ):
        assert name == other and torch.equal(value, copy)
    assert main(["train", "--out", str(out), "--export", str(exported), "--lr", "0.1"]) == 2
    assert "--export writes a run's checkpoint and takes only --out, not --lr" in (
        capsys.readouterr().err
    )
    assert main(["train", "--out", str(tmp_path / "none"), "--export", str(exported)]) == 2
    assert "holds no checkpoint yet" in capsys.readouterr().err
    # An epoch's checkpoint, stored in float16: the same model, each value rounded.
    half = tmp_path / "half.safetensors"
    assert export_checkpoint(out, half, epoch=1, dtype=torch.float16) == 1
    for (name, value), copy in zip(
        final.state_dict().items(), load_model(half).state_dict().values(), strict=True
    ):
        assert torch.equal(value.to(torch.float16).to(value.dtype), copy), name
    with pytest.raises(ValueError, match="keeps no checkpoint of epoch 3 \\(epoch-0001\\)"):
        export_checkpoint(out, half, epoch=3)


def test_the_help_names_every_preset(capsys):
    from ebmtrack.training.presets import PRESETS

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert [name for name in PRESETS if name not in text] == []


@pytest.mark.slow
def test_a_resume_point_carries_the_run_to_a_new_folder(tmp_path, capsys, monkeypatch):
    out, moved = tmp_path / "run", tmp_path / "moved"
    assert main(["train", "--out", str(out), "--epochs", "1", *TINY]) == 0
    point = tmp_path / "point.safetensors.gz"
    assert main(["train", "--out", str(out), "--write-resume-point", str(point)]) == 0
    assert "epoch 1, step 2 of" in capsys.readouterr().out
    assert main(["train", "--out", str(moved), "--resume-from", str(point), "--epochs", "2"]) == 2
    assert "--resume-from continues a run and takes only --out, not --epochs" in (
        capsys.readouterr().err
    )
    assert main(["train", "--out", str(moved), "--resume-from", str(point)]) == 0
    assert "restored epoch 1 (step 2)" in capsys.readouterr().out
    # A point over the part size is written as its parts, and read back joined.
    import ebmtrack.training.resume_point as resume_point

    monkeypatch.setattr(resume_point, "PART_BYTES", point.stat().st_size // 2 + 1)
    split = tmp_path / "split.safetensors.gz"
    assert main(["train", "--out", str(out), "--write-resume-point", str(split)]) == 0
    assert "in 2 parts split.safetensors.gz.part1" in capsys.readouterr().out
    assert main(["train", "--out", str(tmp_path / "again"), "--resume-from", str(split)]) == 0
    assert "restored epoch 1 (step 2)" in capsys.readouterr().out
    # The resumed run had nothing left to train: its model is the first run's, exactly.
    final = load_model(out / "iou_net.safetensors").state_dict()
    again = load_model(moved / "iou_net.safetensors").state_dict()
    assert all(torch.equal(value, again[key]) for key, value in final.items())
    assert main(["train", "--out", str(moved), "--resume-from", str(point)]) == 2
    assert "already holds a run" in capsys.readouterr().err
