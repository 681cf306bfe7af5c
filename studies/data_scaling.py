"""How tracking accuracy grows with the number of distinct training objects (data scaling).

ATOM's IoU-Net (the ``pack-cpu`` recipe: frozen ImageNet MobileNetV2, half-width head, cached
features, 4 epochs of 2048 pairs) is trained on four nested slices of the training pack, with
each box loss, then the ``atom`` tracker runs with each head:

- ``a``: 8 of the pack's tracks (as many objects as the 8 training sequences of the
  ``default-cpu`` preset);
- ``b``: all of its training tracks;
- ``c``: + coco128's objects (as stills and as targets of generated sequences);
- ``d``: + Tiny ImageNet's objects as targets of generated sequences (the ``pack-cpu`` preset);
- ``e``: slice ``d`` with a cache of 8192 pairs instead of 2048, each visited once: the same
  training steps, four times the distinct pairs.

Every slice keeps the pack's held-out tracks out of training. The tracker setting the heads need
(how far a frame moves the size, ``size_update_rate``) is chosen on those held-out tracks
(:data:`VALIDATION_RATES`), never on the test sequences; the test sequences are then tracked with
``--seeds`` tracker seeds each (the trackers' own ``seed``: their augmentation, proposals and
noise). Run::

    python studies/data_scaling.py --out runs/data-scaling

Everything is resumable: finished trainings are not rerun (``OUT/LEVEL/LOSS/``, one feature cache
per slice in ``OUT/features-LEVEL``) and finished tracking runs are skipped
(``OUT/LEVEL/LOSS/val-RATE``, ``OUT/LEVEL/LOSS/test`` for seed 0 and ``test-seedS`` for the
others). Parts can run in parallel processes
(``--levels``, ``--losses``). Writes ``OUT/scaling.md``, ``OUT/scaling.json``,
``OUT/scaling.png`` and ``OUT/generated.jpg`` (frames of generated sequences with their boxes).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from ebmtrack.data.datasets.folder import load_folder
from ebmtrack.data.datasets.sequence import Sequence, select
from ebmtrack.evaluation.results import read_result
from ebmtrack.evaluation.runner import TrackerSpec, run_evaluation
from ebmtrack.evaluation.scoring import protocol_for, score_run
from ebmtrack.tracking.registry import get_factory
from ebmtrack.training.box_regression import BoxLossConfig
from ebmtrack.training.experiment import IoUNetExperiment, run_experiment
from ebmtrack.training.presets import preset_config

PRESET = "pack-cpu"
LOSSES = ("mse", "nce+")


@dataclass(frozen=True)
class Level:
    """One slice of the training pack: ``data`` changes of the preset's :class:`DataConfig`, and
    how many processed pairs its feature cache holds (the 4 epochs of 2048 samples visit each
    pair of a 2048-pair cache 4 times, of an 8192-pair cache once: the same steps either way)."""

    label: str
    data: dict
    pairs: int = 2048


LEVELS = {
    "a": Level("8 tracks", {"pack_parts": ["sequences"], "pack_tracks": 8}),
    "b": Level("all training tracks", {"pack_parts": ["sequences"]}),
    "c": Level("+ coco128", {"pack_parts": ["sequences", "coco128"]}),
    "d": Level("+ Tiny ImageNet", {"pack_parts": ["sequences", "coco128", "tiny-imagenet"]}),
    "e": Level(
        "slice d, 4x the pairs",
        {"pack_parts": ["sequences", "coco128", "tiny-imagenet"]},
        pairs=8192,
    ),
}
RESULT_FILE = "result.json"
VALIDATION_RATES = (0.2, 0.5, 1.0)
"""``size_update_rate`` values tried on the held-out tracks of the pack (1.0 is ATOM's)."""


def level_config(level: str, loss: str, out: Path, pack: str | None = None) -> IoUNetExperiment:
    """The ``pack-cpu`` config of one slice and loss, with the slice's shared feature cache."""
    config = preset_config(PRESET)
    data = config.data.replace(**LEVELS[level].data)
    if pack is not None:
        data = data.replace(pack=pack)
    cache = replace(
        config.feature_cache, folder=str(out / f"features-{level}"), train_pairs=LEVELS[level].pairs
    )
    return replace(config, data=data, feature_cache=cache, loss=BoxLossConfig(name=loss))


def distinct_objects(config: IoUNetExperiment) -> int:
    """How many distinct annotated objects the slice trains on (tracks + still objects)."""
    from ebmtrack.training.sources.pack import pack_sources

    sources, _ = pack_sources(
        config.data.pack, config.data.pack_parts, config.data.holdout, config.data.pack_tracks, 1, 0
    )
    objects = sources["synthetic"].objects
    tracks = len(sources["sequences"])
    # ObjectPatches holds the tracks' still frames first: count each track once, not per frame.
    stills = sum(len(c) for c in objects.collections[1:])
    return tracks + stills


def track(
    out: Path, name: str, sequences: list[Sequence], options: dict, runs: int, workers: int
) -> list[dict[str, float]]:
    """Run tracker ``name`` (``atom``, or ``atom-iounet`` with a head's ``weights``) with
    ``options`` ``runs`` times over ``sequences`` (resumably); per-run AUC of every sequence:
    ``[{sequence: auc}, ...]``. Results are filed under ``atom`` either way."""
    spec = TrackerSpec("atom", get_factory(name), options)
    run_evaluation([spec], sequences, out, runs=runs, workers=workers, progress=False)
    protocol = protocol_for("otb")
    per_run = []
    for run in range(runs):
        scores = {}
        for sequence in sequences:
            boxes, times = read_result(out, "atom", run, sequence.name)
            scores[sequence.name] = (
                100 * score_run(boxes, sequence, protocol, times).summary()["auc"]
            )
        per_run.append(scores)
    return per_run


def mean_auc(per_run: list[dict[str, float]]) -> float:
    """Mean over runs (seeds) of the mean over sequences."""
    return float(np.mean([np.mean(list(scores.values())) for scores in per_run]))


def track_seeds(
    out: Path, name: str, sequences: list[Sequence], options: dict, seeds: int, workers: int
) -> list[dict[str, float]]:
    """:func:`track` once per tracker seed ``0 .. seeds - 1`` (option ``seed``), seed 0 in
    ``out`` (the tracker's default seed, so its options name none), seed S in ``out-seedS``."""
    per_run = []
    for seed in range(seeds):
        folder = out if seed == 0 else out.with_name(f"{out.name}-seed{seed}")
        seeded = options if seed == 0 else options | {"seed": seed}
        per_run += track(folder, name, sequences, seeded, 1, workers)
    return per_run


def run_level(
    level: str,
    loss: str,
    out: Path,
    test: list[Sequence],
    seeds: int,
    workers: int,
    train: bool = True,
    pack: str | None = None,
) -> dict | None:
    """Train (or resume) one head, choose its size rate on the held-out tracks, track the test
    sequences; None while the head is not trained."""
    config = level_config(level, loss, out, pack)
    run_dir = out / level / loss
    if train:
        run_experiment(config, run_dir, resume=True)
    weights = run_dir / config.model_file
    if not weights.is_file():
        return None
    held_out = held_out_tracks(config)
    base = {"weights": str(weights), "backbone": config.backbone}
    validation = {
        rate: mean_auc(
            track(
                run_dir / f"val-{rate}",
                "atom-iounet",
                held_out,
                base | {"size_update_rate": rate},
                1,
                workers,
            )
        )
        for rate in VALIDATION_RATES
    }
    rate = max(validation, key=validation.get)
    per_run = track_seeds(
        run_dir / "test", "atom-iounet", test, base | {"size_update_rate": rate}, seeds, workers
    )
    row = {
        "level": level,
        "loss": loss,
        "objects": distinct_objects(config),
        "validation": validation,
        "size_update_rate": rate,
        "per_run": per_run,
        "auc": mean_auc(per_run),
    }
    (run_dir / RESULT_FILE).write_text(json.dumps(row, indent=1) + "\n")
    return row


def finished_rows(out: Path) -> list[dict]:
    """The rows of every head of the study folder that has been trained and tracked so far (by
    this process or another), in slice and loss order."""
    rows = [json.loads(p.read_text()) for p in out.glob(f"*/*/{RESULT_FILE}")]
    return sorted(rows, key=lambda r: (r["level"], r["loss"]))


def held_out_tracks(config: IoUNetExperiment) -> list[Sequence]:
    """The training pack's held-out tracks: where tracker settings are chosen."""
    return select(load_folder(Path(config.data.pack) / "sequences"), config.data.holdout)


def baseline(
    out: Path, test: list[Sequence], seeds: int, workers: int, pack: str | None = None
) -> dict:
    """The default tracker without a head (classifier + scale search) on the held-out tracks and
    on the test sequences."""
    held_out = held_out_tracks(level_config("d", "mse", out, pack))
    validation = mean_auc(track(out / "no-head" / "val", "atom", held_out, {}, 1, workers))
    per_run = track_seeds(out / "no-head" / "test", "atom", test, {}, seeds, workers)
    return {
        "level": "-",
        "loss": "none",
        "objects": 0,
        "validation": validation,
        "per_run": per_run,
        "auc": mean_auc(per_run),
    }


def write_report(out: Path, rows: list[dict], reference: dict) -> None:
    """``scaling.md`` (a table with per-seed AUC and paired differences against no head; each
    loss against MSE on the same slice; AUC per sequence), ``scaling.json`` and ``scaling.png``
    (AUC against distinct objects, one line per loss)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(reference["per_run"][0])

    def per_sequence(row: dict) -> np.ndarray:  # (seeds, sequences)
        return np.array([[scores[n] for n in names] for scores in row["per_run"]])

    ref = per_sequence(reference).mean(axis=0)
    lines = [
        "| slice | loss | distinct objects | size rate (val AUC) | test AUC, mean of seeds | "
        "per seed | vs no head: paired mean diff (SE) | sequences better |",
        "|---|---|---|---|---|---|---|---|",
        f"| - | none (classifier + scale search) | 0 | - ({reference['validation']:.1f}) | "
        f"{reference['auc']:.1f} | "
        + " / ".join(f"{np.mean(list(s.values())):.1f}" for s in reference["per_run"])
        + " | - | - |",
    ]
    for row in rows:
        scores = per_sequence(row)
        diff = scores.mean(axis=0) - ref
        val = ", ".join(f"{r}: {v:.1f}" for r, v in row["validation"].items())
        lines.append(
            f"| {row['level']} ({LEVELS[row['level']].label}) | {row['loss']} | {row['objects']} | "
            f"{row['size_update_rate']} ({val}) | {row['auc']:.1f} | "
            + " / ".join(f"{v:.1f}" for v in scores.mean(axis=1))
            + f" | {diff.mean():+.1f} ({diff.std(ddof=1) / np.sqrt(len(diff)):.1f}) "
            f"| {int((diff > 0).sum())} of {len(names)} |"
        )
    lines += [
        "",
        "Each loss against MSE on the same slice, tracker seed by tracker seed (paired by "
        "sequence; spread: standard deviation of the per-seed means; SE: over sequences of the "
        "seed-mean differences):",
        "",
        "| slice | loss - MSE | per seed | mean | spread over seeds | SE over sequences "
        "| sequences better |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        mse = [r for r in rows if r["level"] == row["level"] and r["loss"] == "mse"]
        if row["loss"] == "mse" or not mse or len(mse[0]["per_run"]) != len(row["per_run"]):
            continue
        diff = per_sequence(row) - per_sequence(mse[0])  # (seeds, sequences)
        per_seed, by_sequence = diff.mean(axis=1), diff.mean(axis=0)
        spread = per_seed.std(ddof=1) if len(per_seed) > 1 else float("nan")
        lines.append(
            f"| {row['level']} | {row['loss']} - mse | "
            + " / ".join(f"{v:+.1f}" for v in per_seed)
            + f" | {per_seed.mean():+.1f} | {spread:.1f} "
            f"| {by_sequence.std(ddof=1) / np.sqrt(len(names)):.1f} "
            f"| {int((by_sequence > 0).sum())} of {len(names)} |"
        )
    heads = [f"{row['level']}, {row['loss']}" for row in rows]
    lines += [
        "",
        "AUC per sequence, mean of the seeds:",
        "",
        "| sequence | no head | " + " | ".join(heads) + " |",
        "|---|---|" + "---|" * len(heads),
    ]
    table = np.stack([ref] + [per_sequence(row).mean(axis=0) for row in rows], axis=1)
    for name, values in zip([*names, "mean"], [*table, table.mean(axis=0)], strict=True):
        lines.append(f"| {name} | " + " | ".join(f"{v:.1f}" for v in values) + " |")
    (out / "scaling.md").write_text("\n".join(lines) + "\n")
    (out / "scaling.json").write_text(
        json.dumps({"no_head": reference, "heads": rows}, indent=1, default=float) + "\n"
    )
    figure, axis = plt.subplots(figsize=(5.5, 3.6))
    for index, loss in enumerate(sorted({row["loss"] for row in rows})):
        for pairs, marker in ((2048, "o"), (8192, "*")):
            chosen = sorted(
                (r for r in rows if r["loss"] == loss and LEVELS[r["level"]].pairs == pairs),
                key=lambda r: r["objects"],
            )
            if not chosen:
                continue
            runs = [per_sequence(r).mean(axis=1) for r in chosen]
            axis.errorbar(
                [r["objects"] for r in chosen],
                [r.mean() for r in runs],
                yerr=[r.std() for r in runs],
                marker=marker,
                color=f"C{index}",
                linestyle="-" if marker == "o" else "none",
                markersize=6 if marker == "o" else 11,
                capsize=3,
                label=f"atom + {loss} head, {pairs} pairs",
            )
    axis.axhline(reference["auc"], color="grey", linestyle="--", label="atom, no head")
    axis.set_xscale("log")
    axis.set_xlabel("distinct training objects")
    axis.set_ylabel("mean AUC on the 13 test sequences")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out / "scaling.png", dpi=120)
    plt.close(figure)


def generated_grid(config: IoUNetExperiment, path: Path, rows: int = 4, cols: int = 6) -> Path:
    """A grid of frames of the slice's generated sequences with their boxes (green): two frames
    (first and middle) of each of ``rows * cols / 2`` sequences."""
    import cv2

    from ebmtrack.training.sources.pack import pack_sources

    data = config.data
    sources, _ = pack_sources(
        data.pack, data.pack_parts, data.holdout, data.pack_tracks, rows * cols, 0, data.synthetic
    )
    tiles = []
    for sequence in sources["synthetic"]:
        for index in (0, len(sequence) // 2):
            frame = np.ascontiguousarray(sequence.frame(index))
            x, y, w, h = np.rint(sequence.ground_truth[index]).astype(int)
            cv2.rectangle(frame, (x, y), (x + w, y + h), (0, 255, 0), 1)
            tiles.append(frame)
    tiles = tiles[: rows * cols]
    grid = np.concatenate(
        [np.concatenate(tiles[r * cols : (r + 1) * cols], axis=1) for r in range(rows)], axis=0
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), cv2.cvtColor(grid, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 85])
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="study folder")
    parser.add_argument("--levels", default=",".join(LEVELS), help="comma-separated slices")
    parser.add_argument("--losses", default=",".join(LOSSES), help="comma-separated box losses")
    parser.add_argument("--pack", help="training pack folder (default: the preset's)")
    parser.add_argument(
        "--test", default="../shared/data/sequences", help="folder of the test sequences"
    )
    parser.add_argument(
        "--seeds", type=int, default=3, help="tracker seeds (0 .. N-1) per test sequence"
    )
    parser.add_argument("--workers", type=int, default=1, help="tracking worker processes")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads for training")
    parser.add_argument("--no-train", action="store_true", help="evaluate finished heads only")
    args = parser.parse_args(argv)
    levels = [v.strip() for v in args.levels.split(",") if v.strip()]
    losses = [v.strip() for v in args.losses.split(",") if v.strip()]
    unknown = sorted(set(levels) - set(LEVELS))
    if unknown:
        parser.error(f"--levels: unknown {unknown}; valid: {', '.join(LEVELS)}")
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    test = load_folder(args.test)
    generated_grid(level_config("d", "mse", args.out, args.pack), args.out / "generated.jpg")
    for level in levels:
        for loss in losses:
            run_level(
                level, loss, args.out, test, args.seeds, args.workers, not args.no_train, args.pack
            )
    reference = baseline(args.out, test, args.seeds, args.workers, args.pack)
    write_report(args.out, finished_rows(args.out), reference)
    print((args.out / "scaling.md").read_text(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
