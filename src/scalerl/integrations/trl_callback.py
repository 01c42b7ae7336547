"""Live ScaleRL forecast for TRL's trainers (GRPOTrainer, RLOOTrainer, ...) and any transformers
Trainer: a `TrainerCallback` that refits R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)
(arXiv 2510.13786) at every evaluation and logs the forecast back through the trainer's loggers.

    trainer = GRPOTrainer(model=..., args=GRPOConfig(..., eval_strategy="steps", eval_steps=50,
                          eval_on_start=True), train_dataset=..., eval_dataset=...)
    add_forecast_callback(trainer, metric="eval_reward", compute_axis="tokens")
    trainer.train()   # logs forecast_A, forecast_A_low/high, forecast_at_budget, ceiling_identified

How the forecast reaches the loggers: GRPOTrainer adds its eval reward to the logs inside
`Trainer.log`, so the callback reads it in `on_log`; callbacks cannot call the trainer, so the
forecast waits for `on_evaluate` (which `Trainer.evaluate` calls right after that log) and is then
logged with `trainer.log(...)`: it lands in `state.log_history` and in every reporting integration
(W&B, TensorBoard, ...) like any metric. A callback not attached to a trainer (plain
`callbacks=[ScaleRLForecastCallback()]`) instead adds the keys to the evaluation's own log entry
(`state.log_history` and the callbacks after it see them; integrations registered before it do not).

A resumed run (`trainer.train(resume_from_checkpoint=...)`) restores `state.log_history` before
`on_train_begin`: the curve is rebuilt from its evaluations there, so R0 stays the run's first
evaluation; on a tokens or FLOPs axis each restored evaluation takes the tokens its history had
counted by then (the step-0 evaluation of eval_on_start: none). When evaluations keep arriving but
no fit succeeds for STALE_AFTER of them, the callback warns at each further evaluation that
`last_forecast` is stale, with the fitter's reason; fits refused before any forecast are said at
each evaluation too, from the REFUSALS_BEFORE_WARNING-th on.
Whenever the fit's verdict (forecast.verdict: plateaued, still rising, collapsed, ...) changes,
its sentence goes to the log; `last_forecast.verdict` holds it.
"""

from __future__ import annotations

import difflib
import logging
import math
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from scalerl.errors import ConfigError
from scalerl.forecast.live import (
    LIVE_N_DRAWS,
    LIVE_PLOT_NAME,
    LiveForecast,
    check_live_options,
    live_forecast,
    projected_budget,
)
from scalerl.report.live_plot import write_live_plot

COMPUTE_AXES = ("steps", "tokens", "flops")
TOKEN_LOG_KEYS = ("num_tokens", "eval_num_tokens")  # TRL's cumulative token count, train / eval logs
DEFAULT_METRIC = "eval_reward"  # GRPOTrainer's mean evaluation reward
REFUSALS_BEFORE_WARNING = 4  # a sigmoid of 3 free parameters: fits may fail on fewer points, say why after that
STALE_AFTER = 3  # evaluations without a new forecast before saying the last one is stale
AUTO_RANGE = "auto"  # [0, 1] while every reward lies in it, else open (TRL sums its reward functions)

logger = logging.getLogger(__name__)


def flops_6nd(n_parameters: int, tokens: float) -> float:
    """Kaplan et al. (arXiv 2001.08361) training cost: C = 6 N D for N parameters and D tokens, all
    a Trainer exposes (scalerl.train.flops.training_flops adds the attention term from the shape)."""
    return 6.0 * float(n_parameters) * float(tokens)


def finite_items(record: dict[str, Any]) -> dict[str, Any]:
    """The record without NaN values (loggers such as JSON writers reject them)."""
    return {key: value for key, value in record.items() if not (isinstance(value, float) and not math.isfinite(value))}


class ScaleRLForecastCallback(TrainerCallback):
    """Refit the ScaleRL sigmoid on (compute, `metric`) at every log that carries `metric`.

    metric: the logged evaluation reward (default GRPOTrainer's `eval_reward`).
    compute_axis: "steps" (global step), "tokens" (TRL's `num_tokens`, else
        `state.num_input_tokens_seen`) or "flops" (6 N x tokens, N the model's parameters).
    budget: compute (same axis) at which to predict the reward; None projects the compute at
        `max_steps` from the rate so far.
    plot: keep `<output_dir>/forecast_live.png` up to date (written atomically).
    reward_range: the rewards' range (bounds the ceiling); None for unbounded rewards; "auto"
        (default): [0, 1] while every reward lies in it, else open, said once in a warning.
    """

    def __init__(
        self,
        metric: str = DEFAULT_METRIC,
        compute_axis: str = "steps",
        *,
        budget: float | None = None,
        n_draws: int = LIVE_N_DRAWS,
        level: float = 0.8,
        reward_range: tuple[float, float] | str | None = AUTO_RANGE,
        plot: bool = True,
        trainer: Any = None,
    ):
        if compute_axis not in COMPUTE_AXES:
            raise ConfigError(f"compute_axis must be one of {', '.join(COMPUTE_AXES)}, got {compute_axis!r}")
        check_live_options(n_draws, level, budget)
        if isinstance(reward_range, str) and reward_range != AUTO_RANGE:
            raise ConfigError(f"reward_range must be (low, high), None or {AUTO_RANGE!r}, got {reward_range!r}")
        self.metric, self.compute_axis, self.budget = metric, compute_axis, budget
        self.n_draws, self.level, self.reward_range, self.plot = int(n_draws), level, reward_range, plot
        self.trainer = trainer
        self.compute: list[float] = []
        self.rewards: list[float] = []
        self.steps: list[int] = []
        self.last_forecast: LiveForecast | None = None
        self._tokens_seen = 0.0
        self._pending: dict[str, Any] | None = None
        self.seen_keys: set[str] = set()  # every key logged so far (to name them when `metric` never shows)
        self.last_refusal: str | None = None  # why the latest fit was refused
        self.refused_fits = 0
        self.warnings: list[str] = []  # each warning given (once each)
        self._warned: set[str] = set()
        self.evaluations_since_forecast = 0  # evaluations whose fit was refused since the last forecast
        self.resumed_points = 0  # evaluations rebuilt from a resumed run's log history

    def attach(self, trainer: Any) -> ScaleRLForecastCallback:
        """Log forecasts through `trainer.log` (all its loggers); returns self."""
        self.trainer = trainer
        return self

    # --- compute axis -------------------------------------------------------------------------

    def _compute_now(self, state, model) -> float:
        return self._compute_at(state.global_step, state, model)

    def _compute_at(self, step: int, state, model, tokens: float | None = None) -> float:
        """Compute at `step`: the step, or the tokens seen by then (`tokens`: as the log history
        counted them; else the logged count, else the trainer state's) and 6 N tokens."""
        if self.compute_axis == "steps":
            return float(step)
        if tokens is None:
            tokens = self._tokens_seen or float(getattr(state, "num_input_tokens_seen", 0) or 0)
        if self.compute_axis == "tokens":
            return tokens
        n_parameters = sum(p.numel() for p in model.parameters()) if model is not None else 0
        return flops_6nd(n_parameters, tokens)

    def _budget(self, state, compute_now: float) -> float:
        if self.budget is not None:
            return float(self.budget)
        return projected_budget(compute_now, state.global_step, state.max_steps)

    # --- events -------------------------------------------------------------------------------

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        """Start the curve from the evaluations in `state.log_history`: none for a new run (a
        callback used for an earlier `train()` starts again), a resumed run's restored from its
        checkpoint, each entry replayed as `on_log` saw it, then one fit."""
        if not state.is_world_process_zero:
            return
        history = [entry for entry in (getattr(state, "log_history", None) or []) if isinstance(entry, dict)]
        self.compute, self.rewards, self.steps, self._tokens_seen = [], [], [], 0.0
        self.last_forecast, self.evaluations_since_forecast, self.resumed_points = None, 0, 0
        for entry in history:
            self._count_tokens(entry)
            self.seen_keys.update(entry)
            value = entry.get(self.metric)
            if isinstance(value, (int, float)) and isinstance(entry.get("step"), int):
                # the tokens counted up to this entry, never the restored state's (step 0 has seen none)
                compute = self._compute_at(entry["step"], state, model, tokens=self._tokens_seen)
                self._record(entry["step"], compute, float(value))
        self.resumed_points = len(self.rewards)
        if self.compute:
            self.last_forecast = self._fit(state, self.compute[-1])

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        logs = logs if logs is not None else {}
        self._count_tokens(logs)
        self.seen_keys.update(logs)
        value = logs.get(self.metric)
        if not isinstance(value, (int, float)) or not state.is_world_process_zero:
            return
        record = self._add_point(args, state, model, float(value))
        if record is None:
            return
        if self.trainer is not None:
            self._pending = record
        else:  # no trainer to log through: extend this evaluation's own log entry
            logs.update(record)
            if state.log_history and state.log_history[-1].get(self.metric) == value:
                state.log_history[-1].update(record)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self.seen_keys.update(metrics or {})
        if not self.rewards and state.is_world_process_zero:
            self._warn_once("metric", self._missing_metric_message())
        self._flush()

    def on_step_end(self, args, state, control, **kwargs):
        self._flush()  # a metric logged outside an evaluation

    def on_train_end(self, args, state, control, **kwargs):
        self._flush()
        if not state.is_world_process_zero:
            return
        if not self.rewards:
            self._warn_once("metric", self._missing_metric_message())
        elif self.last_forecast is None:
            self._warn_once("refused", self._refused_message())

    # --- saying why no forecast shows up --------------------------------------------------------

    def _warn_once(self, kind: str, message: str) -> None:
        if kind in self._warned:
            return
        self._warned.add(kind)
        self.warnings.append(message)
        logger.warning(message)

    def _warn_each_time(self, kind: str, message: str) -> None:
        """Log `message` now (a fit not made is said at every evaluation); `warnings` keeps the first
        of each kind."""
        if kind not in self._warned:
            self._warned.add(kind)
            self.warnings.append(message)
        logger.warning(message)

    def _missing_metric_message(self) -> str:
        eval_keys = sorted(key for key in self.seen_keys if key.startswith("eval_"))
        shown = eval_keys or sorted(self.seen_keys)
        close = difflib.get_close_matches(self.metric, shown, n=1, cutoff=0.6)
        hint = f"; did you mean metric={close[0]!r}?" if close else ""
        seen = ", ".join(shown) if shown else "none yet"
        return (
            f"scalerl forecast: no logged metric is named {self.metric!r}, so there is no forecast; "
            f"{'eval keys' if eval_keys else 'keys'} seen: {seen}{hint}"
        )

    def _stale_message(self) -> str:
        last_step = self.steps[-1 - self.evaluations_since_forecast] if self.steps else None
        return (
            f"scalerl forecast: the forecast of {self.metric!r} has not updated for "
            f"{self.evaluations_since_forecast} evaluations (last_forecast is from step {last_step}); "
            f"the latest reason: {self.last_refusal}"
        )

    def _refused_message(self) -> str:
        return (
            f"scalerl forecast: all {self.refused_fits} fits of {self.metric!r} so far were refused, "
            f"so there is no forecast; the latest reason: {self.last_refusal}"
        )

    def _refused(self, reason: str) -> None:
        self.refused_fits += 1
        self.last_refusal = reason
        if self.last_forecast is None and len(self.rewards) >= REFUSALS_BEFORE_WARNING:
            self._warn_each_time("refused", self._refused_message())

    def _flush(self) -> None:
        if self._pending is not None and self.trainer is not None:
            record, self._pending = self._pending, None
            self.trainer.log(record)

    def _count_tokens(self, logs: dict[str, Any]) -> None:
        for key in TOKEN_LOG_KEYS:
            if isinstance(logs.get(key), (int, float)):
                self._tokens_seen = max(self._tokens_seen, float(logs[key]))

    def _record(self, step: int, compute: float, value: float) -> None:
        """Add the point (compute, value) of the evaluation at `step` (the same step again replaces it)."""
        if self.steps and self.steps[-1] == step:  # the same evaluation logged twice
            self.compute[-1], self.rewards[-1] = compute, value
        else:
            self.steps.append(step)
            self.compute.append(compute)
            self.rewards.append(value)

    def _fit_range(self) -> tuple[float, float] | None:
        """The reward range of the fits: as given, or for "auto" [0, 1] unless a reward leaves it."""
        if self.reward_range != AUTO_RANGE:
            return self.reward_range
        if all(0.0 <= reward <= 1.0 for reward in self.rewards):
            return (0.0, 1.0)
        self._warn_once(
            "range",
            f"scalerl forecast: {self.metric!r} went outside [0, 1] (to "
            f"{min(self.rewards):.4g} .. {max(self.rewards):.4g}): the reward range is open, "
            "the ceiling A in the reward's own units; pass reward_range=(low, high) for known bounds",
        )
        return None

    def _fit(self, state, compute_now: float) -> LiveForecast | None:
        """The live forecast of the points so far, or None (the reason passed to `_refused`)."""
        if any(later < earlier for earlier, later in zip(self.compute, self.compute[1:])):
            self._refused(f"the {self.compute_axis} axis went backwards (a restarted counter?)")
            return None
        return live_forecast(
            self.compute,
            self.rewards,
            budget=self._budget(state, compute_now),
            n_draws=self.n_draws,
            level=self.level,
            reward_range=self._fit_range(),
            on_refused=self._refused,
        )

    def _add_point(self, args, state, model, value: float) -> dict[str, Any] | None:
        """Record (compute, value), refit; the forecast's log keys, or None when not fittable yet."""
        compute_now = self._compute_now(state, model)
        self._record(state.global_step, compute_now, value)
        forecast = self._fit(state, compute_now)
        if forecast is None:
            if self.last_forecast is not None:
                self.evaluations_since_forecast += 1
                if self.evaluations_since_forecast >= STALE_AFTER:
                    self._warn_each_time("stale", self._stale_message())
            return None
        self.evaluations_since_forecast = 0
        if self.last_forecast is None or self.last_forecast.verdict.kind != forecast.verdict.kind:
            logger.info("scalerl forecast at step %s: %s", state.global_step, forecast.verdict.text)
        self.last_forecast = forecast
        if self.plot and args is not None and getattr(args, "output_dir", None):
            Path(args.output_dir).mkdir(parents=True, exist_ok=True)
            write_live_plot(
                forecast,
                self.compute,
                self.rewards,
                Path(args.output_dir) / LIVE_PLOT_NAME,
                level=self.level,
                x_label=self.compute_axis,
                y_label=self.metric,
            )
        return finite_items(forecast.row())


def add_forecast_callback(trainer: Any, **options: Any) -> ScaleRLForecastCallback:
    """Create the callback (options as ScaleRLForecastCallback), attach it to `trainer` and register
    it with `trainer.add_callback`; returns it (its `last_forecast` holds the latest fit)."""
    callback = ScaleRLForecastCallback(**options).attach(trainer)
    trainer.add_callback(callback)
    return callback
