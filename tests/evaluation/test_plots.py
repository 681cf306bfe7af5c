"""Success and precision plots: a few curves keep the plot's whole width, the legend inside it
in the corner the curves leave empty; many curves put it beside the plot."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ebmtrack.evaluation import metrics as M
from ebmtrack.evaluation.plots import curve_figure, plot_success


def _inside(fig) -> bool:
    fig.canvas.draw()
    ax = fig.axes[0]
    legend, box = ax.get_legend().get_window_extent(), ax.get_window_extent()
    across = box.x0 <= legend.x0 and legend.x1 <= box.x1
    return across and box.y0 <= legend.y0 and legend.y1 <= box.y1


@pytest.mark.parametrize("count, inside", [(1, True), (8, True), (12, False)])
def test_the_legend_goes_inside_for_a_few_curves(count, inside):
    thresholds = M.SUCCESS_THRESHOLDS
    curves = {f"t{i}": np.clip(1 - thresholds * (1 + i / 10), 0, 1) for i in range(count)}
    scores = {name: float(curve.mean()) for name, curve in curves.items()}
    fig = curve_figure(curves, thresholds, scores, "overlap threshold", "x", "lower left")
    assert _inside(fig) == inside
    if inside:  # the axes keep most of the figure's width
        assert fig.axes[0].get_position().width > 0.75


def test_the_demo_plot_is_written(tmp_path):
    curve = np.clip(1 - M.SUCCESS_THRESHOLDS, 0, 1)
    assert plot_success({"atom": curve}, tmp_path / "s.png").stat().st_size > 0


def test_plots_are_drawn_on_agg_whatever_the_backend(tmp_path):
    # Headless: a process whose backend needs a display (MPLBACKEND=TkAgg, no DISPLAY) still
    # writes the plot, on the figure's own Agg canvas.
    code = (
        "import sys, numpy as np\n"
        "from ebmtrack.evaluation.plots import curve_figure, plot_success\n"
        "curves, scores = {'a': np.ones(3)}, {'a': 1.0}\n"
        "fig = curve_figure(curves, np.arange(3.0), scores, 'x', 't', 'lower left')\n"
        "print(type(fig.canvas).__name__)\n"
        "plot_success({'a': np.linspace(1, 0, 21)}, sys.argv[1])\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["MPLBACKEND"] = "TkAgg"
    path = tmp_path / "success.png"
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "FigureCanvasAgg"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_default_install_draws_the_plots():
    # A first look at a tracker is its success plot: matplotlib is a dependency of the default
    # install, not of [train].
    tomllib = pytest.importorskip("tomllib")
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    project = tomllib.loads(pyproject.read_text())["project"]
    names = [d.split(">")[0].split("=")[0].strip() for d in project["dependencies"]]
    assert "matplotlib" in names
    assert not [d for d in project["optional-dependencies"]["train"] if "matplotlib" in d]
