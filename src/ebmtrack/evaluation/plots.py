"""Success and precision plots in the style of the OTB / ATOM papers, as PNG files.

Figures are built with ``matplotlib.figure.Figure`` on an Agg canvas (no pyplot, no display):
they are drawn the same with or without a screen, and no global backend is touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ebmtrack.evaluation import metrics as M

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_STYLES = ("-", "--", "-.", ":")
LEGEND_INSIDE_UP_TO = 8
"""Curves whose legend goes inside the plot, in the corner the curves leave empty; with more it
goes beside the plot."""


def curve_figure(
    curves: dict[str, np.ndarray],
    thresholds: np.ndarray,
    scores: dict[str, float],
    xlabel: str,
    title: str,
    corner: str,
) -> Figure:
    """The figure of ``curves`` over ``thresholds``, each labelled with its score in %; the
    legend inside the plot at ``corner`` (up to :data:`LEGEND_INSIDE_UP_TO` curves), so that a
    few curves keep the plot's whole width."""
    # Imported here, where a plot is drawn (matplotlib takes about half a second to import).
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 4.0), dpi=110)
    FigureCanvasAgg(fig)  # the figure's canvas: Agg, whatever backend the process has
    ax = fig.subplots()
    for i, name in enumerate(sorted(curves, key=lambda n: -scores[n])):
        ax.plot(
            thresholds,
            curves[name],
            _STYLES[(i // 10) % len(_STYLES)],
            linewidth=1.6,
            label=f"{name} [{100 * scores[name]:.1f}]",
        )
    ax.set(xlabel=xlabel, ylabel="fraction of frames", title=title)
    ax.set_xlim(thresholds[0], thresholds[-1])
    ax.set_ylim(0, 1)
    ax.grid(True, alpha=0.4)
    if len(curves) <= LEGEND_INSIDE_UP_TO:
        ax.legend(loc=corner, fontsize=8, framealpha=0.9)
    else:
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.tight_layout()
    return fig


def _plot(
    curves: dict[str, np.ndarray],
    thresholds: np.ndarray,
    scores: dict[str, float],
    path: Path,
    xlabel: str,
    title: str,
    corner: str,
) -> Path:
    fig = curve_figure(curves, thresholds, scores, xlabel, title, corner)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    return path


def plot_success(curves: dict[str, np.ndarray], path: str | Path, title: str = "") -> Path:
    """Success plot: fraction of frames with IoU > threshold; the legend gives each AUC in %."""
    scores = {n: M.area_under_curve(c) for n, c in curves.items()}
    return _plot(
        curves,
        M.SUCCESS_THRESHOLDS,
        scores,
        Path(path),
        "overlap threshold",
        f"Success plot {title}".strip(),
        "lower left",  # success curves fall from 1: that corner is empty
    )


def plot_precision(curves: dict[str, np.ndarray], path: str | Path, title: str = "") -> Path:
    """Precision plot: fraction of frames with centre error <= threshold (px); the legend gives
    the precision at 20 px in %."""
    scores = {
        n: M.curve_at(c, M.PRECISION_THRESHOLDS, M.PRECISION_AT_PX) for n, c in curves.items()
    }
    return _plot(
        curves,
        M.PRECISION_THRESHOLDS,
        scores,
        Path(path),
        "location error threshold (px)",
        f"Precision plot {title}".strip(),
        "lower right",  # precision curves rise from 0
    )
