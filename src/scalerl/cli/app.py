"""The `scalerl` command line: fit, compare and plot compute-performance curves from logs.

Imports no torch: the training commands (`train`, `demo`, ...) are registered at the end
(cli/extras.py), as commands naming the extra to install when it is missing. Expected failures
end as one `error: ...` line on stderr with exit code 2 (see scalerl.cli.errors).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from scalerl.cli.errors import USER_ERROR_EXIT_CODE, exits_on_user_error
from scalerl.cli.extras import missing_extra_message, register_command_groups
from scalerl.cli.fit_inputs import (
    MARGIN_HELP,
    REWARD_RANGE_OPTION,
    check_finite_options,
    check_reward_range,
    fit_options,
    fit_window_limit,
    parse_compute_values,
    reward_range_for,
    split_pair_values,
)
from scalerl.cli.reading import (
    ALLOW_PARTIAL_OPTION,
    CUMULATIVE_OPTION,
    GROUP_OPTION,
    RUN_HELP,
    SEGMENT_OPTION,
    Reading,
    curve_notes,
    say_notes,
)
from scalerl.cli.runs import FIT_FRACTION_OPTION, FIT_UNTIL_OPTION, LABEL_OPTION, fit_windows, read_labelled_runs
from scalerl.errors import InputError
from scalerl.escaping import plain


def _show_flags_without_a_type() -> None:
    """typer (0.2x) prints `<bool>` after every flag in --help, as if `--json` took a value
    (`--json true` then fails on the extra argument); a flag takes none, so show no type."""
    option_class = getattr(getattr(typer, "core", None), "TyperOption", None)
    if option_class is None or getattr(option_class, "_flags_untyped", False):
        return
    typed = option_class.display_type_rich

    def display_type_rich(self, ctx):
        return None if getattr(self, "is_flag", False) and not self.count else typed(self, ctx)

    option_class.display_type_rich = display_type_rich
    option_class._flags_untyped = True


_show_flags_without_a_type()

app = typer.Typer(
    name="scalerl",
    help="Predictable RL post-training: fit and extrapolate ScaleRL compute-performance curves.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    # click's plain help: it never cuts an option name (rich's table does on a narrow terminal) and
    # needs no rich import; up to 120 columns on a wide terminal.
    rich_markup_mode=None,
    context_settings={"max_content_width": 120},
)

X_HELP = (
    "Compute column (default: the first present of gpu_hours, compute, flops, tokens, eval_num_tokens, "
    "num_tokens, eval/num_tokens, train/num_tokens, perf/total_num_tokens, training/global_step, "
    "train/global_step, global_step, step, Step, _step)."
)
Y_HELP = (
    "Reward column (default: the first tier with a column present, in order: val_pass_rate, val/pass_rate; "
    "eval_reward, eval/reward; eval_rewards/<fn>/mean; val-core/<data>/reward/mean@1; "
    "val-core/<data>/acc/mean@1; val/test_score/<data>; reward, train/reward; rewards/<fn>/mean; "
    "several columns in one tier are an error that lists them)."
)


# --- commands ---------------------------------------------------------------------------------------

LEVEL_OPTION = typer.Option(0.8, "--level", help="Confidence level of intervals and bands.")
N_DRAWS_OPTION = typer.Option(
    None, "--n-draws", help="Posterior draws kept behind the intervals and bands (default: the library's 200)."
)
SEED_OPTION = typer.Option(
    None,
    "--seed",
    min=0,
    help="The posterior sampler's seed (default 0): the same data and seed give the same "
    "answer; another seed shows how far an interval's edges move with the sampling.",
)


@app.command()
@exits_on_user_error
def fit(
    path: Path = typer.Argument(
        ...,
        help="Log: CSV, JSONL, W&B history CSV, trainer_state.json, verl log, TensorBoard "
        "file or folder; a TRL checkpoint or output folder or a scalerl run folder.",
    ),
    x: str | None = typer.Option(None, "--x", help=X_HELP),
    y: str | None = typer.Option(None, "--y", help=Y_HELP),
    r0: float | None = typer.Option(None, "--r0", help="Starting reward R0 (default: the first evaluation)."),
    min_x: float | None = typer.Option(None, "--min-x", help="Exclude points below this compute (warm-up)."),
    fit_until: float | None = typer.Option(None, "--fit-until", help="Fit only points with x <= X."),
    fit_fraction: float | None = typer.Option(None, "--fit-fraction", help="Fit only x <= F * max(x)."),
    predict_at: list[str] = typer.Option(
        [], "--predict-at", help="Budget: predict the reward at this compute (repeatable)."
    ),
    target: float | None = typer.Option(None, "--target", help="Report the compute needed to reach this reward."),
    level: float = LEVEL_OPTION,
    json_output: bool = typer.Option(False, "--json", help="Print exactly one JSON object on stdout."),
    plot: Path | None = typer.Option(None, "--plot", help="Write a figure (.png, .svg or .pdf)."),
    loss: str = typer.Option("linear", "--loss", help="Least-squares loss: linear, soft_l1, huber, cauchy, arctan."),
    power_law: bool = typer.Option(False, "--power-law", help="Also fit the power law R = A - D*C^-B."),
    fit_through_collapse: bool = typer.Option(False, "--fit-through-collapse", help="Fit past a detected collapse."),
    reward_range: tuple[float, float] | None = REWARD_RANGE_OPTION,
    n_draws: int | None = N_DRAWS_OPTION,
    seed: int | None = SEED_OPTION,
    run: str | None = typer.Option(None, "--run", help=RUN_HELP),
    group: str | None = GROUP_OPTION,
    segment: int | None = SEGMENT_OPTION,
    cumulative: bool | None = CUMULATIVE_OPTION,
    allow_partial: bool = ALLOW_PARTIAL_OPTION,
) -> None:
    """Fit the ScaleRL sigmoid to one run and extrapolate it."""
    from scalerl.cli.fit_views import extrapolation_target, fit_curve, fit_power_law_view, progress
    from scalerl.report import console as report

    check_finite_options(r0=r0, min_x=min_x, fit_until=fit_until, fit_fraction=fit_fraction, target=target)
    predict_values = parse_compute_values(predict_at, "--predict-at")
    if plot is not None:
        from scalerl.report.plotting import check_figure_path

        check_figure_path(plot)
    curve = Reading(x, y, group, segment, cumulative, allow_partial).read(path, run)
    reward_range, range_notes = reward_range_for([curve], reward_range)
    notes = [*curve_notes({"": curve}), *range_notes]
    limit = fit_window_limit(curve.compute, fit_until, fit_fraction)
    options = fit_options(r0, min_x, loss, level, reward_range, n_draws, fit_through_collapse, seed)
    with progress(json_output, f"fitting {curve.source} ..."):
        result, held_out, not_fitted = fit_curve(curve, fit_limit=limit, **options)
        payload = result.to_dict(level=level, predict_at=predict_values, target=target)
        payload.update(source=str(curve.source), x_column=curve.x_name, y_column=curve.y_name)
        payload["warnings"] = [*notes, *payload["warnings"]]
        power_law_view = fit_power_law_view(curve, limit, options, predict_values, payload) if power_law else None
    if json_output:
        typer.echo(report.json_text(payload))
    else:
        title = f"{curve.source}: {curve.y_name} vs {curve.x_name}"
        report.render_fit(
            report.stdout_console(), result, payload, title=title, target=target, power_law=power_law_view
        )
    if plot is not None:
        from rich.console import Console

        from scalerl.report.plotting import plot_fit

        budget = max(predict_values) if predict_values else None
        plot_fit(
            result,
            plot,
            held_out=held_out,
            not_fitted=not_fitted,
            level=level,
            target_compute=budget,
            target_reward=target,
            extend_to=extrapolation_target(
                predict_values, (payload["compute_to_target"] or {}).get("value"), curve.compute.max()
            ),
            x_label=curve.x_name,
            y_label=curve.y_name,
        )
        if not json_output:
            Console(stderr=True).print(f"figure written to {plain(plot)}", markup=False, highlight=False)


@app.command()
@exits_on_user_error
def compare(
    paths: list[Path] = typer.Argument(..., help="Two or more run logs to compare (NAME=PATH names a run)."),
    margin: float | None = typer.Option(None, "--margin", help=MARGIN_HELP),
    labels: list[str] = LABEL_OPTION,
    fit_until: float | None = FIT_UNTIL_OPTION,
    fit_fraction: float | None = FIT_FRACTION_OPTION,
    json_output: bool = typer.Option(False, "--json", help="Print exactly one JSON object on stdout."),
    x: str | None = typer.Option(None, "--x", help=X_HELP),
    y: str | None = typer.Option(None, "--y", help=Y_HELP),
    plot: Path | None = typer.Option(None, "--plot", help="Write a figure of all runs (.png, .svg or .pdf)."),
    min_x: float | None = typer.Option(None, "--min-x", help="Exclude points below this compute (warm-up)."),
    level: float = LEVEL_OPTION,
    reward_range: tuple[float, float] | None = REWARD_RANGE_OPTION,
    n_draws: int | None = N_DRAWS_OPTION,
    seed: int | None = SEED_OPTION,
    runs: list[str] = typer.Option([], "--run", help=RUN_HELP + " Repeat it with one file to compare its runs."),
    group: str | None = GROUP_OPTION,
    segment: int | None = SEGMENT_OPTION,
    cumulative: bool | None = CUMULATIVE_OPTION,
    allow_partial: bool = ALLOW_PARTIAL_OPTION,
) -> None:
    """Rank recipes by the paper's rule: higher ceiling A wins; equal ceilings -> higher B."""
    check_finite_options(fit_until=fit_until, fit_fraction=fit_fraction, min_x=min_x)
    if len(paths) < 2 and len(runs) < 2:
        raise InputError(f"compare needs at least two runs (files, or --run twice with one file), got {len(paths)}")
    if margin is not None and not margin >= 0.0:
        raise InputError(f"--margin must be >= 0, got {margin:g}")
    if plot is not None:
        from scalerl.report.plotting import check_figure_path

        check_figure_path(plot)
    from scalerl.cli.fit_views import points_not_fitted, progress
    from scalerl.forecast.compare import compare_runs
    from scalerl.forecast.readers.curve import axis_warnings
    from scalerl.report import console as report

    curves = read_labelled_runs(paths, runs, Reading(x, y, group, segment, cumulative, allow_partial), labels)
    curves, held_out = fit_windows(curves, fit_until, fit_fraction)
    reward_range, range_notes = reward_range_for(list(curves.values()), reward_range)
    if reward_range is not None:
        for curve in curves.values():
            check_reward_range(curve, reward_range)
    options = fit_options(None, min_x, None, level, reward_range, n_draws, False, seed)
    options = {key: value for key, value in options.items() if value is not None or key == "reward_range"}
    with progress(json_output, f"fitting {len(curves)} runs ..."):
        comparison = compare_runs({name: (c.compute, c.reward) for name, c in curves.items()}, margin=margin, **options)
        payload = report.comparison_payload(comparison, level)
        payload["warnings"] = [*axis_warnings(curves), *curve_notes(curves), *range_notes, *payload["warnings"]]
    if json_output:
        typer.echo(report.json_text(payload))
    else:
        report.render_comparison(report.stdout_console(), payload)
    if plot is not None:
        from scalerl.report.plotting import RunPoints, plot_comparison

        first = next(iter(curves.values()))
        shown = report.run_labels(list(curves))
        points = {
            shown[name]: RunPoints(
                not_fitted=points_not_fitted(c.compute, c.reward, comparison.fits[name]),
                held_out=None if held_out[name] is None else (held_out[name].compute, held_out[name].reward),
            )
            for name, c in curves.items()
            if name in comparison.fits
        }
        plot_comparison(
            {shown[name]: fit for name, fit in comparison.fits.items()},
            plot,
            points=points,
            level=level,
            x_label=first.x_name,
            y_label=first.y_name,
            title=report.with_short_names(report.decision_sentence(payload), list(curves)),
            headline=report.with_short_names(payload["headline"], list(curves)),
        )


@app.command()
@exits_on_user_error
def plot(
    paths: list[Path] = typer.Argument(..., help="One or more run logs (NAME=PATH names a run)."),
    output: Path = typer.Option(..., "-o", "--output", help="Figure file (.png, .svg or .pdf)."),
    x: str | None = typer.Option(None, "--x", help=X_HELP),
    y: str | None = typer.Option(None, "--y", help=Y_HELP),
    fit_fraction: float | None = FIT_FRACTION_OPTION,
    fit_until: float | None = FIT_UNTIL_OPTION,
    labels: list[str] = LABEL_OPTION,
    target_x: float | None = typer.Option(
        None, "--target-x", "--budget", help="Budget: extrapolate the curves to this compute and draw it."
    ),
    min_x: float | None = typer.Option(None, "--min-x", help="Exclude points below this compute (warm-up)."),
    level: float = LEVEL_OPTION,
    reward_range: tuple[float, float] | None = REWARD_RANGE_OPTION,
    n_draws: int | None = N_DRAWS_OPTION,
    seed: int | None = SEED_OPTION,
    runs: list[str] = typer.Option([], "--run", help=RUN_HELP + " Repeat it with one file to draw its runs."),
    group: str | None = GROUP_OPTION,
    segment: int | None = SEGMENT_OPTION,
    cumulative: bool | None = CUMULATIVE_OPTION,
    allow_partial: bool = ALLOW_PARTIAL_OPTION,
) -> None:
    """Fit each run (optionally on its early part) and draw the curves with their bands."""
    from rich.console import Console

    from scalerl.cli.fit_views import fit_curve, progress
    from scalerl.report.console import run_labels
    from scalerl.report.plotting import RunPoints, check_figure_path, plot_comparison, plot_fit

    check_figure_path(output)
    check_finite_options(fit_until=fit_until, fit_fraction=fit_fraction, min_x=min_x, target_x=target_x)
    curves = read_labelled_runs(paths, runs, Reading(x, y, group, segment, cumulative, allow_partial), labels)
    reward_range, range_notes = reward_range_for(list(curves.values()), reward_range)
    options = fit_options(None, min_x, None, level, reward_range, n_draws, False, seed)
    results, points = {}, {}
    labels = run_labels(list(curves))
    with progress(False, f"fitting {len(curves)} run(s) ..."):
        for name, curve in curves.items():
            limit = fit_window_limit(curve.compute, fit_until, fit_fraction)
            shown = labels[name]
            results[shown], held_out, not_fitted = fit_curve(curve, fit_limit=limit, **options)
            points[shown] = RunPoints(held_out=held_out, not_fitted=not_fitted)
    first = next(iter(curves.values()))
    axes = {"x_label": first.x_name, "y_label": first.y_name, "target_compute": target_x, "level": level}
    if len(results) == 1:
        name = next(iter(results))
        plot_fit(results[name], output, held_out=points[name].held_out, not_fitted=points[name].not_fitted, **axes)
    else:
        plot_comparison(results, output, points=points, **axes)
    from scalerl.forecast.readers.curve import axis_warnings

    say_notes([*axis_warnings(curves), *curve_notes(curves), *range_notes])
    Console(stderr=True).print(f"figure written to {plain(output)}", markup=False, highlight=False)


# Commands that only fit curves: their matrices are a few rows wide, so more than one BLAS thread
# only spins (OpenBLAS starts its pool when numpy is imported: about 0.15 s of CPU per command).
CURVE_FITTING_COMMANDS = frozenset({"fit", "compare", "plot", "report"})


def one_blas_thread_for(arguments: list[str], environ=os.environ) -> None:
    """Default OPENBLAS_NUM_THREADS to 1 in `environ` (a value the user set is kept) for a
    curve-fitting command; training commands keep their libraries' defaults. Called before numpy
    is imported, which is when OpenBLAS reads it."""
    if arguments[:1] and arguments[0] in CURVE_FITTING_COMMANDS:
        environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main() -> None:
    """Console-script entry point (`scalerl`): usage errors too end as one `error: ...` line, and
    so does a command run without the extra it needs."""
    one_blas_thread_for(sys.argv[1:])
    try:
        exit_code = app(args=split_pair_values(sys.argv[1:]), standalone_mode=False)
    except ImportError as error:
        message = missing_extra_message(error)
        if message is None:
            raise
        typer.echo(f"error: {message}", err=True)
        sys.exit(USER_ERROR_EXIT_CODE)
    except Exception as error:
        # click's UsageError / BadParameter (typer may vendor click, so recognise them by shape)
        if not (hasattr(error, "format_message") and hasattr(error, "exit_code")):
            raise
        if not error.format_message():  # bare `scalerl`: the help was shown already
            sys.exit(error.exit_code)
        command = getattr(getattr(error, "ctx", None), "command_path", "scalerl")
        fail_message = f"{error.format_message()} (see '{command} --help')"
        typer.echo(f"error: {' '.join(fail_message.split())}", err=True)
        sys.exit(USER_ERROR_EXIT_CODE)
    sys.exit(exit_code if isinstance(exit_code, int) else 0)


# The command groups that train (and report, export, config): registered last, each replaced by a
# command naming its extra when that extra is not installed.
register_command_groups(app)
