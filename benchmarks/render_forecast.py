"""Forecast accuracy on real runs, rendered from benchmarks/results/forecast_accuracy.json (written
by `python -m benchmarks.forecast_accuracy`): the error table, the band coverage, the cost of a
forecast, and the one headline number. Used by benchmarks/render.py."""
from __future__ import annotations

RESULTS_FILE = "forecast_accuracy.json"
COMMAND = "python -m benchmarks.forecast_accuracy"
METHOD_LABELS = {
    "scalerl": "**scalerl**",
    "paper_grid_r0_first": "paper grid, R0 = first eval",
    "paper_grid_r0_zero": "paper grid, R0 = 0",
    "power_law": "power law",
    "least_squares": "plain least squares",
    "last_value": "last value",
}
COVERAGE_LEVELS = ("0.5", "0.8", "0.95")


def _fraction(key: str) -> str:
    return f"{100 * float(key):.0f}%"


def error_table(results: dict) -> str:
    """Absolute error of each method's forecast of the run's final mean, by fraction fitted: over
    every cell (a failed fit scored as the last value) and over the cells every method forecast."""
    lines = ["| fit on | method | cells | failed fits | median abs err | mean abs err | common cells | "
             "median (common) | mean (common) |", "|---|---|---|---|---|---|---|---|---|"]
    for fraction, methods in results["errors"].items():
        for method, e in methods.items():
            lines.append(f"| {_fraction(fraction)} | {METHOD_LABELS.get(method, method)} | {e['cells']} | "
                         f"{e['failed']} | {e['all_median_abs_error']:.4f} | {e['all_mean_abs_error']:.4f} | "
                         f"{e['common_cells']} | {e['common_median_abs_error']:.4f} | "
                         f"{e['common_mean_abs_error']:.4f} |")
    return "\n".join(lines)


def coverage_table(results: dict) -> str:
    """Share of the runs' final means inside scalerl's bands, constants chosen leave-one-curve-out."""
    head = " | ".join(f"{100 * float(level):.0f} % band" for level in COVERAGE_LEVELS)
    lines = [f"| runs | forecasts | {head} |", "|---|---|" + "---|" * len(COVERAGE_LEVELS)]
    for group, cover in results["coverage"].items():
        name = "still rising at their end" if group == "still rising" else group
        shares = " | ".join(f"{cover['by_level'][level]:.2f}" for level in COVERAGE_LEVELS)
        lines.append(f"| {name} | {cover['cells']} | {shares} |")
    return "\n".join(lines)


def cost_line(results: dict) -> str:
    seconds = results["seconds_per_forecast"]
    collapse = "; ".join(f"{key} {value}" for key, value in results["collapse_rule"].items())
    constants = ", ".join(f"{key} = {value}" for key, value in results["constants_all_curves"].items())
    return (f"A fit with bands takes {seconds['median']:.2f} s wall clock at the median, "
            f"{seconds['max']:.2f} s at the slowest (CPU time {seconds['cpu_median']:.2f} s, "
            f"{seconds['cpu_max']:.2f} s). Collapse rule: {collapse}. Band constants chosen on all "
            f"curves (the library's): {constants}.")


def table(results: dict) -> str:
    """The whole forecast-accuracy section: errors, coverage, cost."""
    return "\n\n".join([error_table(results), "Band coverage (leave-one-curve-out):",
                        coverage_table(results), cost_line(results)])


def headline(results: dict) -> str:
    """One sentence: scalerl's median error at half the compute, against the paper's grid fit."""
    half = results["errors"]["0.5"]
    ours, paper = half["scalerl"], half["paper_grid_r0_first"]
    healthy = results["coverage"]["healthy"]
    return (f"Fitted on the first half of the compute of {ours['cells']} real RL runs, scalerl forecasts "
            f"each run's final reward with a median absolute error of **{ours['all_median_abs_error']:.4f}** "
            f"(the paper's grid fit: {paper['all_median_abs_error']:.4f}); its 80 % band holds "
            f"{healthy['by_level']['0.8']:.2f} of the healthy runs' finals.")
