"""The live forecast's figure, redrawn at every evaluation by the trainer, the async driver and the TRL callback."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from scalerl.forecast.live import LiveForecast
from scalerl.report.plotting import fit_figure


def write_live_plot(
    forecast: LiveForecast,
    compute: Sequence[float],
    reward: Sequence[float],
    path: str | Path,
    *,
    level: float = 0.8,
    x_label: str = "flops",
    y_label: str = "val_pass_rate",
) -> Path:
    """Draw the live fit (points, curve, band, extrapolation to the budget) to a PNG, atomically:
    written to a temporary file in the same directory, then renamed over `path`.

    Fixed margins instead of matplotlib's tight bounding box, which draws the figure twice: the
    plot is redrawn at every evaluation, so it should cost one render (about 0.1 s)."""
    path = Path(path)
    compute = np.asarray(compute, dtype=float)
    reward = np.asarray(reward, dtype=float)
    unused = ~np.isin(compute, forecast.fit.compute)
    target = forecast.budget if math.isfinite(forecast.budget) and forecast.budget > compute.max() else None
    title = f"live forecast, {compute.size} evaluations: {forecast.short_text()}, B = {forecast.fit.b:.2f}"
    figure = fit_figure(
        forecast.fit,
        not_fitted=(compute[unused], reward[unused]),
        target_compute=target,
        level=level,
        x_label=x_label,
        y_label=y_label,
        title=title,
    )
    temp_path = path.with_name(f".{path.name}.tmp")
    figure.savefig(temp_path, format="png")
    os.replace(temp_path, path)
    return path


def forecast_history_figure(history: dict[str, np.ndarray], *, final_a: float | None = None):
    """How the live forecast of A moved during the run: A with its interval against compute,
    filled markers where the ceiling was identified; `final_a` (the fit on the whole run) dashed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.5, 3.2), dpi=110)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.fill_between(
        history["flops"],
        history["A_low"],
        history["A_high"],
        color="#1f77b4",
        alpha=0.18,
        linewidth=0,
        label="80% interval of A",
    )
    axes.plot(history["flops"], history["A"], color="#1f77b4", linewidth=1.2)
    identified = history["identified"]
    axes.scatter(
        history["flops"][identified],
        history["A"][identified],
        color="#1f77b4",
        s=18,
        zorder=3,
        label="A (ceiling identified)",
    )
    axes.scatter(
        history["flops"][~identified],
        history["A"][~identified],
        facecolors="none",
        edgecolors="#1f77b4",
        s=18,
        zorder=3,
        label="A (not identified yet)",
    )
    if final_a is not None:
        axes.axhline(final_a, color="0.3", linestyle="--", linewidth=0.9, label=f"A on the whole run = {final_a:.3f}")
    axes.set_xscale("log")
    axes.set_xlabel("flops at the forecast (log scale)")
    axes.set_ylabel("forecast A")
    axes.set_title("live forecast of the ceiling during the run", fontsize=10)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, loc="best")
    return figure
