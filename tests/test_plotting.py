"""Plots draw the given result (never refit): curve values, extrapolation, ceiling, C = 0 points, files."""

from dataclasses import dataclass, field

import numpy as np
import pytest
from matplotlib.patches import Rectangle

from scalerl.errors import InputError
from scalerl.forecast.curves import sigmoid_compute_for_reward, sigmoid_compute_near_ceiling, sigmoid_reward
from scalerl.forecast.result import ComputeNearCeiling, ComputeToTarget
from scalerl.forecast.verdict import Verdict
from scalerl.report.plotting import (
    RunPoints,
    comparison_figure,
    fit_figure,
    fit_title,
    plot_comparison,
    plot_fit,
)


@dataclass(frozen=True)
class StubResult:
    """Just the fields and methods a plot reads; the numbers are fixed, so nothing can be refitted."""

    a: float = 0.61
    b: float = 1.92
    c_mid: float = 2542.0
    r0: float = 0.1
    ceiling_identified: bool = True
    compute: np.ndarray = field(default_factory=lambda: np.array([500.0, 1000.0, 2000.0, 4000.0]))
    reward: np.ndarray = field(default_factory=lambda: np.array([0.15, 0.2, 0.3, 0.45]))
    band_half_width: float = 0.02
    collapse_compute: float | None = None

    @property
    def verdict(self):
        if self.ceiling_identified:
            return Verdict("plateaued", f"plateaued: ceiling A {self.a:.3g} [0.6, 0.63], known to +-0.02")
        return Verdict("still_rising", "still rising: run ~6.5x longer (3x-12x) to read A to +-0.02")

    def predict(self, compute):
        return sigmoid_reward(compute, self.a, self.b, self.c_mid, self.r0)

    def interval(self, compute, level=0.8):
        centre = self.predict(compute)
        return centre - self.band_half_width, centre + self.band_half_width

    def conf_int(self, level=0.8):
        return {"A": (self.a - 0.01, self.a + 0.02), "B": (1.8, 2.0), "C_mid": (2400.0, 2700.0)}

    def compute_to_reach(self, target, level=0.8):
        value = float(sigmoid_compute_for_reward(target, self.a, self.b, self.c_mid, self.r0))
        return ComputeToTarget(target, value, value, value, True, level)

    def compute_near_ceiling(self, within=0.02, level=0.8):
        value = float(sigmoid_compute_near_ceiling(within, self.a, self.b, self.c_mid, self.r0))
        return ComputeNearCeiling(within, value, value, value, float(self.compute.max()), level)


def line_by_label(axes, prefix):
    matches = [line for line in axes.get_lines() if line.get_label().startswith(prefix)]
    assert len(matches) == 1, [line.get_label() for line in axes.get_lines()]
    return matches[0]


def test_fit_figure_draws_the_given_curve_and_dashes_the_extrapolation():
    result = StubResult()
    figure = fit_figure(result, held_out=(np.array([8000.0, 16000.0]), np.array([0.55, 0.6])), target_compute=40000.0)
    axes = figure.axes[0]
    assert axes.get_xscale() == "log"
    fitted = line_by_label(axes, "fitted sigmoid")
    x_fitted, y_fitted = fitted.get_data()
    np.testing.assert_allclose(y_fitted, sigmoid_reward(x_fitted, 0.61, 1.92, 2542.0, 0.1))
    assert x_fitted.min() == pytest.approx(500.0) and x_fitted.max() <= 4000.0
    assert fitted.get_linestyle() == "-"
    extrapolated = line_by_label(axes, "extrapolation")
    x_extra, y_extra = extrapolated.get_data()
    assert extrapolated.get_linestyle() == "--"
    assert x_extra.min() >= 4000.0 and x_extra.max() == pytest.approx(40000.0)
    np.testing.assert_allclose(y_extra, sigmoid_reward(x_extra, 0.61, 1.92, 2542.0, 0.1))
    ceiling = line_by_label(axes, "ceiling A = 0.610")
    assert set(ceiling.get_ydata()) == {0.61}
    budget = line_by_label(axes, "budget")
    assert set(budget.get_xdata()) == {40000.0}
    assert "A = 0.610" in axes.get_title() and "B = 1.92" in axes.get_title() and "C_mid = 2.54e+03" in axes.get_title()


def test_held_out_points_are_drawn_hollow_and_zero_compute_on_the_left_edge():
    result = StubResult()
    figure = fit_figure(
        result,
        held_out=(np.array([8000.0]), np.array([0.55])),
        not_fitted=(np.array([0.0]), np.array([0.1])),
    )
    axes = figure.axes[0]
    by_label = {collection.get_label(): collection for collection in axes.collections}
    held_out = by_label["held-out points"]
    np.testing.assert_allclose(held_out.get_offsets(), [[8000.0, 0.55]])
    assert held_out.get_facecolors().size == 0 or held_out.get_facecolors()[0][3] == 0  # hollow
    zero_point = by_label["not fitted (R0, warm-up, after collapse)"]
    np.testing.assert_allclose(zero_point.get_offsets(), [[0.0, 0.1]])  # x in axes coordinates: left edge
    assert zero_point.get_transform().contains_branch(axes.transData) is False
    assert axes.get_ylim()[0] <= 0.1  # the y range was widened to show it


def test_a_zero_compute_point_far_below_the_run_is_pinned_to_the_edge_not_squeezing_the_curve():
    """A run that rose from 0.1 to about 0.86 before its first logged evaluation and then crept up by
    0.05: the y range is that of the run (its points, band and ceiling), the R0 point sits at the
    bottom edge and its value is written on the axes."""
    result = StubResult(
        a=0.9,
        b=0.8,
        c_mid=100.0,
        compute=np.array([1000.0, 2000.0, 4000.0, 8000.0]),
        reward=np.array([0.85, 0.87, 0.88, 0.89]),
    )
    figure = fit_figure(result, not_fitted=(np.array([0.0]), np.array([0.1])))
    axes = figure.axes[0]
    low, high = axes.get_ylim()
    assert 0.7 < low < 0.85 and high > 0.9
    zero_point = next(c for c in axes.collections if c.get_label() == "not fitted (R0, warm-up, after collapse)")
    assert zero_point.get_offsets()[0][1] == pytest.approx(low + 0.015 * (high - low))
    assert any("beyond the axis" in text.get_text() and "0.1" in text.get_text() for text in axes.texts)


def test_title_names_the_verdict():
    assert "(still rising)" in fit_title(StubResult(ceiling_identified=False))
    assert "(plateaued)" in fit_title(StubResult())


def test_comparison_figure_one_curve_per_run_in_distinct_colours():
    results = {"ScaleRL": StubResult(), "baseline": StubResult(a=0.5, b=1.5, c_mid=3000.0)}
    figure = comparison_figure(results, points={"baseline": RunPoints(held_out=(np.array([9000.0]), np.array([0.49])))})
    axes = figure.axes[0]
    first = line_by_label(axes, "ScaleRL: A=0.610")
    second = line_by_label(axes, "baseline: A=0.500")
    assert first.get_color() != second.get_color()
    x_values, y_values = second.get_data()
    np.testing.assert_allclose(y_values, sigmoid_reward(x_values, 0.5, 1.5, 3000.0, 0.1))
    with pytest.raises(InputError, match="no fitted runs"):
        comparison_figure({})


def test_comparison_ceilings_are_bars_beside_the_plot_never_over_a_band():
    """One bar per run right of the axes (x >= 1 in axes coordinates), side by side, spanning A's
    80 % interval in the run's colour; nothing is drawn across the plot for A but its dotted line."""
    results = {"ScaleRL": StubResult(), "baseline": StubResult(a=0.5, b=1.5, c_mid=3000.0)}
    axes = comparison_figure(results).axes[0]
    bars = [patch for patch in axes.patches if isinstance(patch, Rectangle)]
    assert len(bars) == 2
    assert all(bar.get_x() >= 1.0 for bar in bars) and bars[0].get_x() < bars[1].get_x()
    for bar, result in zip(bars, results.values()):
        lo, hi = result.conf_int(0.8)["A"]
        assert bar.get_y() == pytest.approx(lo) and bar.get_height() == pytest.approx(hi - lo)
    assert not [c for c in axes.collections if c.get_hatch()]  # no hatched span across the plot


def test_a_long_title_is_wrapped_into_lines_and_the_legend_sits_below_the_axes():
    sentence = (
        "ceiling groups: {" + ", ".join(f"run_{i}" for i in range(30)) + "} (A 0.90-0.89); decided by: efficiency"
    )
    figure = comparison_figure({"a": StubResult(), "b": StubResult(a=0.5)}, title=sentence)
    figure.canvas.draw()
    axes = figure.axes[0]
    lines = axes.get_title().split("\n")
    assert len(lines) > 1 and all(len(line) <= 110 for line in lines) and "\\x0a" not in axes.get_title()
    assert " ".join(lines) == sentence
    # The legend is under the plot, so the axes keep (nearly) the figure's width.
    legend_box = axes.get_legend().get_window_extent()
    axes_box = axes.get_window_extent()
    assert legend_box.y1 < axes_box.y0 and axes_box.width > 0.8 * figure.bbox.width


@pytest.mark.parametrize(("suffix", "magic"), [(".png", b"\x89PNG\r\n\x1a\n"), (".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_plot_fit_writes_the_format_of_the_extension(tmp_path, suffix, magic):
    path = plot_fit(StubResult(), tmp_path / f"fit{suffix}")
    data = path.read_bytes()
    assert data.startswith(magic)
    if suffix == ".svg":
        assert b"<svg" in data


def test_bad_extension_and_unwritable_path(tmp_path):
    with pytest.raises(InputError, match="extension must be one of"):
        plot_fit(StubResult(), tmp_path / "fit.jpg")
    assert not (tmp_path / "fit.jpg").exists()
    with pytest.raises(InputError, match="cannot write figure"):
        plot_comparison({"a": StubResult()}, tmp_path / "missing_dir" / "fit.png")


def test_plot_of_a_real_fit(tmp_path):
    from scalerl.forecast.fitting import fit_sigmoid

    compute = np.array([0.0, 250, 500, 1000, 1500, 2000, 3000, 4000, 6000, 8000])
    reward = (
        sigmoid_reward(compute, 0.61, 1.92, 2542.0, 0.1)
        + np.r_[0, 0.004, -0.003, 0.002, -0.004, 0.003, 0, -0.002, 0.003, -0.001]
    )
    result = fit_sigmoid(compute, reward, n_draws=40)
    path = plot_fit(result, tmp_path / "real.svg", not_fitted=(compute[:1], reward[:1]), target_compute=20000.0)
    assert b"<svg" in path.read_bytes()


def test_ceiling_interval_has_its_own_colour_and_legend_entry_apart_from_the_band():
    figure = fit_figure(StubResult(), target_compute=40000.0, target_reward=0.5)
    axes = figure.axes[0]
    patches = {artist.get_label(): artist for artist in axes.patches + axes.collections}
    band = patches["80% prediction band"]
    ceiling = patches["ceiling A 80% interval [0.600, 0.630]"]
    assert tuple(np.round(ceiling.get_facecolor()[:3], 3)) != tuple(np.round(band.get_facecolor()[0][:3], 3))
    # the interval is a bar right of the plot (x in axes units beyond 1), never over the band
    assert ceiling.get_x() > 1.0 and (ceiling.get_y(), ceiling.get_y() + ceiling.get_height()) == pytest.approx(
        (0.60, 0.63)
    )
    legend = [text.get_text() for text in axes.get_legend().get_texts()]
    assert "ceiling A 80% interval [0.600, 0.630]" in legend and "80% prediction band" in legend
    target = line_by_label(axes, "target reward 0.5")
    assert set(target.get_ydata()) == {0.5}


def test_headline_on_top_of_the_figure_says_the_ceiling_and_the_budget():
    identified = fit_figure(StubResult(), target_compute=40000.0)
    headline = identified._suptitle.get_text()
    assert (
        headline.startswith("plateaued: ceiling A 0.61 [0.6, 0.63]")
        and "final reward at the budget 4e+04: " in headline
    )
    early = fit_figure(StubResult(ceiling_identified=False, c_mid=13000.0))
    assert early._suptitle.get_text().startswith("still rising: run ~6.5x longer")


def test_a_long_headline_is_kept_whole_and_the_figure_grows_to_hold_it():
    """A headline of more lines than the figure leaves room for loses no word (a cut hid the
    interval of the forecast at its end); the figure grows by the extra lines, the axes keep their height."""
    from scalerl.report.plotting import HEADLINE_LINE_INCHES, HEADLINE_LINES, HEADLINE_WIDTH, put_headline

    short = fit_figure(StubResult())
    words = [f"word{index}" for index in range(120)]
    text = " ".join(words) + " [0.93, 0.975]"
    long = fit_figure(StubResult())
    put_headline(long, text)
    shown = long._suptitle.get_text()
    lines = shown.split("\n")
    assert len(lines) > HEADLINE_LINES and all(len(line) <= HEADLINE_WIDTH for line in lines)
    assert " ".join(shown.split()) == text and "..." not in shown
    grown = long.get_size_inches()[1] - short.get_size_inches()[1]
    assert grown == pytest.approx((len(lines) - HEADLINE_LINES) * HEADLINE_LINE_INCHES)


def test_a_comparison_headline_gives_each_run_its_own_line():
    figure = comparison_figure({"run a": StubResult(), "run b": StubResult(ceiling_identified=False, c_mid=13000.0)})
    lines = figure._suptitle.get_text().split("\n")
    assert lines[0].startswith("run a: plateaued") and any(line.startswith("run b: still rising") for line in lines)


def test_the_curve_before_the_first_fitted_point_is_dashed():
    """An earlier point the fit left out (here at compute 50, below the first fitted one at 500)
    extends the drawn range; the curve there is dashed and unlabelled, the solid "fitted sigmoid"
    spans the fitted points only."""
    axes = fit_figure(StubResult(), not_fitted=(np.array([50.0]), np.array([0.1]))).axes[0]
    fitted = line_by_label(axes, "fitted sigmoid")
    assert fitted.get_xdata().min() >= 500.0 - 1e-9
    before = [line for line in axes.get_lines() if line.get_linestyle() == "--" and line.get_xdata().max() <= 500.0]
    assert len(before) == 1 and before[0].get_xdata().min() == pytest.approx(50.0)
    assert before[0].get_label().startswith("_")  # no legend entry of its own


def test_a_collapse_is_marked_where_it_begins_and_no_curve_rises_above_a():
    figure = fit_figure(StubResult(collapse_compute=3000.0), target_compute=40000.0)
    axes = figure.axes[0]
    collapse = line_by_label(axes, "collapse at 3e+03")
    assert set(collapse.get_xdata()) == {3000.0}
    for line in (line_by_label(axes, "fitted sigmoid"), line_by_label(axes, "extrapolation")):
        assert np.all(np.asarray(line.get_ydata()) <= 0.61 + 1e-12)
