"""Success and precision plots: a few curves keep the plot's whole width, the legend inside it
in the corner the curves leave empty; many curves put it beside the plot."""

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
