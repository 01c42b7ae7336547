"""Figures of fitted compute-performance curves (matplotlib, no display needed).

Plots take fit results and data points; they never refit. The x axis is logarithmic; points at
C = 0 (where R = R0 exactly) are drawn on the left edge of the axes. PNG, SVG or PDF is chosen by
the file extension.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
from matplotlib.transforms import blended_transform_factory

from scalerl.errors import InputError
from scalerl.escaping import for_mathtext
from scalerl.report.headline import fit_headline

FIGURE_SUFFIXES = (".png", ".svg", ".pdf")
GRID_POINTS = 240
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
CEILING_COLOR = "#d99a1e"  # the ceiling's interval, never the colour of a run's prediction band
COLLAPSE_COLOR = "#c0392b"  # the line where a collapse begins
TARGET_COLOR = "#2f7d32"
HEADLINE_WIDTH = 100  # characters per headline line
HEADLINE_LINES = 3  # lines the figure's height leaves for the headline; each more adds HEADLINE_LINE_INCHES
HEADLINE_FONT_SIZE = 10
HEADLINE_LINE_INCHES = 1.25 * HEADLINE_FONT_SIZE / 72  # one line of the headline: its font's size and spacing
TITLE_WIDTH = 110  # characters per line of an axes title (a comparison's decision sentence)
CEILING_BARS_WIDTH = 0.03  # share of the axes' width right of the plot that A's interval bars take
LEFT_EDGE_GID = "scalerl-left-edge"  # the C = 0 points pinned to the left edge of the axes


@dataclass(frozen=True)
class RunPoints:
    """The data points of one run as a plot shows them, grouped by role.

    `held_out`: later points not used in the fit (drawn hollow, to judge the extrapolation);
    `not_fitted`: points inside the fit window that the fit left out (R0 point, warm-up below
    `--min-x`, points after a collapse). Each is a (compute, reward) pair of arrays or None.
    """

    held_out: tuple | None = None
    not_fitted: tuple | None = None


def check_figure_path(path) -> Path:
    """The output path, if its extension names a supported format; InputError otherwise."""
    path = Path(path)
    if path.suffix.lower() not in FIGURE_SUFFIXES:
        raise InputError(f"cannot write a figure to {path}: the extension must be one of {', '.join(FIGURE_SUFFIXES)}")
    return path


def plot_fit(result, path, **options) -> Path:
    """Write the figure of one fitted run (see `fit_figure` for the options); returns the path."""
    path = check_figure_path(path)
    return save_figure(fit_figure(result, **options), path)


def plot_comparison(results: Mapping, path, **options) -> Path:
    """Write the figure of several fitted runs (see `comparison_figure`); returns the path."""
    path = check_figure_path(path)
    return save_figure(comparison_figure(results, **options), path)


def fit_figure(
    result,
    *,
    held_out=None,
    not_fitted=None,
    target_compute=None,
    level=0.8,
    x_label="compute",
    y_label="reward",
    title=None,
    target_reward=None,
    extend_to=None,
) -> Figure:
    """One fitted run: points, held-out points, fitted curve, band, extrapolation, ceiling A.

    `held_out` / `not_fitted` are (compute, reward) arrays; `target_compute` is the budget (the
    compute the forecast is asked at): drawn as a vertical line, the dashed extrapolation reaches it;
    `target_reward` (a reward to reach) is drawn as a horizontal line; `extend_to` extends the
    extrapolation further (e.g. to where the target is reached). A headline sentence (ceiling, reward
    at the budget, compute to the target) sits above the title.
    """
    figure, axes = _new_axes()
    points = RunPoints(held_out=held_out, not_fitted=not_fitted)
    extrapolate_to = _extrapolation_end([result], [points], target_compute)
    if extend_to is not None and np.isfinite(extend_to):
        extrapolate_to = max(extrapolate_to, float(extend_to))
    draw_run(axes, result, points, color=PALETTE[0], label=None, level=level, extrapolate_to=extrapolate_to)
    if target_reward is not None:
        axes.axhline(
            target_reward, color=TARGET_COLOR, linestyle="-.", linewidth=1.0, label=f"target reward {target_reward:.3g}"
        )
    _finish_axes(axes, x_label, y_label, target_compute)
    axes.set_title(wrapped_title(title) if title else fit_title(result, level), fontsize=9)
    put_headline(figure, fit_headline(result, budget=target_compute, target=target_reward, level=level))
    return figure


def comparison_figure(
    results: Mapping,
    *,
    points: Mapping | None = None,
    target_compute=None,
    level=0.8,
    x_label="compute",
    y_label="reward",
    title=None,
    headline=None,
) -> Figure:
    """Several fitted runs on one figure, one colour each; `points` maps a run name to RunPoints.

    `headline` (e.g. the comparison's verdict) is written above the title; without it each run's
    ceiling phrase is (headline.fit_headline).
    """
    if not results:
        raise InputError("nothing to plot: no fitted runs")
    points = points or {}
    figure, axes = _new_axes()
    run_points = [points.get(name, RunPoints()) for name in results]
    extrapolate_to = _extrapolation_end(list(results.values()), run_points, target_compute)
    for index, (name, result) in enumerate(results.items()):
        color = PALETTE[index % len(PALETTE)]
        label = f"{for_mathtext(name)}: A={result.a:.3f}, B={result.b:.2f}, C_mid={result.c_mid:.3g}"
        draw_run(
            axes,
            result,
            run_points[index],
            color=color,
            label=label,
            level=level,
            extrapolate_to=extrapolate_to,
            ceiling_label=f"ceiling A {level:.0%} interval (bars right of the plot)" if index == 0 else None,
            bar_slot=(index, len(results)),
        )
    _finish_axes(axes, x_label, y_label, target_compute)
    axes.set_title(wrapped_title(title) if title else f"{len(results)} runs, {level:.0%} bands", fontsize=9)
    if headline is None:
        headline = "\n".join(
            f"{name}: {fit_headline(result, budget=target_compute, level=level)}" for name, result in results.items()
        )
    put_headline(figure, headline)
    return figure


def wrapped_title(text: str, width: int = TITLE_WIDTH) -> str:
    """`text` wrapped to `width` characters per line, each line made safe for matplotlib (the
    line breaks kept: escaping the whole text would print them as `\\x0a`)."""
    return "\n".join(for_mathtext(line) for line in textwrap.wrap(" ".join(str(text).split()), width))


def headline_lines(text: str, width: int = HEADLINE_WIDTH) -> list[str]:
    """`text` wrapped to `width` characters per line, every word kept; a line break in `text` starts
    a new line (a comparison's headline: one paragraph per run)."""
    return [line for paragraph in str(text).split("\n") for line in (textwrap.wrap(paragraph, width) or [""])]


def put_headline(figure: Figure, text: str, width: int = HEADLINE_WIDTH) -> None:
    """The headline sentence in bold at the top of the figure, wrapped and never cut (a cut hid the
    forecast's interval at the end of a long verdict); past HEADLINE_LINES lines the figure grows
    by the extra lines' height, so the axes keep their size under the constrained layout."""
    lines = headline_lines(text, width)
    extra = len(lines) - HEADLINE_LINES
    if extra > 0:
        width_inches, height_inches = figure.get_size_inches()
        figure.set_size_inches(width_inches, height_inches + extra * HEADLINE_LINE_INCHES)
    figure.suptitle(
        "\n".join(for_mathtext(line) for line in lines),
        x=0.02,
        ha="left",
        va="top",
        fontsize=HEADLINE_FONT_SIZE,
        fontweight="bold",
    )


def fit_title(result, level=0.8) -> str:
    """`A = 0.610 [0.600, 0.620]  B = 1.92  C_mid = 2.54e+03  (80% intervals)`."""
    a_lo, a_hi = result.conf_int(level)["A"]
    identified = f"  ({result.verdict.kind.replace('_', ' ')})"
    return (
        f"A = {result.a:.3f} [{a_lo:.3f}, {a_hi:.3f}]   B = {result.b:.2f}   C_mid = {result.c_mid:.3g}"
        f"   R0 = {result.r0:.3f}{identified}"
    )


def draw_run(
    axes, result, points: RunPoints, *, color, label, level, extrapolate_to, ceiling_label=None, bar_slot=(0, 1)
) -> None:
    """Draw one run on `axes`: fitted curve (dashed beyond the fitted points either side), band,
    ceiling, points.

    The prediction band is shaded in the run's colour; the ceiling's interval is set apart from it,
    as a bar just right of the plot, so it never covers a band: in its own colour (CEILING_COLOR) on a
    single-run figure, in the run's colour on a figure of several runs (`label` given), where
    `bar_slot` = (i, n) puts the i-th of n bars side by side. The point forecast is a posterior
    median, never above A. A collapse is marked by a vertical line where it begins.
    """
    fitted_max = float(np.max(result.compute))
    grid = compute_grid(_positive_min(result, points), max(extrapolate_to, fitted_max))
    band_lo, band_hi = result.interval(grid, level)
    axes.fill_between(
        grid,
        band_lo,
        band_hi,
        color=color,
        alpha=0.15,
        linewidth=0,
        label=None if label else f"{level:.0%} prediction band",
    )
    fitted_min = float(np.min(result.compute))
    inside = (grid >= fitted_min) & (grid <= fitted_max)
    axes.plot(grid[inside], result.predict(grid[inside]), color=color, linewidth=1.8, label=label or "fitted sigmoid")
    before = grid <= fitted_min  # back to an earlier point the fit left out (R0, warm-up): no data pins it
    if before.sum() > 1:
        axes.plot(grid[before], result.predict(grid[before]), color=color, linewidth=1.2, linestyle="--")
    beyond = grid >= fitted_max
    if beyond.sum() > 1:
        axes.plot(
            grid[beyond],
            result.predict(grid[beyond]),
            color=color,
            linewidth=1.8,
            linestyle="--",
            label=None if label else "extrapolation",
        )
    a_lo, a_hi = result.conf_int(level)["A"]
    if label:  # several runs: the run's colour, one bar each beside the plot
        axes.axhline(result.a, color=color, linestyle=":", linewidth=1.0)
        slot, slots = bar_slot
        width = CEILING_BARS_WIDTH / slots
        _ceiling_bar(axes, (a_lo, a_hi), fitted_max, 1.005 + slot * width, 0.8 * width, color, 0.7, ceiling_label)
    else:
        identified = "" if result.ceiling_identified else f", {result.verdict.kind.replace('_', ' ')}"
        axes.axhline(
            result.a, color=CEILING_COLOR, linestyle=":", linewidth=1.2, label=f"ceiling A = {result.a:.3f}{identified}"
        )
        label_text = f"ceiling A {level:.0%} interval [{a_lo:.3f}, {a_hi:.3f}]"
        _ceiling_bar(axes, (a_lo, a_hi), fitted_max, 1.005, 0.02, CEILING_COLOR, 0.6, label_text)
    collapse = getattr(result, "collapse_compute", None)
    if collapse is not None:
        axes.axvline(
            collapse,
            color=COLLAPSE_COLOR,
            linestyle="-",
            linewidth=1.0,
            label=None if label else f"collapse at {collapse:.3g} (not fitted after it)",
        )
    _scatter(axes, result.compute, result.reward, color=color, filled=True, label=None if label else "fitted points")
    if points.held_out is not None and len(points.held_out[0]):
        _scatter(axes, *points.held_out, color=color, filled=False, label=None if label else "held-out points")
    if points.not_fitted is not None and len(points.not_fitted[0]):
        _scatter(
            axes,
            *points.not_fitted,
            color=color if label else "0.45",
            filled=None,
            label=None if label else "not fitted (R0, warm-up, after collapse)",
        )


def _ceiling_bar(axes, interval, fitted_max, x, width, color, alpha, label) -> None:
    """A's interval as a bar right of the plot (x, width in axes coordinates, x >= 1), so it never
    covers a forecast band; the y range widens to hold it."""
    a_lo, a_hi = interval
    axes.add_patch(
        Rectangle(
            (x, a_lo),
            width,
            a_hi - a_lo,
            transform=_right_margin(axes),
            color=color,
            alpha=alpha,
            linewidth=0,
            clip_on=False,
            label=label,
        )
    )
    axes.update_datalim([[fitted_max, a_lo], [fitted_max, a_hi]], updatex=False)


def _right_margin(axes):
    """x in axes coordinates (1 is the right edge), y in data: where A's interval bar stands."""
    return blended_transform_factory(axes.transAxes, axes.transData)


def compute_grid(lowest_compute: float, highest_compute: float) -> np.ndarray:
    """Log-spaced compute values spanning the data and the extrapolation."""
    return np.geomspace(lowest_compute, highest_compute, GRID_POINTS)


def _positive_min(result, points: RunPoints) -> float:
    values = [np.asarray(result.compute, dtype=float)]
    values += [np.asarray(pair[0], dtype=float) for pair in (points.held_out, points.not_fitted) if pair is not None]
    positive = np.concatenate(values)
    positive = positive[positive > 0]
    return float(positive.min())


def _extrapolation_end(results, run_points, target_compute) -> float:
    """The largest compute to draw: the data, the held-out points, and the budget."""
    ends = [float(np.max(result.compute)) for result in results]
    ends += [float(np.max(p.held_out[0])) for p in run_points if p.held_out is not None and len(p.held_out[0])]
    if target_compute is not None:
        if not np.isfinite(target_compute) or target_compute <= 0:
            raise InputError(f"budget (compute) must be a positive number, got {target_compute}")
        ends.append(float(target_compute))
    return max(ends)


def _scatter(axes, compute, reward, *, color, filled, label) -> None:
    """Points with C > 0 on the log axis; points at C = 0 pinned to the left edge of the axes."""
    compute = np.asarray(compute, dtype=float)
    reward = np.asarray(reward, dtype=float)
    if filled is None:
        style = {"marker": "x", "color": color}
    elif filled:
        style = {"marker": "o", "color": color, "edgecolors": "white", "linewidths": 0.5}
    else:
        style = {"marker": "o", "facecolors": "none", "edgecolors": color}
    positive = compute > 0
    if np.any(positive):
        axes.scatter(compute[positive], reward[positive], s=28, zorder=3, label=label, **style)
    if np.any(~positive):
        left_edge = blended_transform_factory(axes.transAxes, axes.transData)
        axes.scatter(
            np.zeros(int((~positive).sum())),
            reward[~positive],
            s=28,
            zorder=3,
            clip_on=False,
            transform=left_edge,
            label=None if np.any(positive) else label,
            **style,
        )
        axes.collections[-1].set_gid(LEFT_EDGE_GID)  # placed in _place_left_edge_points


def _place_left_edge_points(axes) -> None:
    """Fit the y range to the C = 0 points drawn on the left edge (outside autoscaling).

    The range widens to hold such a point when it lies within one span of the rest of the figure;
    one further away (a pre-training evaluation far below a run that rose before its first logged
    evaluation) is pinned to the nearer edge and its value written beside it, so that it does not
    squeeze the curves into a sliver of the plot.
    """
    collections = [c for c in axes.collections if c.get_gid() == LEFT_EDGE_GID]
    if not collections:
        return
    axes.autoscale_view()
    low, high = axes.get_ylim()
    span = high - low
    values = np.concatenate([c.get_offsets()[:, 1] for c in collections])
    near = values[(values >= low - span) & (values <= high + span)]
    if near.size:
        pad = 0.05 * (max(high, near.max()) - min(low, near.min()))
        low, high = min(low, near.min() - pad), max(high, near.max() + pad)
    axes.set_ylim(low, high)
    far = []
    for collection in collections:
        offsets = np.array(collection.get_offsets(), dtype=float)
        below, above = offsets[:, 1] < low, offsets[:, 1] > high
        far += offsets[below | above, 1].tolist()
        offsets[below, 1] = low + 0.015 * (high - low)
        offsets[above, 1] = high - 0.015 * (high - low)
        collection.set_offsets(offsets)
    if far:
        axes.text(
            0.012,
            0.035,
            f"reward at C = 0 beyond the axis (drawn at its edge): {', '.join(f'{v:.3g}' for v in sorted(set(far)))}",
            transform=axes.transAxes,
            fontsize=7,
            color="0.35",
        )


def _new_axes():
    """A figure whose constrained layout fits the headline, the title and the legend below the axes."""
    figure = Figure(figsize=(7.5, 5.4), dpi=110, layout="constrained")
    # The layout does not see A's interval bar beside the axes' right edge: leave it 3 % of the width.
    figure.get_layout_engine().set(rect=(0.0, 0.0, 0.97, 1.0))
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def _finish_axes(axes, x_label, y_label, target_compute) -> None:
    axes.set_xscale("log")
    _place_left_edge_points(axes)
    low, high = axes.get_xlim()
    if np.log10(high / low) < 3.0:  # few decades: label 1, 2, 5 x 10^k so the axis stays readable
        axes.xaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.xaxis.set_minor_formatter(NullFormatter())
    if target_compute is not None:
        axes.axvline(target_compute, color="0.3", linestyle="-.", linewidth=0.9, label=f"budget {target_compute:.3g}")
    axes.set_xlabel(f"{for_mathtext(x_label)} (log scale; C = 0 points on the left edge)")
    axes.set_ylabel(for_mathtext(y_label))
    axes.grid(True, which="major", alpha=0.3)
    # Below the axes, so that the plot keeps the figure's width whatever the labels' length.
    entries = len(axes.get_legend_handles_labels()[1])
    axes.legend(
        fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2 if entries > 3 else 1, frameon=False
    )


def save_figure(figure: Figure, path: Path) -> Path:
    """Write the figure in the format of the extension; InputError if the file cannot be written."""
    try:
        figure.savefig(path, format=path.suffix.lower().lstrip("."), bbox_inches="tight")
    except OSError as error:
        raise InputError(f"cannot write figure {path}: {error.strerror or error}") from None
    return path
