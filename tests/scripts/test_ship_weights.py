"""``scripts/ship_weights.py``: a run's model into the package's weights, in float16, with the
default box head's record rewritten from its run."""

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from ebmtrack.cli.main import main as ebmtrack
from ebmtrack.models.serialization import load_model
from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.weights import FOLDER

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ship_weights.py"
TINY = ["--preset", "synthetic-smoke", "--samples-per-epoch", "8", "--batch-size", "4"]


@pytest.fixture(scope="module")
def ship_weights():
    spec = importlib.util.spec_from_file_location("ship_weights", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_a_run_is_shipped_in_float16_with_its_record(ship_weights, tmp_path, capsys):
    run, dest = tmp_path / "run", tmp_path / "weights"
    assert (
        ebmtrack(
            [
                "train",
                "--out",
                str(run),
                "--epochs",
                "2",
                *TINY,
                "--set",
                "trainer.val_samples=4",
                "--threads",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    dest.mkdir()
    shutil.copy(FOLDER / "default_model.json", dest)
    previous = json.loads((dest / "default_model.json").read_text())
    assert (
        ship_weights.main(
            ["--dest", str(dest), "--box-head", f"default={run}", "--epoch", "default=1"]
        )
        == 0
    )
    record = json.loads((dest / "default_model.json").read_text())
    head = dest / record["iou_net"]
    assert f"default (epoch 1): | `{head.name}` |" in capsys.readouterr().out
    assert {t.dtype for t in load_file(str(head)).values()} == {torch.float16, torch.int64}
    assert record["files"][0] == {
        "file": head.name,
        "sha256": hashlib.sha256(head.read_bytes()).hexdigest(),
        "bytes": head.stat().st_size,
    }
    assert record["files"][1] in previous["files"]  # the backbone's entry, unchanged
    assert record["epoch"] == 1 and record["train_pairs"] == 8 and record["loss"] == "mse"
    with open(run / "metrics.csv") as handle:
        first_val = next(line for line in handle if line.startswith("1,val,"))
    assert record["numbers"]["loss"] == float(first_val.split(",")[2])
    AtomParams(**record["tracker_params"])  # settings the tracker takes
    # epoch 1's model, each value rounded to float16
    exported = tmp_path / "e1.safetensors"
    assert ebmtrack(["train", "--out", str(run), "--export", str(exported)]) == 0  # latest: 2
    assert not torch.equal(
        load_model(exported).state_dict()["iou_predictor.weight"],
        load_model(head).state_dict()["iou_predictor.weight"],
    )


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "nothing to ship"),
        (["--box-head", "default"], "--box-head takes TAG=VALUE, got 'default'"),
        (["--box-head", "default=x", "--epoch", "nce=3"], "--epoch names 'nce'"),
        (["--box-head", "mse=x"], "the weights table has no box-head tagged 'mse'"),
    ],
)
def test_bad_arguments_are_one_line(ship_weights, tmp_path, capsys, args, message):
    assert ship_weights.main(["--dest", str(tmp_path), *args]) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
