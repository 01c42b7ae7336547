"""Fit orchestration for `fit`, `compare` and `plot`: fit a curve in its window, the points it left
out, the power law's view beside the sigmoid's payload, how far a figure extends, and a spinner.
"""

from __future__ import annotations

import contextlib

import numpy as np
from rich.console import Console

from scalerl.cli.fit_inputs import check_reward_range
from scalerl.errors import FitError, InputError
from scalerl.escaping import for_rich
from scalerl.forecast.readers import Curve

MAX_PLOT_EXTRAPOLATION = 100.0


def fit_curve(curve: Curve, *, fit_limit=None, **fit_options):
    """Fit the points of `curve` up to `fit_limit`; return (result, held_out, not_fitted) for plots."""
    from scalerl.forecast.fitting import fit_sigmoid

    if fit_options.get("reward_range") is not None:
        check_reward_range(curve, fit_options["reward_range"])
    in_window = np.ones(len(curve), dtype=bool) if fit_limit is None else curve.compute <= fit_limit
    if not np.any(in_window):
        raise InputError(f"no point of {curve.source} has {curve.x_name} <= {fit_limit:g}")
    options = {key: value for key, value in fit_options.items() if value is not None or key == "reward_range"}
    result = fit_sigmoid(curve.compute[in_window], curve.reward[in_window], **options)
    held_out = (curve.compute[~in_window], curve.reward[~in_window])
    not_fitted = points_not_fitted(curve.compute[in_window], curve.reward[in_window], result)
    return result, held_out, not_fitted


def points_not_fitted(window_compute, window_reward, result) -> tuple[np.ndarray, np.ndarray]:
    """Points inside the fit window that the fit did not use (R0 point, warm-up, after collapse)."""
    unused = ~np.isin(window_compute, result.compute)
    return window_compute[unused], window_reward[unused]


def fit_power_law_view(curve: Curve, fit_limit, options: dict, predict_at, payload: dict) -> dict | None:
    """Fit the power law on the sigmoid's window and add its view to `payload["power_law"]`.

    A power law that cannot be fitted is not an error of the sigmoid fit: it becomes a warning.
    """
    from scalerl.forecast.power_law import fit_power_law
    from scalerl.report import console as report

    keep = np.ones(len(curve), dtype=bool) if fit_limit is None else curve.compute <= fit_limit
    try:
        result = fit_power_law(
            curve.compute[keep],
            curve.reward[keep],
            min_compute=options["min_compute"],
            reward_range=options["reward_range"],
            loss=options["loss"],
        )
    except FitError as error:
        payload["warnings"].append(f"power law not fitted: {error}")
        return None
    payload["power_law"] = report.power_law_payload(result, predict_at, options["level"])
    return payload["power_law"]


def extrapolation_target(predict_at: list[float], compute_to_target: float | None, max_compute: float) -> float | None:
    """How far a `fit --plot` figure extends: the furthest prediction or the target's compute.

    A target compute more than MAX_PLOT_EXTRAPOLATION times beyond the data is left out: a curve
    drawn over many empty decades hides the data.
    """
    candidates = [value for value in predict_at if value > 0]
    if compute_to_target is not None and compute_to_target <= MAX_PLOT_EXTRAPOLATION * max_compute:
        candidates.append(compute_to_target)
    return max(candidates) if candidates else None


def progress(json_output: bool, message: str):
    """A spinner on stderr for people; nothing when the output is JSON for programs."""
    if json_output:
        return contextlib.nullcontext()
    return Console(stderr=True).status(for_rich(message))
