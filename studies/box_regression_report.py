"""The report of the box-regression study (``box_regression.py``): the table of the first seed's
runs against the paper's Table 2, the key differences, the M-curve (Figure 3) and every method
over seeds and test sequences, from the results in the study folder.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
from box_regression_runs import (
    CURVE_LOSSES,
    CURVE_SAMPLES,
    FAILED_FILE,
    KEY_PAIRS,
    PAPER_TABLE2,
    RESULT_FILE,
    SEED_PAIRS,
    TABLE_METHODS,
    TOP_GROUP,
    StudyConfig,
    base_losses,
    curve_run,
    run_losses,
    seeded_run,
)
from refinement import paired_difference

from ebmtrack.files import write_json_atomic


def _train_stats(run_dir: Path, batch_size: int) -> dict[str, float]:
    """Validation ranking numbers and the measured seconds per iteration of a finished run."""
    path = run_dir / "metrics.csv"
    if not path.is_file():
        return {}
    with open(path, newline="") as stream:
        rows = list(csv.DictReader(stream))
    stats = {}
    for row in rows:
        if row["split"] == "train":
            stats["run_s_per_iter"] = batch_size / float(row["samples_per_s"])
        elif row["split"] == "val":
            stats.update(rank_corr=float(row["rank_corr"]), top1_iou=float(row["top1_iou"]))
    return stats


def _row(out: Path, name: str, config: StudyConfig) -> dict | None:
    """One run's numbers from its folder (None if it has none yet)."""
    if (out / name / FAILED_FILE).is_file():
        return {"run": name, "failed": json.loads((out / name / FAILED_FILE).read_text())["error"]}
    path = out / name / RESULT_FILE
    if not path.is_file():
        return None
    return {
        "run": name,
        **json.loads(path.read_text()),
        **_train_stats(out / name, config.batch_size),
    }


def write_report(out: Path, config: StudyConfig) -> dict:
    """``OUT/results.json``, ``OUT/report.md`` (the table, the key differences and the M-curve of
    the first seed's runs, then every method over seeds and sequences) and ``OUT/m-curve.png``
    from every run with results in ``out``."""
    runs = base_losses(config)
    timing = (
        json.loads((out / "timing.json").read_text()) if (out / "timing.json").is_file() else {}
    )
    all_rows = {
        name: row for name in ["untrained", *run_losses(config)] if (row := _row(out, name, config))
    }
    first = config.seeds[0]
    rows = {"untrained": all_rows["untrained"]} if "untrained" in all_rows else {}
    for name in runs:
        if seeded_run(name, first) in all_rows:
            rows[name] = all_rows[seeded_run(name, first)]
    untrained = rows.get("untrained")
    timing = {name: value for name, value in timing.items() if isinstance(value, float)}
    lines = _table_lines(rows, runs, timing)
    differences = {}
    for first, second in KEY_PAIRS:
        if "ious_after" in rows.get(first, {}) and "ious_after" in rows.get(second, {}):
            mean, se = paired_difference(rows[first]["ious_after"], rows[second]["ious_after"])
            differences[f"{first} - {second}"] = (mean, se)
    lines.append("")
    lines += [
        f"- {pair}, same {untrained['num_boxes'] if untrained else '?'} boxes: "
        f"{mean:+.4f} +- {se:.4f} (paired s.e.)"
        for pair, (mean, se) in differences.items()
    ]
    curve, ranking = m_curve(rows), _curve_ranking(rows)
    has_curve = any(curve.values())  # the M-curve's runs are optional (``--runs``)
    if has_curve:
        lines += _curve_lines(curve, ranking)
    by_seed = {
        name: {seed: all_rows.get(seeded_run(name, seed)) for seed in config.seeds} for name in runs
    }
    by_seed.update(_pseudo_methods(all_rows.get("untrained"), by_seed, config.seeds))
    seeds = {name: seed_summary([r for r in rs.values() if r]) for name, rs in by_seed.items()}
    seed_differences = {
        f"{a} - {b}": seed_difference(by_seed.get(a, {}), by_seed.get(b, {})) for a, b in SEED_PAIRS
    }
    lines += _seed_lines(config.seeds, seeds, seed_differences)
    (out / "report.md").write_text("\n".join(lines) + "\n")
    record = {
        "config": asdict(config),
        "timing_s_per_iter": timing,
        "rows": all_rows,
        "differences": differences,
        "over_seeds": {name: summary for name, summary in seeds.items() if summary},
        "over_seeds_differences": {k: v for k, v in seed_differences.items() if v},
        "m_curve": {loss: {str(k): v for k, v in points.items()} for loss, points in curve.items()},
    }
    write_json_atomic(out / "results.json", record)
    if has_curve:
        plot_m_curve(curve, ranking, out / "m-curve.png")
    return record


def _table_lines(rows: dict, runs: dict, timing: dict[str, float]) -> list[str]:
    """The report's table of the first seed's runs (``rows``), with the timing slice's seconds per
    iteration (``timing``) and the paper's Table 2."""
    untrained = rows.get("untrained")
    lines = [
        "| method | M | IoU after (S1) | > 0.5 | > 0.75 | improved | step | s/iter (slice) | "
        "x ML-IS | s/iter (run) | rank_corr | paper AP / AP50 / AP75 | paper s/iter |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    if untrained:
        start = untrained["start"]
        lines.append(
            f"| no refinement (start boxes) | - | {start['iou_after']:.3f} | "
            f"{start['above_50']:.3f} | {start['above_75']:.3f} | - | - | - | - | - | - | - | - |"
        )
    base_time = timing.get("ml-is")
    for name in ["untrained", *TABLE_METHODS]:
        row = rows.get(name)
        if row is None:
            continue
        if "failed" in row:
            lines.append(f"| {name} | - | failed: non-finite loss | | | | | | | | | | |")
            continue
        samples = runs[name].params.get("num_samples", "-") if name in runs else "-"
        slice_time = timing.get(name)
        paper = PAPER_TABLE2.get(name)
        lines.append(
            f"| {name} | {samples} | {row['iou_after']:.3f} | {row['above_50']:.3f} | "
            f"{row['above_75']:.3f} | {row['improved']:.2f} | {row['step_length']:g} | "
            + (f"{slice_time:.2f} | " if slice_time else "- | ")
            + (f"{slice_time / base_time:.2f} | " if slice_time and base_time else "- | ")
            + (f"{row['run_s_per_iter']:.2f} | " if "run_s_per_iter" in row else "- | ")
            + (f"{row['rank_corr']:.3f} | " if "rank_corr" in row else "- | ")
            + (f"{paper[0]} / {paper[1]} / {paper[2]} | {paper[3]} |" if paper else "- | - |")
        )
    if "mse" in rows and "atom" in rows["mse"]:
        atom = rows["mse"]["atom"]
        lines.append(
            f"| mse, ATOM's ascent | - | {atom['iou_after']:.3f} | {atom['above_50']:.3f} | "
            f"{atom['above_75']:.3f} | {atom['improved']:.2f} | 1 x size | | | | | | |"
        )
    return lines


def _curve_lines(curve: dict, ranking: dict) -> list[str]:
    """The report's table of the M-curve: per M, each loss's IoU after refinement and ranking."""
    header = " | ".join(f"{loss} IoU after | {loss} rank_corr" for loss in CURVE_LOSSES)
    lines = ["", f"| M | {header} |", "|---|" + "---|---|" * len(CURVE_LOSSES)]
    for samples in CURVE_SAMPLES:
        cells = []
        for loss in CURVE_LOSSES:
            point = curve[loss].get(samples)
            cells.append(
                "-"
                if point is None
                else point
                if isinstance(point, str)
                else f"{point[0]:.3f} +- {point[1]:.3f}"
            )
            cells.append(next((f"{r:.3f}" for m, r in ranking[loss] if m == samples), "-"))
        lines.append(f"| {samples} | " + " | ".join(cells) + " |")
    return lines


def _sequence_means(row: dict) -> dict[str, float] | None:
    """Mean IoU after refinement per test sequence of one run's result (None for a result without
    the sequences' sizes, or a failed run)."""
    if "sequence_boxes" not in row or "ious_after" not in row:
        return None
    ious = np.asarray(row["ious_after"], dtype=np.float64)
    bounds = np.cumsum([0, *row["sequence_boxes"]])
    if bounds[-1] != len(ious):
        raise ValueError(f"sequence_boxes {row['sequence_boxes']} do not add up to {len(ious)}")
    return {
        name: float(ious[start:stop].mean())
        for name, start, stop in zip(row["sequences"], bounds[:-1], bounds[1:])
    }


def _pseudo_methods(
    untrained: dict | None, by_seed: dict[str, dict[int, dict | None]], seeds: tuple[int, ...]
) -> dict[str, dict[int, dict | None]]:
    """Rows that are no trained head of their own, per seed: ``start`` (the start boxes, the same
    for every seed), ``top-4`` (the box-wise mean IoU after refinement of :data:`TOP_GROUP`'s
    runs of that seed, where all four have results) and ``mse-atom`` (the MSE head with ATOM's
    ascent instead of Algorithm S1)."""
    rows: dict[str, dict[int, dict | None]] = {}
    if untrained and "sequences" in untrained and "ious_after" in untrained.get("start", {}):
        start = {
            "ious_after": untrained["start"]["ious_after"],
            "above_75": untrained["start"]["above_75"],
            "sequences": untrained["sequences"],
            "sequence_boxes": untrained["sequence_boxes"],
        }
        rows["start"] = dict.fromkeys(seeds, start)
    top: dict[int, dict | None] = {}
    for seed in seeds:
        group = [by_seed.get(name, {}).get(seed) for name in TOP_GROUP]
        if all(row and _sequence_means(row) for row in group):
            if any(row["sequences"] != group[0]["sequences"] for row in group):
                raise ValueError("the top group's runs were evaluated on different sequences")
            ious = np.mean([row["ious_after"] for row in group], axis=0)
            top[seed] = {
                "ious_after": ious.tolist(),
                "sequences": group[0]["sequences"],
                "sequence_boxes": group[0]["sequence_boxes"],
            }
        else:
            top[seed] = None
    rows["top-4"] = top
    rows["mse-atom"] = {  # the MSE heads with the tracker's own box estimation
        seed: {
            **row["atom"],
            "sequences": row["sequences"],
            "sequence_boxes": row["sequence_boxes"],
        }
        if row and "atom" in row and "sequences" in row
        else None
        for seed, row in by_seed.get("mse", {}).items()
    }
    return rows


def seed_summary(rows: list[dict]) -> dict:
    """One method over its seeds' runs (``rows``, one evaluated result per seed): the mean IoU
    after refinement as a mean over per-sequence means (every sequence weighs the same, whatever
    its number of boxes), its standard deviation over seeds (training variance) and its standard
    error over sequences (of the per-sequence means averaged over seeds); empty when no row has
    per-sequence results."""
    tables = [table for row in rows if (table := _sequence_means(row))]
    failed = sum("failed" in row for row in rows)
    if not tables:
        return {"failed_seeds": failed} if failed else {}
    names = list(tables[0])
    if any(list(table) != names for table in tables):
        raise ValueError("the seeds' runs were evaluated on different sequences")
    values = np.array([[table[name] for name in names] for table in tables])  # (seeds, seqs)
    per_seed, per_sequence = values.mean(axis=1), values.mean(axis=0)
    return {
        "mean": float(per_seed.mean()),
        "std_over_seeds": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else None,
        "se_over_sequences": (
            float(per_sequence.std(ddof=1) / math.sqrt(len(names))) if len(names) > 1 else None
        ),
        "num_seeds": len(per_seed),
        "failed_seeds": failed,
        "per_seed": per_seed.tolist(),
        # shares and ranking of every seed's run (the shares are over all its boxes)
        **{
            name: [row[name] for row in rows if name in row]
            for name in ("above_75", "rank_corr", "step_length")
        },
        "per_sequence": dict(zip(names, per_sequence.tolist())),
    }


def seed_difference(first: dict[int, dict | None], second: dict[int, dict | None]) -> dict:
    """``first - second`` over the seeds both methods have (runs of one seed share their
    initialisation and data order, so they are paired): the mean difference, its standard
    deviation over seeds and its standard error over sequences; empty without common seeds."""
    common = [
        seed
        for seed in first
        if all(row and _sequence_means(row) for row in (first[seed], second.get(seed)))
    ]
    if not common:
        return {}
    a = seed_summary([first[seed] for seed in common])
    b = seed_summary([second[seed] for seed in common])
    per_seed = np.subtract(a["per_seed"], b["per_seed"])
    per_sequence = np.array(
        [a["per_sequence"][n] - b["per_sequence"][n] for n in a["per_sequence"]]
    )
    return {
        "mean": float(per_seed.mean()),
        "std_over_seeds": float(per_seed.std(ddof=1)) if len(common) > 1 else None,
        "se_over_sequences": (
            float(per_sequence.std(ddof=1) / math.sqrt(len(per_sequence)))
            if len(per_sequence) > 1
            else None
        ),
        "num_seeds": len(common),
    }


def _seed_lines(seeds: tuple[int, ...], summaries: dict, differences: dict) -> list[str]:
    """The report's section over seeds and sequences."""
    cell = lambda value: "-" if value is None else f"{value:.4f}"  # noqa: E731
    lines = [
        "",
        f"Over seeds {', '.join(map(str, seeds))} and test sequences: mean IoU after refinement "
        "as a mean over per-sequence means; +- standard deviation over seeds; +- standard error "
        "over sequences (of the per-sequence means averaged over seeds).",
        "",
        "| method | seeds | failed | IoU after | std over seeds | s.e. over sequences | per seed "
        "| > 0.75 | rank_corr | steps |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    mean = lambda values: f"{np.mean(values):.3f}" if values else "-"  # noqa: E731
    for name, summary in summaries.items():
        if "mean" in summary:
            per_seed = ", ".join(f"{v:.3f}" for v in summary["per_seed"])
            steps = ", ".join(f"{v:g}" for v in summary.get("step_length", [])) or "-"
            lines.append(
                f"| {name} | {summary['num_seeds']} | {summary['failed_seeds']} | "
                f"{summary['mean']:.4f} | {cell(summary['std_over_seeds'])} | "
                f"{cell(summary['se_over_sequences'])} | {per_seed} | "
                f"{mean(summary.get('above_75'))} | {mean(summary.get('rank_corr'))} | {steps} |"
            )
        elif summary:
            lines.append(f"| {name} | 0 | {summary['failed_seeds']} | - | - | - | - | - | - | - |")
    lines += ["", "| difference | seeds | mean | std over seeds | s.e. over sequences |",
              "|---|---|---|---|---|"]  # fmt: skip
    for pair, diff in differences.items():
        if diff:
            lines.append(
                f"| {pair} | {diff['num_seeds']} | {diff['mean']:+.4f} | "
                f"{cell(diff['std_over_seeds'])} | {cell(diff['se_over_sequences'])} |"
            )
    return lines


def m_curve(rows: dict) -> dict[str, dict[int, tuple[float, float] | str]]:
    """Per loss of :data:`CURVE_LOSSES`: M -> (mean IoU after refinement, its standard error over
    the boxes), or ``"failed"``."""
    curve: dict[str, dict[int, tuple[float, float] | str]] = {}
    for loss in CURVE_LOSSES:
        curve[loss] = {}
        for samples in CURVE_SAMPLES:
            row = rows.get(curve_run(loss, samples))
            if row is None:
                continue
            if "failed" in row:
                curve[loss][samples] = "failed"
                continue
            ious = np.asarray(row["ious_after"])
            curve[loss][samples] = (
                float(ious.mean()),
                float(ious.std(ddof=1) / np.sqrt(len(ious))),
            )
    return curve


def _curve_ranking(rows: dict) -> dict[str, list[tuple[int, float]]]:
    """Per loss of :data:`CURVE_LOSSES`: (M, validation rank correlation) of its finished runs."""
    ranking = {}
    for loss in CURVE_LOSSES:
        runs = ((m, rows.get(curve_run(loss, m), {})) for m in CURVE_SAMPLES)
        ranking[loss] = [(m, row["rank_corr"]) for m, row in runs if "rank_corr" in row]
    return ranking


def plot_m_curve(curve: dict, ranking: dict, path: Path) -> None:
    """Figure 3's layout, one line per loss against M (log scale): mean IoU after refinement
    (with its standard error) and the validation rank correlation of proposals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    for loss, points in curve.items():
        done = sorted((m, v) for m, v in points.items() if not isinstance(v, str))
        if done:
            left.errorbar(
                [m for m, _ in done],
                [v[0] for _, v in done],
                [v[1] for _, v in done],
                marker="o",
                capsize=3,
                label=loss.upper(),
            )
        for m in (m for m, v in points.items() if v == "failed"):
            left.axvline(m, color="grey", linestyle=":", linewidth=1)
        if ranking.get(loss):
            right.plot(*zip(*ranking[loss]), marker="o", label=loss.upper())
    left.set_ylabel("mean IoU after refinement (test)")
    right.set_ylabel("rank correlation of proposals (val)")
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_xticks(CURVE_SAMPLES, [str(m) for m in CURVE_SAMPLES])
        axis.set_xlabel("M (samples per training example)")
        if axis.get_legend_handles_labels()[0]:
            axis.legend()
    figure.suptitle("Box head trained with NCE+ / KLD-IS against the number of samples M")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
