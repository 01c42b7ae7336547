"""A TRL GRPOTrainer run stopped at a checkpoint and resumed with `resume_from_checkpoint`: the
forecast callback rebuilds its curve from the restored log history (R0 stays the first
evaluation), `scalerl fit OUTPUT_DIR` reads the newest checkpoint's trainer_state.json, and the
two TensorBoard folders the two launches wrote are read as one run."""

import json
import time

import numpy as np
import pytest

pytest.importorskip("trl")
pytest.importorskip("tensorboard")

from tiny_grpo import tiny_grpo_trainer  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from scalerl.cli.app import app  # noqa: E402
from scalerl.forecast.curves import sigmoid_reward  # noqa: E402
from scalerl.forecast.live import live_forecast  # noqa: E402
from scalerl.forecast.readers import read_curve  # noqa: E402
from scalerl.integrations.trl_callback import add_forecast_callback  # noqa: E402

CURVE_A, CURVE_B, CURVE_C_MID, CURVE_R0 = 0.7, 2.0, 4.0, 0.1


def step_reward(step: int) -> float:
    return float(sigmoid_reward(max(step, 0), CURVE_A, CURVE_B, CURVE_C_MID, CURVE_R0))


def grpo_trainer(output_dir, max_steps):
    """A tiny GRPOTrainer that evaluates every step, checkpoints every 4 steps and logs to
    TensorBoard; its reward is a known sigmoid of the global step."""

    def progress_reward(completions, trainer_state, **_):
        return [step_reward(trainer_state.global_step)] * len(completions)

    return tiny_grpo_trainer(
        output_dir, progress_reward, max_steps=max_steps, report_to=["tensorboard"], save_strategy="steps", save_steps=4
    )


def stopped_and_resumed(output_dir, compute_axis):
    """(trainer, its forecast callback) of a run trained to step 4, then launched again for 8 steps
    from checkpoint-4, each launch with the forecast callback on `compute_axis`."""
    first = grpo_trainer(output_dir, max_steps=4)
    add_forecast_callback(first, compute_axis=compute_axis, plot=False)
    first.train()
    # TRL names a launch's TensorBoard folder runs/<date>_<host> to the second: a resume within the
    # same second as the first launch (a fast machine) would share its folder, not add one
    time.sleep(1.1)
    resumed = grpo_trainer(output_dir, max_steps=8)
    callback = add_forecast_callback(resumed, compute_axis=compute_axis, plot=False)
    resumed.train(resume_from_checkpoint=str(output_dir / "checkpoint-4"))
    return resumed, callback


@pytest.mark.slow  # two short GRPO trainings: ~20-60 s on two shared cores
def test_resumed_grpo_run_keeps_its_curve_and_reads_as_one_run(tmp_path):
    resumed, callback = stopped_and_resumed(tmp_path, compute_axis="steps")

    evaluations = {entry["step"]: entry["eval_reward"] for entry in resumed.state.log_history if "eval_reward" in entry}
    assert sorted(evaluations) == list(range(9))
    np.testing.assert_allclose([evaluations[step] for step in range(9)], [step_reward(s) for s in range(9)], atol=1e-6)
    assert callback.resumed_points == 5  # steps 0..4 from checkpoint-4's log history
    assert callback.steps == list(range(9))
    assert callback.compute == [float(step) for step in range(9)]
    assert callback.rewards == [evaluations[step] for step in range(9)]
    offline = live_forecast(list(range(9)), [evaluations[step] for step in range(9)], budget=8.0)
    assert callback.last_forecast.fit.r0 == pytest.approx(step_reward(0), abs=1e-6)  # not step 5's reward
    assert callback.last_forecast.a == pytest.approx(offline.a, rel=1e-9)
    assert callback.last_forecast.a == pytest.approx(CURVE_A, abs=0.03)
    assert not callback.warnings

    result = CliRunner().invoke(app, ["fit", str(tmp_path), "--json", "--n-draws", "20"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    newest = str(tmp_path / "checkpoint-8" / "trainer_state.json")
    assert any(newest in warning and "newest of 2 checkpoints, step 8" in warning for warning in payload["warnings"])
    assert payload["n_points"] >= 8

    folders = sorted(path for path in (tmp_path / "runs").iterdir() if path.is_dir())
    assert len(folders) == 2  # one per launch (runs/<date>_<host>)
    curve = read_curve(tmp_path / "runs", x="step", y="eval/reward")
    np.testing.assert_array_equal(curve.compute, np.arange(9.0))
    np.testing.assert_allclose(curve.reward, [step_reward(s) for s in range(9)], atol=1e-6)
    assert any("joined 2 TensorBoard folders as one resumed run" in note for note in curve.notes)


@pytest.mark.slow  # two short GRPO trainings: ~20-60 s on two shared cores
def test_a_resumed_grpo_run_with_eval_on_start_keeps_forecasting_on_the_tokens_axis(tmp_path):
    resumed, callback = stopped_and_resumed(tmp_path, compute_axis="tokens")
    assert resumed.state.num_input_tokens_seen > 0 or callback.compute[-1] > 0
    assert callback.steps == list(range(9)) and callback.compute[0] == 0.0  # eval_on_start: no tokens yet
    assert all(later >= earlier for earlier, later in zip(callback.compute, callback.compute[1:]))
    assert "went backwards" not in (callback.last_refusal or "")
    assert callback.last_forecast is not None and callback.last_forecast.fit.r0 == pytest.approx(
        step_reward(0), abs=1e-6
    )


# --- the same rules on a callback driven by hand -------------------------------------------------------


def _state(step, log_history=(), max_steps=100):
    from types import SimpleNamespace

    return SimpleNamespace(
        global_step=step,
        max_steps=max_steps,
        is_world_process_zero=True,
        num_input_tokens_seen=0,
        log_history=list(log_history),
    )


def test_on_train_begin_rebuilds_the_curve_from_the_log_history():
    from scalerl.integrations.trl_callback import ScaleRLForecastCallback

    history = []
    for step in range(6):
        history.append({"loss": 0.1, "num_tokens": 100.0 * (step + 1), "step": step})
        history.append({"eval_reward": step_reward(step), "eval_num_tokens": 100.0 * (step + 1), "step": step})
    history.append({"forecast_A": 0.5, "step": 5})  # the callback's own earlier entry: not an evaluation
    callback = ScaleRLForecastCallback(compute_axis="tokens", plot=False)
    callback.on_train_begin(None, _state(5, history), None)
    assert callback.resumed_points == 6 and callback.steps == list(range(6))
    assert callback.compute == [100.0 * (step + 1) for step in range(6)]
    assert callback.rewards == [step_reward(step) for step in range(6)]
    assert callback.last_forecast.fit.r0 == pytest.approx(step_reward(0))
    logs = {"eval_reward": step_reward(6), "eval_num_tokens": 700.0}
    callback.on_log(None, _state(6), None, logs=logs)
    assert callback.compute[-1] == 700.0 and logs["forecast_A"] == callback.last_forecast.a
    callback.on_train_begin(None, _state(0), None)  # the callback used again for a new run: it starts empty
    assert callback.steps == [] and callback.rewards == [] and callback.last_forecast is None


@pytest.mark.parametrize("axis", ["tokens", "flops"])
def test_a_resumed_eval_on_start_entry_takes_no_restored_tokens(axis):
    """eval_on_start's step-0 evaluation comes before any token count in the history: it is at 0
    tokens, not at the restored state's num_input_tokens_seen (which made compute go backwards)."""
    import torch

    from scalerl.integrations.trl_callback import ScaleRLForecastCallback

    history = [{"eval_reward": step_reward(0), "step": 0}]
    for step in range(1, 7):
        history.append({"loss": 0.1, "num_tokens": 176.0 * step, "step": step})
        history.append({"eval_reward": step_reward(step), "step": step})
    state = _state(6, history)
    state.num_input_tokens_seen = 1056
    model = torch.nn.Linear(2, 3)  # 9 parameters
    callback = ScaleRLForecastCallback(compute_axis=axis, plot=False)
    callback.on_train_begin(None, state, None, model=model)
    per_token = 1.0 if axis == "tokens" else 6.0 * 9
    assert callback.compute == [per_token * 176.0 * step for step in range(7)]
    assert callback.last_forecast is not None and callback.refused_fits == 0


def test_a_forecast_that_stops_updating_is_said_at_each_evaluation(caplog):
    from scalerl.integrations.trl_callback import STALE_AFTER, ScaleRLForecastCallback

    callback = ScaleRLForecastCallback(compute_axis="tokens", plot=False)
    with caplog.at_level("WARNING", logger="scalerl.integrations.trl_callback"):
        for step in range(8):
            callback.on_log(None, _state(step), None, logs={"num_tokens": 100.0 * (step + 1)})
            callback.on_log(None, _state(step), None, logs={"eval_reward": step_reward(step)})
        assert callback.last_forecast is not None and not caplog.records
        for step in range(8, 8 + STALE_AFTER + 2):  # the token counter restarted: every fit is refused
            callback.on_log(None, _state(step), None, logs={"num_tokens": 10.0 * step})
            callback._tokens_seen = 10.0 * step
            callback.on_log(None, _state(step), None, logs={"eval_reward": step_reward(step)})
    assert len(caplog.records) == 3  # at STALE_AFTER evaluations without a forecast, and each one after
    message = caplog.records[0].getMessage()
    assert f"has not updated for {STALE_AFTER} evaluations" in message and "from step 7" in message
    assert f"has not updated for {STALE_AFTER + 2} evaluations" in caplog.records[-1].getMessage()
    assert len(callback.warnings) == 1
    assert "went backwards" in message


def test_rewards_beyond_one_open_the_range_once(caplog):
    from scalerl.integrations.trl_callback import ScaleRLForecastCallback

    callback = ScaleRLForecastCallback(plot=False)
    with caplog.at_level("WARNING", logger="scalerl.integrations.trl_callback"):
        for step in range(10):
            callback.on_log(None, _state(step), None, logs={"eval_reward": 1.0 + step_reward(step)})
    assert callback.last_forecast is not None
    assert callback.last_forecast.a == pytest.approx(1.0 + CURVE_A, abs=0.05)
    assert len(caplog.records) == 1 and "outside [0, 1]" in caplog.records[0].getMessage()
    bounded = ScaleRLForecastCallback(plot=False, reward_range=(0.0, 1.0))
    for step in range(10):
        bounded.on_log(None, _state(step), None, logs={"eval_reward": 1.0 + step_reward(step)})
    assert bounded.last_forecast is None  # explicit bounds are kept: the fitter refuses rewards above 1
