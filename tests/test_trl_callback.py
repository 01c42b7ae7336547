"""The TRL callback: a real GRPOTrainer on the built-in tiny model, evaluating every step, logs the
live forecast into its log history; the compute axes and the unattached fallback."""

import math
from types import SimpleNamespace

import pytest

pytest.importorskip("trl")

from tiny_grpo import tiny_grpo_trainer  # noqa: E402

from scalerl.errors import ConfigError  # noqa: E402
from scalerl.forecast.curves import sigmoid_reward  # noqa: E402
from scalerl.forecast.live import FORECAST_KEYS, live_forecast  # noqa: E402
from scalerl.integrations.trl_callback import (  # noqa: E402
    ScaleRLForecastCallback,
    add_forecast_callback,
    flops_6nd,
)

# The eval reward the test's reward function returns at global step s: a known sigmoid in steps.
CURVE_A, CURVE_B, CURVE_C_MID, CURVE_R0 = 0.7, 2.0, 4.0, 0.1


def step_reward(step: int) -> float:
    return float(sigmoid_reward(max(step, 0), CURVE_A, CURVE_B, CURVE_C_MID, CURVE_R0))


def _grpo_trainer(output_dir, max_steps, callbacks=()):
    def progress_reward(completions, trainer_state, **_):
        # The untrained model learns nothing in a few steps; a reward that rises with the step
        # makes a curve the forecaster can fit, with a known ceiling to check.
        base = step_reward(trainer_state.global_step)
        return [base + 0.001 * (index % 2) for index in range(len(completions))]

    return tiny_grpo_trainer(
        output_dir, progress_reward, max_steps=max_steps, callbacks=callbacks, max_completion_length=8
    )


def _forecast_entries(log_history):
    return [entry for entry in log_history if "forecast_A" in entry]


@pytest.mark.slow  # ~8-20 s: trains or runs a study
def test_grpo_trainer_logs_the_forecast_through_trainer_log(tmp_path):
    trainer = _grpo_trainer(tmp_path, max_steps=8)
    callback = add_forecast_callback(trainer, compute_axis="steps")
    trainer.train()
    history = trainer.state.log_history
    eval_entries = [entry for entry in history if "eval_reward" in entry]
    assert [entry["step"] for entry in eval_entries] == list(range(9))  # eval_on_start + every step
    assert [entry["eval_reward"] for entry in eval_entries] == pytest.approx(
        [step_reward(step) + 0.0005 for step in range(9)], abs=1e-6
    )
    forecasts = _forecast_entries(history)
    assert [entry["step"] for entry in forecasts] == list(range(3, 9))  # R0 + 3 points from step 3 on
    last = forecasts[-1]
    assert set(FORECAST_KEYS) <= set(last) and "eval_reward" not in last  # its own trainer.log entry
    assert last["forecast_A"] == pytest.approx(CURVE_A, abs=0.03)
    assert last["forecast_budget"] == 8.0  # steps axis: projected to max_steps
    expected = live_forecast(list(range(9)), [e["eval_reward"] for e in eval_entries], budget=8.0).row()
    assert last["forecast_A"] == expected["forecast_A"]
    assert callback.last_forecast.a == last["forecast_A"]
    assert (tmp_path / "forecast_live.png").is_file()


def test_unattached_callback_adds_the_keys_to_the_evaluation_entry(tmp_path):
    trainer = _grpo_trainer(tmp_path, max_steps=5, callbacks=[ScaleRLForecastCallback(plot=False)])
    trainer.train()
    forecasts = _forecast_entries(trainer.state.log_history)
    assert forecasts and all("eval_reward" in entry for entry in forecasts)
    assert not (tmp_path / "forecast_live.png").exists()


def _state(step, max_steps=100, tokens=0):
    return SimpleNamespace(
        global_step=step, max_steps=max_steps, is_world_process_zero=True, num_input_tokens_seen=tokens, log_history=[]
    )


def test_token_axis_reads_trl_num_tokens_and_flops_axis_is_6_n_d():
    model = SimpleNamespace(parameters=lambda: [SimpleNamespace(numel=lambda: 1000)])
    for axis, expected in (("tokens", 5000.0), ("flops", flops_6nd(1000, 5000))):
        callback = ScaleRLForecastCallback(compute_axis=axis, plot=False)
        callback.on_log(None, _state(1), None, logs={"num_tokens": 5000, "loss": 0.1})
        callback.on_log(None, _state(1), None, logs={"eval_reward": 0.2}, model=model)
        assert callback.compute == [expected]
    assert flops_6nd(10, 3) == 180.0


def test_fixed_budget_and_no_nan_in_the_logged_keys():
    callback = ScaleRLForecastCallback(budget=20.0, plot=False)
    for step in range(6):
        logs = {"eval_reward": step_reward(step)}
        callback.on_log(None, _state(step), None, logs=logs)
    assert logs["forecast_budget"] == 20.0
    assert logs["forecast_at_budget"] == pytest.approx(step_reward(20), abs=0.05)
    unknown = ScaleRLForecastCallback(plot=False)
    for step in range(6):  # max_steps unknown (0): no budget, so no forecast_at_budget key at all
        logs = {"eval_reward": step_reward(step)}
        unknown.on_log(None, _state(step, max_steps=0), None, logs=logs)
    assert "forecast_A" in logs and "forecast_at_budget" not in logs
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in logs.values())


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="compute_axis"):
        ScaleRLForecastCallback(compute_axis="hours")
    with pytest.raises(ConfigError, match="n_draws"):
        ScaleRLForecastCallback(n_draws=3)


def test_a_metric_that_never_appears_is_named_once_with_the_eval_keys_seen(caplog):
    callback = ScaleRLForecastCallback(metric="eval_rewards", plot=False)
    with caplog.at_level("WARNING", logger="scalerl.integrations.trl_callback"):
        for step in range(3):
            callback.on_log(None, _state(step), None, logs={"eval_reward": 0.1 * step, "eval_loss": 1.0})
            callback.on_evaluate(None, _state(step), None, metrics={"eval_reward": 0.1, "eval_loss": 1.0})
        callback.on_train_end(None, _state(3), None)
    assert len(callback.warnings) == 1 and len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert "'eval_rewards'" in message and "eval keys seen: eval_loss, eval_reward" in message
    assert "did you mean metric='eval_reward'" in message


def test_refused_fits_are_reported_with_the_fitters_reason(caplog):
    callback = ScaleRLForecastCallback(plot=False)
    with caplog.at_level("WARNING", logger="scalerl.integrations.trl_callback"):
        for step in range(8):  # a flat run: every fit is refused
            callback.on_log(None, _state(step), None, logs={"eval_reward": 0.25})
        callback.on_train_end(None, _state(8), None)
    assert callback.last_forecast is None and callback.refused_fits == 8
    assert len(caplog.records) == 5  # each evaluation from the 4th (REFUSALS_BEFORE_WARNING) on
    assert len(callback.warnings) == 1
    message = caplog.records[-1].getMessage()
    assert "fits of 'eval_reward' so far were refused" in message and callback.last_refusal in message
    assert "flat" in callback.last_refusal or "no learning" in callback.last_refusal


def test_no_warning_when_forecasts_arrive(caplog):
    callback = ScaleRLForecastCallback(plot=False)
    with caplog.at_level("WARNING", logger="scalerl.integrations.trl_callback"):
        for step in range(8):
            callback.on_log(None, _state(step), None, logs={"eval_reward": step_reward(step)})
            callback.on_evaluate(None, _state(step), None, metrics={"eval_reward": step_reward(step)})
        callback.on_train_end(None, _state(8), None)
    assert callback.last_forecast is not None and not caplog.records and not callback.warnings
