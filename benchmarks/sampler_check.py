"""Does the posterior sampler mix? Acceptance and autocorrelation of fit_sigmoid's emcee chain.

For every forecastable run of the bundled curves, fitted on its first 25 % and 50 % of compute and
on all of it, the problem fit_sigmoid samples is rebuilt with the library's own steps and the
sampler is run as fit_sigmoid runs it (32 walkers, 150 burn-in steps, stuck walkers regrouped) but
kept LONG_STEPS steps instead of 150, so that the integrated autocorrelation time tau (emcee,
Goodman & Weare 2010; Sokal's window) can be estimated per parameter. Reported: the mean acceptance
fraction (a healthy ensemble sampler accepts ~0.2-0.5), tau, and the effective samples the library's
150 kept steps give, 32 x 150 / tau.

Does it sample the posterior? The 5 / 50 / 95 % quantiles of A from the library's chain (its 150
kept steps) are compared with those of a long chain of a different sampler on the same posterior,
emcee's stretch move (Goodman & Weare 2010), REFERENCE_KEPT kept steps; and, for the record, with
those of the moves the library used before (differential evolution 0.8 + emcee 3.1.6's
DESnookerMove 0.2, whose proposal does not leave the posterior invariant).

    python -m benchmarks.sampler_check        # ~10 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import emcee
import numpy as np

from benchmarks.bundled_runs import DATA, FORECAST_STATUSES, HERE, cut_mask, load_runs, quick_runs
from benchmarks.common import command_line, write_result
from scalerl.errors import ScaleRLError
from scalerl.forecast.diagnostics import point_noise_sd
from scalerl.forecast.fitting import build_problem, fit_sigmoid, select_points
from scalerl.forecast.posterior import run_sampler
from scalerl.forecast.settings import SETTINGS
from scalerl.forecast.sigmoid_solver import multi_start_fit

FRACTIONS = (0.25, 0.5, 1.0)
LONG_STEPS = 1150  # 1000 kept steps: tau of up to ~20 steps is estimated within ~10 %
N_BURN, N_WALKERS, DEFAULT_NOISE_FLOOR = SETTINGS.n_burn, SETTINGS.n_walkers, SETTINGS.noise_floor
KEPT = SETTINGS.n_steps - N_BURN
REFERENCE_KEPT = 2000
QUANTILES = (0.05, 0.5, 0.95)


def previous_moves() -> list:
    return [(emcee.moves.DEMove(), 0.8), (emcee.moves.DESnookerMove(), 0.2)]


def a_quantiles(chain: np.ndarray) -> list[float]:
    """QUANTILES of A (column 0) over every walker and kept step of an emcee chain (steps, walkers, dims)."""
    return [float(q) for q in np.quantile(chain[..., 0].ravel(), QUANTILES)]


def quantile_gap(quantiles: list[float], reference: list[float]) -> list[float]:
    return [abs(a - b) for a, b in zip(quantiles, reference)]


def sampled_problem(compute, reward):
    """The SolverProblem fit_sigmoid samples, rebuilt with its own steps, the free least-squares
    fit the sampler starts from, and the fit's noise."""
    fit = fit_sigmoid(compute, reward)
    r0, keep, _, _ = select_points(compute, reward, None, None, False, DEFAULT_NOISE_FLOOR)
    fit_compute, fit_reward = compute[keep], reward[keep]
    diff_noise = point_noise_sd(np.concatenate([[r0], fit_reward]), DEFAULT_NOISE_FLOOR)
    problem, _ = build_problem(fit_compute, fit_reward, r0, (0.0, 1.0), "linear", diff_noise, None)
    theta_free, _ = multi_start_fit(problem, SETTINGS.n_starts)
    return problem, theta_free, fit.noise_sd


def check(compute, reward):
    problem, theta_hat, noise_sd = sampled_problem(compute, reward)
    sampler = run_sampler(problem, theta_hat, noise_sd, DEFAULT_NOISE_FLOOR, 0, n_steps=LONG_STEPS)
    chain = sampler.get_chain()
    tau = emcee.autocorr.integrated_time(chain, quiet=True)
    reference = run_sampler(
        problem,
        theta_hat,
        noise_sd,
        DEFAULT_NOISE_FLOOR,
        1,
        n_steps=N_BURN + REFERENCE_KEPT,
        moves=emcee.moves.StretchMove(),
    )
    previous = run_sampler(problem, theta_hat, noise_sd, DEFAULT_NOISE_FLOOR, 0, moves=previous_moves())
    library_a, reference_a = a_quantiles(chain[:KEPT]), a_quantiles(reference.get_chain())
    previous_a = a_quantiles(previous.get_chain())
    return {
        "acceptance": float(np.mean(sampler.acceptance_fraction)),
        "tau": {name: float(t) for name, t in zip(("A", "B", "log_C_mid", "log_sigma"), tau)},
        "effective_kept_samples": float(N_WALKERS * KEPT / np.max(tau)),
        "a_quantiles": {"library": library_a, "reference": reference_a, "previous_moves": previous_a},
        "a_quantile_gap": {
            "library": quantile_gap(library_a, reference_a),
            "previous_moves": quantile_gap(previous_a, reference_a),
        },
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "sampler_check.json")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: a few runs (band_table.quick_runs), fitted on all points only; pair with --out",
    )
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    rows = []
    for run in quick_runs(load_runs(args.data)) if args.quick else load_runs(args.data):
        if run.status not in FORECAST_STATUSES:
            continue
        for fraction in (1.0,) if args.quick else FRACTIONS:
            train = np.ones(run.compute.size, bool) if fraction == 1.0 else cut_mask(run.compute, fraction)
            if train.sum() < 5:
                continue
            try:
                rows.append({"run": run.name, "fraction": fraction, **check(run.compute[train], run.reward[train])})
            except ScaleRLError as error:
                rows.append({"run": run.name, "fraction": fraction, "error": str(error)})
            print(f"{run.name} {fraction}: {rows[-1].get('acceptance', 'refused')}", file=sys.stderr, flush=True)
    ok = [r for r in rows if "acceptance" in r]
    taus = np.array([np.nanmax(list(r["tau"].values())) for r in ok])
    summary = {
        "fits": len(ok),
        "acceptance_median": float(np.median([r["acceptance"] for r in ok])),
        "acceptance_min": float(np.min([r["acceptance"] for r in ok])),
        "tau_max_median": float(np.median(taus)),
        "tau_max_p90": float(np.quantile(taus, 0.9)),
        # A fit whose autocorrelation time emcee cannot estimate (NaN) is left out of these two.
        "effective_kept_samples_median": float(np.nanmedian([r["effective_kept_samples"] for r in ok])),
        "effective_kept_samples_min": float(np.nanmin([r["effective_kept_samples"] for r in ok])),
        "kept_steps": KEPT,
        "walkers": N_WALKERS,
        "a_quantile_gap": {
            "quantiles": list(QUANTILES),
            "reference": f"stretch move, {REFERENCE_KEPT} kept steps",
            **{
                which: {
                    "mean": np.mean([r["a_quantile_gap"][which] for r in ok], axis=0).tolist(),
                    "p90": np.quantile([r["a_quantile_gap"][which] for r in ok], 0.9, axis=0).tolist(),
                }
                for which in ("library", "previous_moves")
            },
        },
    }
    write_result(args.out, {"summary": summary, "rows": rows}, command_line("sampler_check", argv), load_before)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
