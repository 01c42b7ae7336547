"""Point forecast averaged over curve forms, each weighted by how well it predicted the run's own later points.

One curve form fitted before the bend of a run is often wrong in a way the data cannot show; a
second form fitted on the same points is wrong differently. The forecast averages four members:

    sigmoid_posterior   posterior median of the ScaleRL sigmoid, R0 fixed (forecast.posterior)
    sigmoid             least-squares ScaleRL sigmoid, R0 fixed
    sigmoid_r0_floor    least-squares sigmoid starting at the floor of the reward range, R0 = LOW (for
                        pass rates the paper's seed form A / (1 + (C_mid / C)^B), R0 = 0); not for an
                        open range
    power_law           R = A - D C^(-B), the paper's alternative

(Khatri, Madaan et al., arXiv 2510.13786: the sigmoid, its R0 = 0 form and the power law.) The
ScaleRL form counts twice (posterior median and least squares), the default the paper argues for.
Weights come from within-run cross-validation: every form is refitted on the earlier fitted points
and scored on the last third of them (mean squared error e_f), then

    w_f = (1 / (e_f + sigma^2)) / sum_g (1 / (e_g + sigma^2))

with sigma the run's evaluation noise: errors within the noise cannot tell forms apart, so they
leave the weights near equal. No constant is tuned. With too few points to hold any out (fewer than
3 left to refit) every form that fits gets the same weight: an early forecast leans on no single form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from scalerl.errors import ScaleRLError
from scalerl.forecast.curves import power_law_reward, sigmoid_compute_near_ceiling, sigmoid_reward
from scalerl.forecast.power_law import fit_power_law
from scalerl.forecast.sigmoid_solver import SolverProblem, multi_start_fit, parameter_bounds

POSTERIOR = "sigmoid_posterior"
FORM_NAMES = (POSTERIOR, "sigmoid", "sigmoid_r0_floor", "power_law")
MIN_REFIT_POINTS = 3  # a three-parameter form needs three points to be refitted on


@dataclass(frozen=True)
class FormCurve:
    """One member of the averaged forecast: its name, weight and fitted curve.

    kind "posterior" (the posterior median, supplied by the caller), "sigmoid" with params
    (A, B, C_mid, R0) or "power_law" with params (A, D, B); `floor` is the least the power law may
    give (R0: a rising run does not fall below where it started; C^(-B) is infinite at C = 0).
    """

    name: str
    weight: float
    kind: str
    params: tuple = ()
    floor: float = -np.inf

    def reward(self, compute: ArrayLike, posterior_median: ArrayLike | None,
               reward_range: tuple[float, float] | None = None) -> np.ndarray:
        """R(C) of this form at each compute; the power law is clipped to [floor, top of `reward_range`]."""
        if self.kind == "posterior":
            return np.asarray(posterior_median, dtype=float)
        if self.kind == "sigmoid":
            return sigmoid_reward(compute, *self.params)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            value = power_law_reward(np.maximum(np.asarray(compute, dtype=float), 1e-300), *self.params)
        top = np.inf if reward_range is None else reward_range[1]
        low = self.floor if reward_range is None else max(self.floor, reward_range[0])
        return np.clip(value, low, top)


def form_compute_near_ceiling(form: FormCurve, within: float) -> float | None:
    """Compute at which a least-squares sigmoid form comes within `within` of its ceiling:

        C_mid (|A - R0| / within - 1)^(1/B)    (0 when the whole gain is within)

    None for the posterior member (its draws carry their own) and for the power law: its limit A
    is an asymptote it approaches as C^(-B), so its run length ((D / within)^(1/B)) measures the
    form, not the run (on the demo's runs, already on their plateau, it said up to ~700 times
    their compute)."""
    if form.kind == "posterior":
        return None
    if form.kind == "sigmoid":
        a, b, c_mid, r0 = form.params
        return float(sigmoid_compute_near_ceiling(within, a, b, c_mid, r0))
    return None


def least_squares_sigmoid(compute: ArrayLike, reward: ArrayLike, r0: float,
                          reward_range: tuple[float, float] | None) -> tuple[float, float, float, float] | None:
    """(A, B, C_mid, R0) of the bounded multi-start least-squares sigmoid, None if it cannot fit."""
    compute, reward = np.asarray(compute, dtype=float), np.asarray(reward, dtype=float)
    keep = compute > 0
    compute, reward = compute[keep], reward[keep]
    if compute.size < MIN_REFIT_POINTS or float(np.max(reward)) <= r0:
        return None
    compute_ref = float(compute.max())
    log_compute = np.log(compute / compute_ref)
    lower, upper = parameter_bounds(log_compute, reward, r0, reward_range)
    if not (np.all(np.isfinite(log_compute)) and np.all(lower < upper)):
        return None
    theta, _ = multi_start_fit(SolverProblem(log_compute, reward, r0, lower, upper), 4)
    if theta is None or not np.all(np.isfinite(theta)):
        return None
    return float(theta[0]), float(theta[1]), float(compute_ref * np.exp(theta[2])), float(r0)


def least_squares_power_law(compute: ArrayLike, reward: ArrayLike,
                            reward_range: tuple[float, float] | None) -> tuple[float, float, float] | None:
    """(A, D, B) of fit_power_law, None when it refuses (fewer than 4 points, overflow, ...)."""
    try:
        with np.errstate(all="ignore"):
            fit = fit_power_law(compute, reward, reward_range=reward_range)
    except (ScaleRLError, ValueError, np.linalg.LinAlgError):
        return None
    return (fit.a, fit.d, fit.b) if np.all(np.isfinite([fit.a, fit.d, fit.b])) else None


def reward_floor(reward_range: tuple[float, float] | None) -> float | None:
    """The lowest reward, LOW of the range (0 for pass rates; -1 for the mean of +1/-1 rewards), where
    the paper's seed form starts; None for an open range, which has no natural floor. Starting at
    LOW rather than at 0 keeps the forecast the same whatever affine unit the reward is logged in."""
    return None if reward_range is None else float(reward_range[0])


def fit_forms(compute: ArrayLike, reward: ArrayLike, r0: float, reward_range: tuple[float, float] | None,
              sigmoid: tuple[float, float, float, float] | None = None) -> dict[str, FormCurve | None]:
    """{name: FormCurve with weight 0 or None} for the least-squares members on these points;
    `sigmoid` is the least-squares sigmoid's (A, B, C_mid, R0) when the caller has it already."""
    out = {}
    floor = reward_floor(reward_range)
    r0_floor = None if floor is None else least_squares_sigmoid(compute, reward, floor, reward_range)
    if sigmoid is None:
        sigmoid = least_squares_sigmoid(compute, reward, r0, reward_range)
    for name, kind, params in (
        ("sigmoid", "sigmoid", sigmoid),
        ("sigmoid_r0_floor", "sigmoid", r0_floor),
        ("power_law", "power_law", least_squares_power_law(compute, reward, reward_range)),
    ):
        out[name] = None if params is None else FormCurve(name, 0.0, kind, params, floor=float(r0))
    return out


def held_out_count(n_points: int) -> int:
    """Later fitted points held out for the within-run check: a third, at least 1, 0 when fewer
    than MIN_REFIT_POINTS would remain to refit on."""
    hold = max(1, n_points // 3)
    return hold if n_points - hold >= MIN_REFIT_POINTS else 0


def cross_validated_errors(compute: ArrayLike, reward: ArrayLike, r0: float,
                           reward_range: tuple[float, float] | None) -> dict[str, float | None]:
    """{name: mean squared error on the held-out later points, or None} per least-squares form."""
    compute, reward = np.asarray(compute, dtype=float), np.asarray(reward, dtype=float)
    hold = held_out_count(compute.size)
    if hold == 0:
        return {name: None for name in FORM_NAMES[1:]}
    early = fit_forms(compute[:-hold], reward[:-hold], r0, reward_range)
    errors = {}
    for name, form in early.items():
        if form is None:
            errors[name] = None
            continue
        predicted = form.reward(compute[-hold:], None, reward_range)
        errors[name] = float(np.mean((predicted - reward[-hold:]) ** 2))
    return errors


def form_weights(errors: Mapping[str, float | None], noise_sd: float) -> dict[str, float]:
    """w_f proportional to 1 / (e_f + sigma^2); equal weights when any member has no error."""
    values = list(errors.values())
    if not values:
        return {}
    if any(e is None or not np.isfinite(e) for e in values):
        return {name: 1.0 / len(errors) for name in errors}
    inverse = {name: 1.0 / (e + noise_sd**2) for name, e in errors.items()}
    total = sum(inverse.values())
    return {name: v / total for name, v in inverse.items()}


def averaged_forms(compute: ArrayLike, reward: ArrayLike, r0: float, reward_range: tuple[float, float] | None,
                   noise_sd: float, sigmoid: tuple[float, float, float, float] | None = None) -> tuple[FormCurve, ...]:
    """The members of the averaged forecast with their weights (FormCurve tuple, posterior first).

    The posterior member shares the cross-validated error of the least-squares sigmoid (the same
    form). Members that cannot be fitted on these points are left out. `sigmoid`: the plain
    least-squares sigmoid on all the points, (A, B, C_mid, R0), when the caller has fitted it
    (fit_sigmoid's free fit is that fit: it saves one multi-start fit).
    """
    forms = fit_forms(compute, reward, r0, reward_range, sigmoid)
    cv = cross_validated_errors(compute, reward, r0, reward_range)
    members = {POSTERIOR: cv.get("sigmoid")}
    members.update({name: cv.get(name) for name, form in forms.items() if form is not None})
    weights = form_weights(members, noise_sd)
    out = [FormCurve(POSTERIOR, weights[POSTERIOR], "posterior")]
    out += [FormCurve(name, weights[name], form.kind, form.params, form.floor)
            for name, form in forms.items() if form is not None]
    return tuple(out)


def draw_members(forms: Sequence[FormCurve], n_draws: int, seed: int) -> np.ndarray:
    """Index into `forms` for each posterior draw: counts proportional to the weights (largest
    remainders), in a seeded random order so that no stretch of the chain belongs to one form."""
    weights = np.array([form.weight for form in forms], dtype=float)
    exact = weights / weights.sum() * n_draws
    counts = np.floor(exact).astype(int)
    counts[np.argsort(counts - exact)[: n_draws - counts.sum()]] += 1
    members = np.repeat(np.arange(len(forms)), counts)
    return np.random.default_rng(seed).permutation(members)
