"""fit_sigmoid: fit the ScaleRL compute-performance sigmoid to a training log, with uncertainty.

Orchestration only: input checks, R0 and point selection, diagnostics, the multi-start bounded
least squares (sigmoid_solver) and the posterior sample (posterior). The curve is

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)     (Khatri, Madaan et al., arXiv 2510.13786)

with R0 fixed (the first evaluation's reward unless given) and A, B, C_mid fitted.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import expit

from scalerl.errors import ConfigError, FitError, InputError
from scalerl.forecast.averaging import MIN_REFIT_POINTS, averaged_forms, draw_members
from scalerl.forecast.diagnostics import (
    NEAR_CEILING_WITHIN,
    CollapseReport,
    ceiling_identifiability,
    check_learning,
    detect_collapse,
    late_stretch,
    plateau_reached,
    point_noise_sd,
    trend_free_noise_sd,
)
from scalerl.forecast.result import FitResult
from scalerl.forecast.reward_unit import reward_unit
from scalerl.forecast.validation import validate_curve
from scalerl.forecast.sigmoid_solver import SolverProblem, data_residuals, multi_start_fit, parameter_bounds
from scalerl.forecast.posterior import STUDENT_T_NU, sample_posterior
from scalerl.forecast.uncertainty import DEFAULT_NOISE_FLOOR, noise_t_draws, residual_noise_sd

FIT_LOSSES = ("linear", "soft_l1", "huber", "cauchy", "arctan")
# "Identified" is one verdict whatever level intervals are reported at: judged at 80 %.
IDENTIFICATION_LEVEL = 0.8
NOISE_DRAWS_PER_BOOTSTRAP = 16
MAX_N_BOOTSTRAP = 100_000  # beyond this the draws alone take gigabytes; intervals stopped improving long before


def _check_options(loss, level, n_bootstrap, min_compute):
    if loss not in FIT_LOSSES:
        raise ConfigError(f"loss must be one of {', '.join(FIT_LOSSES)}, got {loss!r}")
    if not 0.0 < level < 1.0:
        raise ConfigError(f"level must be in (0, 1), got {level}")
    if not 20 <= int(n_bootstrap) <= MAX_N_BOOTSTRAP:
        raise ConfigError(f"n_bootstrap must be between 20 and {MAX_N_BOOTSTRAP}, got {n_bootstrap}")
    if min_compute is not None and min_compute < 0:
        raise ConfigError(f"min_compute must be >= 0, got {min_compute}")


def _check_r0(r0, reward_range):
    """A given R0 must be a finite reward inside `reward_range` (it is the curve's start)."""
    if r0 is None:
        return
    if not np.isfinite(r0):
        raise ConfigError(f"r0 must be a finite reward, got {r0}")
    if reward_range is not None and not reward_range[0] <= r0 <= reward_range[1]:
        raise ConfigError(f"r0 = {r0} is outside reward_range [{reward_range[0]}, {reward_range[1]}]")


def select_points(compute: np.ndarray, reward: np.ndarray, r0: float | None, min_compute: float | None,
                  fit_through_collapse: bool,
                  noise_floor: float) -> tuple[float, np.ndarray, CollapseReport | None, list[str]]:
    """R0 and the points used in least squares, plus warnings and the collapse report.

    r0=None: R0 is the reward at the smallest compute and that point is left out (R(C0) = R0 by
    definition). Points at C = 0 are always left out. A collapse ends the fitted range at the last
    point before it unless `fit_through_collapse`. `min_compute` drops the warm-up.
    """
    warnings = []
    collapse = detect_collapse(compute, reward, noise_floor)
    keep = np.ones(compute.size, dtype=bool)
    if r0 is None:
        r0 = float(reward[0])
        keep[0] = False
    keep &= compute > 0
    if collapse is not None:
        if fit_through_collapse:
            warnings.append(collapse.message() + "; fitting through it as asked")
        else:
            keep[collapse.onset_index:] = False
            warnings.append(collapse.message() + "; fitting only the points before it")
    if min_compute is not None:
        keep &= compute >= min_compute
    return float(r0), keep, collapse, warnings


def _require_points(n_points, n_params, collapse_cut):
    """FitError when there are fewer points than parameters; `collapse_cut` is the collapse
    report when the fitted range ends at a collapse (else None).

    n = p is allowed (an exact fit: the intervals then rest on the noise floor alone and say so),
    because an early forecast from three evaluations is what a user asks for at 25 % of a run.
    """
    if n_points < n_params:
        where = f" before the collapse at compute {collapse_cut.onset_compute:.4g}" if collapse_cut else ""
        raise FitError(
            f"too few points to fit: {n_points} usable{where} after excluding R0 and warm-up, "
            f"need at least {n_params} for {n_params} parameters"
        )


def _check_learning_before(fit_reward, r0, noise_sd, collapse_cut):
    """check_learning on the fitted points; when they end at a collapse, a FitError that says so.

    A run that rose a little and then fell is a collapse, not a flat run: the rise before the
    fall may be too small to fit, but the error must name the collapse (issue: a run rising
    0.51 -> 0.56 and falling erratically to 0.09 was called "flat").
    """
    try:
        check_learning(fit_reward, r0, noise_sd)
    except FitError as error:
        if collapse_cut is None:
            raise
        raise FitError(f"{collapse_cut.message()}; too little rise before it to fit ({error})") from error


def build_problem(fit_compute: np.ndarray, fit_reward: np.ndarray, r0: float,
                  reward_range: tuple[float, float] | None, loss: str, f_scale: float,
                  fixed_a: float | None, a_prior: tuple[float, float] | None = None) -> tuple[SolverProblem, float]:
    """Normalised least-squares problem: u = log(C / max C), bounds from the data."""
    compute_ref = float(fit_compute.max())
    with np.errstate(divide="ignore"):
        log_compute = np.log(fit_compute / compute_ref)
    if not np.all(np.isfinite(log_compute)):
        raise InputError(
            f"compute spans too many orders of magnitude ({fit_compute.min():.3g} to {compute_ref:.3g}): "
            "the ratio underflows; express compute in a coarser unit or drop the tiny values"
        )
    lower, upper = parameter_bounds(log_compute, fit_reward, r0, reward_range)
    if not np.all(lower < upper):  # no room for A above R0, e.g. R0 so large that R0 + gain rounds to R0
        raise FitError(f"no room for a ceiling above R0 = {r0:.6g}: the rewards never rise measurably above it")
    if fixed_a is not None and not lower[0] <= fixed_a <= upper[0]:
        raise FitError(f"fixed_a = {fixed_a} is outside the allowed ceiling range [{lower[0]:.4f}, {upper[0]:.4f}]")
    return SolverProblem(log_compute, fit_reward, r0, lower, upper, loss, f_scale, fixed_a, a_prior), compute_ref


def fit_with_plateau(problem: SolverProblem, plateau, n_starts: int,
                     within: float = NEAR_CEILING_WITHIN) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(free fit, reported fit): least squares, read at the flat end where the run has one.

    When the fitted points end flat (`plateau`) and the free ceiling misses that level by more
    than the paper's margin `within` (diagnostics.plateau_reached: typically a slow sigmoid tail
    running on above a plateau, or a peak above it), the run is read as levelled off there: the reported fit
    has A fixed at the late level and B, C_mid refitted. Data whose free fit already sits on the
    level keep their estimate (a noise-free curve is recovered exactly). The noise estimate and the
    sampler's starting point stay the free fit's; the posterior carries the flat end as a prior on
    A (posterior.py), so A's interval says how sure the reading is.
    """
    free, _ = multi_start_fit(replace(problem, a_prior=None), n_starts)
    if (plateau is None or problem.fixed_a is not None or free is None
            or plateau_reached(plateau, float(free[0]), within)):
        return free, free
    level = float(np.clip(plateau.level, problem.lower[0], problem.upper[0]))
    held, _ = multi_start_fit(replace(problem, a_prior=None, fixed_a=level), n_starts)
    return free, (free if held is None else held)


def _ceiling_check(problem, theta_hat, param_draws, compute_ref, plateau=None, within=NEAR_CEILING_WITHIN):
    """(identified, warning) at IDENTIFICATION_LEVEL whatever level the caller reports at: a flat
    end the fit sits on (diagnostics.plateau_reached), else diagnostics.ceiling_identifiability;
    `within` is the paper's margin in the reward's unit."""
    if problem.fixed_a is not None:
        return True, None
    if plateau is not None and plateau_reached(plateau, float(theta_hat[0]), within):
        return True, None
    tail = (1.0 - IDENTIFICATION_LEVEL) / 2.0
    a_interval = tuple(np.quantile(param_draws[:, 0], [tail, 1.0 - tail]))
    c_mid = compute_ref * np.exp(theta_hat[2])
    b_span = problem.upper[1] - problem.lower[1]
    b_at_bound = min(theta_hat[1] - problem.lower[1], problem.upper[1] - theta_hat[1]) < 1e-3 * b_span
    return ceiling_identifiability(
        theta_hat[0], problem.r0, c_mid, a_interval, problem.upper[0], compute_ref,
        residual_dof=problem.reward.size - 3, b_at_bound=bool(b_at_bound), b=float(theta_hat[1]), within=within,
    )


def fit_sigmoid(
    compute: ArrayLike,
    reward: ArrayLike,
    *,
    r0: float | None = None,
    min_compute: float | None = None,
    loss: str = "linear",
    level: float = 0.8,
    reward_range: tuple[float, float] | None = (0.0, 1.0),
    seed: int = 0,
    n_bootstrap: int = 200,
    fixed_a: float | None = None,
    fit_through_collapse: bool = False,
    noise_floor: float | None = None,
    n_starts: int = 4,
    average_forms: bool = True,
    band_table: dict | None = None,
) -> FitResult:
    """Fit R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) and sample its posterior (forecast.posterior).

    Bounded multi-start least squares on (A, B, log C_mid) in normalised log compute, seeded by a
    coarse grid; `loss` is any scipy robust loss ("linear", "soft_l1", "huber", ...), scaled by the
    evaluation noise. `fixed_a` fixes the ceiling (used by compare_runs). `level` is the level of
    the ceiling check. Uncertainty: posterior draws of (A, B, C_mid, noise scale) from
    forecast.posterior (`n_bootstrap` is the number of draws kept, the name the CLI and configs
    use; `seed` makes them reproducible). Observation bands are calibrated by forecast horizon
    on other runs (forecast.band_calibration): `band_table` None takes the table shipped with the
    package (built from the bundled curves by `python -m benchmarks.band_table`).
    `average_forms` (default) makes the point forecast and bands an average over curve forms
    weighted by within-run cross-validation (forecast.averaging); False keeps the posterior alone.
    The absolute tolerances are shares of the reward's unit u (forecast.reward_unit: the range's
    width, 1 for a pass rate): the noise floor `noise_floor` (None: 0.002 u) and the paper's margin
    on A (0.02 u), so a reward logged in percent gets the answer it gets as a fraction.
    Raises FitError when too few points remain or the run is flat.
    """
    _check_options(loss, level, n_bootstrap, min_compute)
    compute, reward = validate_curve(compute, reward, reward_range)
    unit = reward_unit(reward, reward_range)
    noise_floor = DEFAULT_NOISE_FLOOR * unit if noise_floor is None else float(noise_floor)
    within = NEAR_CEILING_WITHIN * unit
    _check_r0(r0, reward_range)
    r0, keep, collapse, warnings = select_points(compute, reward, r0, min_compute, fit_through_collapse, noise_floor)
    fit_compute, fit_reward = compute[keep], reward[keep]
    n_params = 3 if fixed_a is None else 2
    _require_points(fit_compute.size, n_params, None if fit_through_collapse else collapse)
    diff_noise = point_noise_sd(np.concatenate([[r0], fit_reward]), noise_floor)
    # A flat end is evidence of the ceiling (posterior.py): its level enters as a prior on A.
    late = late_stretch(fit_compute, fit_reward, diff_noise)
    plateau = late if late is not None and late.is_flat(IDENTIFICATION_LEVEL) else None
    problem, compute_ref = build_problem(fit_compute, fit_reward, r0, reward_range, loss, diff_noise, fixed_a,
                                         None if plateau is None else plateau.ceiling_prior())
    theta_free, theta_hat = fit_with_plateau(problem, plateau, n_starts, within)
    if theta_hat is None or not np.all(np.isfinite(theta_hat)):
        raise FitError("the optimiser failed to find a finite fit")
    noise_sd = residual_noise_sd(data_residuals(theta_free, problem), n_params, noise_floor)
    # Differences overstate the noise on a steep curve sampled sparsely, residuals on a flat one
    # that the sigmoid bends to fit; the smaller is the fair yardstick for "no learning".
    _check_learning_before(fit_reward, r0, min(diff_noise, noise_sd), None if fit_through_collapse else collapse)
    if fit_compute.size <= n_params:
        # An exact fit leaves no residuals to measure the noise: the successive differences are the
        # only evidence left, and they err on the wide side, as an under-determined fit should.
        noise_sd = max(noise_sd, diff_noise)

    rng = np.random.default_rng(seed)
    draws = sample_posterior(problem, theta_free, noise_sd, noise_floor, int(n_bootstrap), seed)
    param_draws = np.column_stack([draws[:, 0], draws[:, 1], compute_ref * np.exp(draws[:, 2])])
    # u = 0 is the last fitted point: gain fraction there = expit(B (0 - s)).
    gain_reached = float(np.median(expit(-draws[:, 1] * draws[:, 2])))
    identified, warning = _ceiling_check(problem, theta_hat, param_draws, compute_ref, plateau, within)
    warnings += [warning] if warning else []
    if fit_compute.size <= n_params + 1:
        warnings.append(f"only {fit_compute.size} points for {n_params} parameters: intervals lean on the noise floor")
    # A fixed ceiling (compare's refit) asks about one form; otherwise the forecast averages forms.
    # The free fit is the plain least-squares sigmoid the averaging refits, with a linear loss.
    free_sigmoid = (float(theta_free[0]), float(theta_free[1]), float(compute_ref * np.exp(theta_free[2])), r0)
    forms = () if fixed_a is not None or not average_forms else averaged_forms(
        fit_compute, fit_reward, r0, reward_range, diff_noise,
        free_sigmoid if loss == "linear" and fit_compute.size >= MIN_REFIT_POINTS else None)
    return FitResult(
        a=float(theta_hat[0]), b=float(theta_hat[1]), c_mid=float(compute_ref * np.exp(theta_hat[2])), r0=r0,
        stderr=dict(zip(("A", "B", "C_mid"), np.std(param_draws, axis=0, ddof=1).tolist())),
        n_points=int(fit_compute.size), compute=fit_compute, reward=fit_reward,
        ceiling_identified=bool(identified), warnings=tuple(warnings), param_draws=param_draws,
        noise_sd=noise_sd, noise_dof=STUDENT_T_NU, noise_scale_draws=draws[:, 3], band_table=band_table,
        gain_reached=gain_reached,
        noise_draws=noise_t_draws(STUDENT_T_NU, NOISE_DRAWS_PER_BOOTSTRAP * int(n_bootstrap), rng),
        reward_range=None if reward_range is None else tuple(float(v) for v in reward_range),
        fixed=("R0",) if fixed_a is None else ("R0", "A"),
        collapse_compute=None if collapse is None else collapse.onset_compute, loss=loss,
        forms=forms, form_of_draw=draw_members(forms, param_draws.shape[0], seed) if forms else None,
        a_upper_bound=float(problem.upper[0]),
        band_noise_sd=trend_free_noise_sd(np.concatenate([[r0], fit_reward]), noise_floor), reward_unit=unit,
    )
