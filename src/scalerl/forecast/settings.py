"""Every tuning number of the forecaster, each with its reason, in one frozen dataclass.

Absolute tolerances (`noise_floor`, `margin`) are shares of the reward's unit u
(forecast.reward_unit: the range's width, 1 for a pass rate), so a reward logged in percent gets
the answer it gets as a fraction. `SETTINGS` is the instance the library uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ForecastSettings:
    """The forecaster's numbers. Model: R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) plus
    Student-t noise (forecast.posterior); verdicts: forecast.verdict."""

    # --- noise and margins (shares of the reward's unit) ---
    # Guards the noise estimate against zero (an exact fit, a stretch of identical values). Not a
    # binomial minimum: a run evaluates the same prompts every time, and the verl GSM8K runs of the
    # bundled curves scatter by 0.003 around their fits; 0.005 overrode that noise.
    noise_floor: float = 0.002
    # The paper's margin on A (Khatri, Madaan et al., arXiv 2510.13786, section 2): ceilings within
    # it are a tie, a run "plateaued" when A's interval lies within +- margin of A, and the run
    # length is the compute at which the curve comes within it of A.
    margin: float = 0.02
    # The level every verdict is judged at, whatever level intervals are reported at, so the
    # verdict never changes with --level.
    verdict_level: float = 0.8

    # --- the model's priors (forecast.posterior) ---
    # Degrees of freedom of the Student-t noise: heavy enough tails that one wild evaluation does
    # not bend the curve, finite variance.
    student_t_nu: float = 4.0
    # Beta(a, a) on A's share of its range [R0, top]: no mass at either bound, so A is never pinned at 1.
    a_prior_beta: float = 2.0
    # log B ~ normal(log 1.5, 0.8): the paper reports B of 1.6-2.0, RL curves show 0.5-4.
    log_b_prior_mean: float = math.log(1.5)
    log_b_prior_sd: float = 0.8
    # log sigma ~ normal(log sigma_hat, 0.7), sigma_hat the residual sd of the least-squares fit that
    # starts the sampler (forecast.fitting; the successive-difference noise when no residual is left):
    # a factor of 2 either way at one sd.
    log_sigma_prior_sd: float = 0.7
    # B's support: B < 0.1 needs 10^10 x more compute from 10 % to 90 % of its gain, B > 12 is a step.
    b_min: float = 0.1
    b_max: float = 12.0
    # C_mid lies at most this factor outside the observed compute range either side.
    c_mid_range_factor: float = 1e3
    # log C_mid's prior is a mixture at even odds of two uniforms: one on the whole range above,
    # one from this factor below the first fitted evaluation (the decade the paper's grid fit
    # searches) to the top. A run that jumps before its first evaluation and then levels off is
    # otherwise read as a sigmoid's slow tail (small B, C_mid far back) that keeps rising after the
    # run has settled; a hard bound at the decade called a verl run plateaued while it still climbs
    # (docs/forecasting-decisions.md), the mixture lets the data choose.
    c_mid_near_factor: float = 10.0
    c_mid_near_share: float = 0.5
    # With an open reward range A's top is R0 + this many times the observed gain.
    open_range_gain_factor: float = 3.0
    # A's posterior reaches the top of its range (the ceiling is a limit, not an estimate) when its
    # 90 % quantile is within this share of the room top - R0 of the top: the Beta prior keeps the
    # draws just off the bound (a curve rising to 1 put its 90 % quantile at 0.989, 0.016 of its room).
    bound_share: float = 0.02

    # log m ~ normal(0, kappa): the factor on the gain the curve still makes beyond the last fitted
    # evaluation (forecast.posterior). The sigmoid's shape beyond the data is an assumption, and
    # the less of the curve the data cover the more it is one: kappa = kappa_1 / span^2, span the
    # decades of compute the fitted evaluations cover (at least gain_ahead_min_span;
    # fitting.gain_ahead_log_sd). kappa_1 is how far real runs stray from the sigmoid, learned by
    # source on held-out evaluations: `python -m benchmarks.forecast_accuracy` chooses it for each
    # source on the other sources' runs (calibrated first: the 80 % band holds at least 0.72 of
    # their later evaluations at every fraction; then the lowest 80 % interval score).
    gain_ahead_log_sd_at_decade: float = 0.75
    gain_ahead_min_span: float = 0.25

    # --- the sampler (emcee ensemble; python -m benchmarks.sampler_check measures it) ---
    n_walkers: int = 32
    n_steps: int = 300
    n_burn: int = 150
    # Burn-in in this many rounds, stuck walkers regrouped after each: one regrouping left a walker
    # half-way back on a run flat at 0.69 (A's tail at 0.72-0.73 in 4 of 8 seeds); two: none.
    n_burn_rounds: int = 2
    # A walker further below the best log-probability than chi2_q(d) / 2 is stuck, not sampling.
    stuck_quantile: float = 0.99
    # One differential-evolution step in this many has gamma = 1 (ter Braak 2006: a mode jump).
    mode_jump_every: int = 10
    # Least-squares starts behind the sampler's first walkers.
    n_starts: int = 4

    # --- draws ---
    # Posterior draws kept: 200 put the 10 % and 90 % quantiles within about a hundredth of the
    # gain of a long chain's on the bundled curves; 20 is the least that gives an 80 % interval.
    n_draws: int = 200
    min_draws: int = 20
    # Beyond this the draws alone take gigabytes; intervals stopped improving long before.
    max_draws: int = 100_000
    # Noise draws per posterior draw behind a predictive band.
    noise_draws_per_draw: int = 16

    # --- diagnostics of the curve (forecast.diagnostics) ---
    # A fall is a collapse when it exceeds both this many noise sds and this share of the gain.
    collapse_noise_sds: float = 3.0
    collapse_gain_fraction: float = 0.2
    # A run has learned when its best 3-point mean is this many noise sds above R0; it decreases
    # when its last 3-point mean is this many below R0.
    learning_noise_sds: float = 3.0
    # Points before a candidate collapse needed to measure the healthy part's noise on its own.
    min_points_for_noise: int = 5
    # The late stretch (slope test "levelled off?"): the last quarter, at least 5 points.
    late_fraction: float = 0.25
    min_late_points: int = 5

    # --- verdict ---
    # Past this many times the current compute "run N x longer" is no plan.
    far_run_length: float = 100.0
    # The run's end misfits the curve when the mean residual of its late stretch is this many
    # standard errors from 0 (diagnostics.end_misfit): one-sided 0.13 % false alarms under the
    # model, the conventional 3-sigma bar, not fitted to any run.
    end_misfit_z: float = 3.0


SETTINGS = ForecastSettings()
