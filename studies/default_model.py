"""Which loss trains the ``default-cpu`` IoU-Net best: ATOM's MSE, NCE+ or KLD-IS.

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="study folder")
    parser.add_argument("--losses", default=",".join(LOSSES), help="comma-separated box losses")
    parser.add_argument("--sequences", help="sequence folder (default: the preset's)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--no-train", action="store_true", help="evaluate finished runs only")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    losses = tuple(name.strip() for name in args.losses.split(",") if name.strip())
    rows = run_study(args.out, losses, args.sequences, train=not args.no_train)
    print((args.out / "comparison.md").read_text(), end="")
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
