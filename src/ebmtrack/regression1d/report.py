"""Tables and figures of the 1-D study from the finished runs' records."""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from .data import DATASETS, sample_dataset, true_density
from .kl import evaluation_grid, model_log_density_grid
from .methods import FIGURE2_METHODS, METHODS, PAPER_TABLE1
from .model import Regression1dEnergy
from .study import RunKey

BEST_OF = 5
TABLE_COLUMNS = (
    "method", "kl_1", "kl_2", "kl_mean", "s_per_epoch", "runs_1", "runs_2",
    "kl_all_1", "kl_all_2", "paper_kl", "paper_s_per_epoch",
)  # fmt: skip
IMAGE_GRID = 400  # density images: cheaper than the 2048 evaluation grid, same look


def best_mean(values: list[float], best_of: int = BEST_OF) -> float:
    """Mean of the ``best_of`` smallest values (all of them when fewer); NaN when empty."""
    if not values:
        return math.nan
    return float(np.mean(sorted(values)[:best_of]))


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def summarize(results: list[dict], num_samples: int, epochs: int) -> list[dict]:
    """One row per method (Table 1 order) from the runs with this ``num_samples`` and ``epochs``.

    ``kl_d`` is the mean of the best 5 runs on data set ``d``, ``kl_all_d`` the mean of all,
    ``kl_mean`` the average over the data sets present, ``s_per_epoch`` the mean over all runs.
    """
    kls: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    seconds: dict[str, list[float]] = defaultdict(list)
    for r in results:
        if r["num_samples"] == num_samples and r["epochs"] == epochs:
            kls[r["method"]][r["dataset"]].append(r["kl"])
            seconds[r["method"]].append(r["seconds_per_epoch"])
    rows = []
    for method in METHODS:
        if method not in kls:
            continue
        row = {"method": method}
        for d in DATASETS:
            row[f"kl_{d}"] = best_mean(kls[method][d])
            row[f"kl_all_{d}"] = _mean(kls[method][d])
            row[f"runs_{d}"] = len(kls[method][d])
        present = [row[f"kl_{d}"] for d in DATASETS if row[f"runs_{d}"]]
        row["kl_mean"] = _mean(present)
        row["s_per_epoch"] = _mean(seconds[method])
        row["paper_kl"], row["paper_s_per_epoch"] = PAPER_TABLE1[method]
        rows.append(row)
    return rows


def _fmt(value) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def write_tables(rows: list[dict], out_dir: Path) -> str:
    """Write ``table.csv`` and ``table.md``; return the markdown."""
    out_dir = Path(out_dir)
    with open(out_dir / "table.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=TABLE_COLUMNS)
        writer.writeheader()
        writer.writerows({k: _fmt(row[k]) for k in TABLE_COLUMNS} for row in rows)
    header = (
        "| method | D_KL set 1 | D_KL set 2 | D_KL mean | s/epoch | runs (1/2) | mean of all "
        "runs (1/2) | paper D_KL | paper s/epoch |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['method']} | {_fmt(r['kl_1'])} | {_fmt(r['kl_2'])} | **{_fmt(r['kl_mean'])}** | "
        f"{_fmt(r['s_per_epoch'])} | {r['runs_1']}/{r['runs_2']} | {_fmt(r['kl_all_1'])}/"
        f"{_fmt(r['kl_all_2'])} | {r['paper_kl']:.3f} | {r['paper_s_per_epoch']:.2f} |"
        for r in rows
    ]
    markdown = header + "\n".join(lines) + "\n"
    (out_dir / "table.md").write_text(markdown)
    return markdown


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_figure2(results: list[dict], epochs: int, path: Path) -> bool:
    """D_KL (best-5 mean, averaged over data sets) against M for ML-IS, KLD-IS, NCE, NCE+.

    Returns False (and writes nothing) when fewer than two values of M are available.
    """
    curves: dict[str, dict[int, list[float]]] = defaultdict(dict)
    grouped: dict[tuple, list[float]] = defaultdict(list)
    for r in results:
        if r["method"] in FIGURE2_METHODS and r["epochs"] == epochs:
            grouped[(r["method"], r["num_samples"], r["dataset"])].append(r["kl"])
    for (method, m, _), values in grouped.items():
        curves[method].setdefault(m, []).append(best_mean(values))
    if max((len(c) for c in curves.values()), default=0) < 2:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for method in FIGURE2_METHODS:
        if method in curves:
            ms = sorted(curves[method])
            ax.plot(ms, [np.mean(curves[method][m]) for m in ms], marker="o", label=method.upper())
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("number of samples M")
    ax.set_ylabel("D_KL (mean of best <=5 runs, both sets)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _best_run(results: list[dict], method: str, dataset: int, num_samples: int, epochs: int):
    candidates = [
        r
        for r in results
        if (r["method"], r["dataset"], r["num_samples"], r["epochs"])
        == (method, dataset, num_samples, epochs)
    ]
    return min(candidates, key=lambda r: r["kl"], default=None)


def _load_model(run_dir: Path, record: dict) -> Regression1dEnergy:
    key = RunKey(*(record[k] for k in ("method", "dataset", "num_samples", "epochs", "run")))
    model = Regression1dEnergy()
    model.load_state_dict(load_file(str(run_dir / f"{key.stem}.safetensors")))
    return model.eval()


def plot_densities(
    results: list[dict], run_dir: Path, num_samples: int, epochs: int, out_dir: Path
) -> list[Path]:
    """Per data set, one PNG: the true p(y|x), the training data and, for every method, the
    density of its best run (Figures S1-S6 of the paper). Returns the written paths."""
    plt = _pyplot()
    grid = evaluation_grid(IMAGE_GRID)
    extent = (grid[0], grid[-1], grid[0], grid[-1])
    written = []
    for dataset in sorted({r["dataset"] for r in results}):
        panels = [("true p(y|x)", true_density(dataset, grid[:, None], grid[None, :]))]
        for method in METHODS:
            record = _best_run(results, method, dataset, num_samples, epochs)
            if record is not None:
                f = model_log_density_grid(_load_model(run_dir, record), IMAGE_GRID)
                density = torch.softmax(torch.from_numpy(f), dim=1).numpy()
                # that run's D_KL, not the mean over runs of the tables: say so
                panels.append((f"{method} (best run: D_KL {record['kl']:.3f})", density))
        cols = min(len(panels) + 1, 4)
        rows = math.ceil((len(panels) + 1) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.9 * rows), squeeze=False)
        x, y = sample_dataset(dataset, seed=dataset)
        axes[0, 0].scatter(x, y, s=1, alpha=0.5)
        axes[0, 0].set(title="training data", xlim=extent[:2], ylim=extent[2:])
        for ax, (title, density) in zip(axes.flat[1:], panels):
            # rows are x, columns y: show y upwards; each column normalized for visibility
            column = density / density.max(axis=1, keepdims=True)
            ax.imshow(column.T, origin="lower", extent=extent, aspect="auto", cmap="viridis")
            ax.set_title(title, fontsize=9)
        for ax in axes.flat[len(panels) + 1 :]:
            ax.axis("off")
        fig.suptitle(f"data set {dataset}: p(y|x) (x horizontal, y vertical)")
        fig.tight_layout()
        path = Path(out_dir) / f"densities_d{dataset}.png"
        fig.savefig(path, dpi=72)
        plt.close(fig)
        written.append(path)
    return written


def write_report(results: list[dict], out_dir: Path, num_samples: int, epochs: int) -> str:
    """Tables and figures into ``out_dir``; returns the markdown table."""
    out_dir = Path(out_dir)
    markdown = write_tables(summarize(results, num_samples, epochs), out_dir)
    plot_figure2(results, epochs, out_dir / "figure2_kl_vs_m.png")
    plot_densities(results, out_dir / "runs", num_samples, epochs, out_dir)
    return markdown
