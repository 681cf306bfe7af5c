"""Copy trained models from run folders into the package's weights, stored in float16.

    python scripts/ship_weights.py --dest src/ebmtrack/weights \\
        --box-head default=runs/pack-stream-mse --box-head pack=runs/pack-stream-nce \\
        --classifier runs/dimp-pack-clips [--epoch default=25]

Each model comes from its run's latest checkpoint (``--epoch TAG=N``, or ``classifier=N``: that
epoch's, where the run still keeps it) and goes to the file the weights table names for its role,
MobileNetV2 and the tag (:mod:`ebmtrack.weights.table`), its floating-point tensors in float16
(half the bytes; the trackers build float32 models from it). The default box head's record,
``default_model.json``, is rewritten from its run: the run's config, the validation numbers of
that epoch (``metrics.csv``), the parameters ``atom-iounet`` climbs it with and the sha256 of
each file. Prints, per file, the row of README.md's table and the sha256 for ``table.py``: the
README's sections and the table are edited by hand.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import sys
from pathlib import Path

import torch

from ebmtrack.models.serialization import load_model
from ebmtrack.training.config import read_config_file
from ebmtrack.training.runs import export_checkpoint
from ebmtrack.weights import find_shipped

BACKBONE = "mobilenetv2"
RECORD = "default_model.json"
MODELS = {"box-head": "AtomIoUNet", "dimp-classifier": "DiMPClassifier"}


def validation_numbers(run: Path, epoch: int) -> dict[str, float]:
    """The validation row of ``epoch`` in the run's ``metrics.csv`` (empty cells left out)."""
    with open(run / "metrics.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["split"] == "val" and int(row["epoch"]) == epoch:
                return {k: float(v) for k, v in row.items() if k not in ("epoch", "split") and v}
    raise ValueError(f"{run}/metrics.csv has no validation row of epoch {epoch}")


def ship(role: str, tag: str, run: Path, dest: Path, epoch: int | None) -> dict:
    """Write the run's model to its shipped file in ``dest``; returns its file entry."""
    entry = find_shipped(role, BACKBONE, tag)
    if entry is None:
        raise ValueError(f"the weights table has no {role} tagged {tag!r} for {BACKBONE}")
    path = dest / entry.file
    epoch = export_checkpoint(run, path, epoch, dtype=torch.float16)
    load_model(path, expected=MODELS[role])  # it loads as what the trackers read
    path.chmod(0o644)  # package data, readable by all
    data = path.read_bytes()
    return {
        "file": entry.file,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "epoch": epoch,
    }


def default_record(run: Path, head: dict, previous: dict) -> dict:
    """``default_model.json`` for the default box head shipped from ``run``."""
    from ebmtrack.tracking.atom.params import AtomParams
    from ebmtrack.tracking.atom.variants import ATOM_IOUNET

    config = read_config_file(run / "config.yaml")
    params = AtomParams(**ATOM_IOUNET.params)
    backbone = next(f for f in previous["files"] if f["file"] == previous["backbone_weights"])
    epoch = head["epoch"]
    return {
        "iou_net": head["file"],
        "backbone": BACKBONE,
        "backbone_weights": previous["backbone_weights"],
        "backbone_weights_source": previous["backbone_weights_source"],
        "loss": config["loss"]["name"],
        "tracker_params": {
            "box_step_length": params.box_step_length,
            "box_steps": params.box_steps,
        },
        "preset": config["preset"],
        "held_out": config["data"].get("holdout", []),
        "trainer": config["trainer"],
        "data": config["data"],
        "epoch": epoch,
        "train_pairs": epoch * config["trainer"]["samples_per_epoch"],
        "numbers": validation_numbers(run, epoch),
        "files": [{k: v for k, v in head.items() if k != "epoch"}, backbone],
    }


def tagged(values: list[str], flag: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        tag, sep, rest = value.partition("=")
        if not sep or not tag or not rest:
            raise ValueError(f"{flag} takes TAG=VALUE, got {value!r}")
        pairs[tag] = rest
    return pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, required=True, help="the package's weights folder")
    parser.add_argument("--box-head", action="append", default=[], help="TAG=RUN (repeatable)")
    parser.add_argument("--classifier", type=Path, help="a DiMP classifier's run folder")
    parser.add_argument(
        "--epoch", action="append", default=[], help="TAG=N or classifier=N (default: latest)"
    )
    args = parser.parse_args(argv)
    try:
        heads = {tag: Path(run) for tag, run in tagged(args.box_head, "--box-head").items()}
        epochs = {tag: int(n) for tag, n in tagged(args.epoch, "--epoch").items()}
        jobs = [("box-head", tag, run) for tag, run in heads.items()]
        if args.classifier is not None:
            jobs.append(("dimp-classifier", "classifier", args.classifier))
        unknown = sorted(set(epochs) - {tag for _, tag, _ in jobs})
        if unknown:
            raise ValueError(f"--epoch names {unknown[0]!r}, which nothing is shipped as")
        if not jobs:
            raise ValueError("nothing to ship: give --box-head TAG=RUN or --classifier RUN")
        shipped = {}
        for role, tag, run in jobs:
            table_tag = "default" if role == "dimp-classifier" else tag
            shipped[tag] = ship(role, table_tag, run, args.dest, epochs.get(tag))
        if "default" in heads:
            record_path = args.dest / RECORD
            record = default_record(
                heads["default"], shipped["default"], json.loads(record_path.read_text())
            )
            record_path.write_text(json.dumps(record, indent=2) + "\n")
    except (OSError, ValueError) as err:
        print(f"ship_weights.py: {err}", file=sys.stderr)
        return 2
    for tag, entry in shipped.items():
        print(
            f"{tag} (epoch {entry['epoch']}): | `{entry['file']}` | "
            f"{entry['bytes'] / 2**20:.2f} MiB | `{entry['sha256']}` |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
