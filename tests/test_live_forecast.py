"""Live forecast: the torch-free record (scalerl.forecast.live), its equality with an offline
`scalerl fit`, and the trainer writing it into metrics.jsonl during a tiny real run."""

import json
import math

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from scalerl.cli.app import app
from scalerl.errors import ConfigError
from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.live import (
    FORECAST_KEYS,
    check_live_options,
    live_forecast,
    projected_budget,
)
from scalerl.report.live_plot import write_live_plot

FLOPS = np.array([0.0, 1e12, 2e12, 3e12, 4e12, 6e12, 8e12, 1e13, 1.3e13, 1.6e13])
A, B, C_MID, R0 = 0.6, 1.8, 5e12, 0.1


def rising_curve(noise_sd=0.005, seed=1):
    noise = np.random.default_rng(seed).normal(0.0, noise_sd, FLOPS.size)
    noise[0] = 0.0
    return sigmoid_reward(FLOPS, A, B, C_MID, R0) + noise


def test_projected_budget_is_the_rate_so_far_times_max_steps():
    assert projected_budget(3e9, 30, 600) == pytest.approx(6e10)
    assert math.isnan(projected_budget(0.0, 0, 600))


def test_too_few_points_or_a_flat_run_gives_no_forecast():
    reward = rising_curve()
    assert live_forecast(FLOPS[:3], reward[:3], budget=1e13) is None  # R0 + 2 points < 3 parameters
    assert live_forecast(FLOPS, np.full(FLOPS.size, 0.2), budget=1e13) is None  # no learning
    assert live_forecast(FLOPS[:4], reward[:4], budget=1e13) is not None  # R0 + 3 points: first forecast


def test_forecast_recovers_the_known_ceiling_and_predicts_at_the_budget():
    forecast = live_forecast(FLOPS, rising_curve(), budget=3e13)
    assert forecast.a == pytest.approx(A, abs=0.02)
    assert forecast.a_low <= forecast.a <= forecast.a_high
    assert forecast.at_budget == pytest.approx(float(sigmoid_reward(3e13, A, B, C_MID, R0)), abs=0.02)
    # At 3.2 C_mid 11 % of the gain is still ahead: the interval holds the true A, known or not.
    assert forecast.a_low <= A <= forecast.a_high
    assert set(forecast.row()) == set(FORECAST_KEYS) and forecast.row()["forecast_budget"] == 3e13
    assert forecast.short_text().startswith("A 0.")


def test_unknown_budget_gives_nan_at_budget():
    forecast = live_forecast(FLOPS, rising_curve(), budget=math.nan)
    assert math.isnan(forecast.at_budget) and math.isnan(forecast.budget)


def test_live_forecast_equals_offline_scalerl_fit_json(tmp_path):
    reward = rising_curve()
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        "".join(
            json.dumps({"step": i, "flops": float(c), "val_pass_rate": float(r)}) + "\n"
            for i, (c, r) in enumerate(zip(FLOPS, reward))
        )
    )
    budget = 2.5e13
    result = CliRunner().invoke(
        app,
        [
            "fit",
            str(path),
            "--x",
            "flops",
            "--y",
            "val_pass_rate",
            "--json",
            "--n-draws",
            "50",
            "--predict-at",
            str(budget),
        ],
    )
    assert result.exit_code == 0, result.output
    offline = json.loads(result.stdout)
    live = live_forecast(FLOPS, reward, budget=budget, n_draws=50).row()
    assert live["forecast_A"] == offline["params"]["A"]
    assert [live["forecast_A_low"], live["forecast_A_high"]] == offline["intervals"]["A"]
    assert live["forecast_at_budget"] == offline["predictions"][0]["reward"]
    assert live["ceiling_identified"] == offline["ceiling_identified"]


def test_live_plot_is_a_png_written_atomically(tmp_path):
    forecast = live_forecast(FLOPS, rising_curve(), budget=3e13)
    path = write_live_plot(forecast, FLOPS, rising_curve(), tmp_path / "forecast_live.png")
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size[0] > 300
    assert [p.name for p in tmp_path.iterdir()] == ["forecast_live.png"]  # no temporary file left


def test_bad_live_options_are_config_errors():
    with pytest.raises(ConfigError, match="n_draws"):
        check_live_options(5, 0.8, None)
    with pytest.raises(ConfigError, match="budget"):
        check_live_options(50, 0.8, -1.0)
    from scalerl.train.config.train_config import TrainConfig

    with pytest.raises(ConfigError, match="forecast.n_draws"):
        TrainConfig().with_overrides(["n_draws=3"])
    with pytest.raises(ConfigError, match="forecast.budget_flops"):
        TrainConfig().with_overrides(["budget_flops=nan"])


def test_progress_bar_text_carries_the_forecast():
    from scalerl.train.records.progress import RunProgress

    progress = RunProgress(10, enabled=True)
    with progress:
        progress.show_forecast("A 0.412 [0.380, 0.455]")
        progress.update(3, 0.25, 0.3)
        task = progress._progress.tasks[0]
        assert task.fields["rewards"].endswith("forecast A 0.412 [0.380, 0.455]")
        assert task.completed == 3


# ---------------------------------------------------------------- the trainer writes the forecast


def _rising_validation(monkeypatch, *run_dirs):
    """Validation pass rates that rise like a sigmoid in the number of evaluations already logged
    in the run's metrics.jsonl (so a resumed run sees the same sequence); the tiny untrained model
    of the trainer tests stays at 0, which no sigmoid can be fitted to."""
    import scalerl.train.trainer as trainer_module
    from scalerl.train.records.metrics_log import read_rows

    def fake_pass_rate(*_args, **_options):
        evaluations = sum("val_pass_rate" in row for row in read_rows(current[0] / "metrics.jsonl"))
        return {
            "val_pass_rate": float(sigmoid_reward(max(evaluations, 1e-9), 0.5, 2.0, 3.0, 0.05))
            + 0.003 * (evaluations % 2)
        }

    current = [run_dirs[0]]  # the run being trained; the caller switches it
    monkeypatch.setattr(trainer_module, "validation_pass_rates", fake_pass_rate)
    return current


@pytest.mark.slow  # ~8-20 s: trains or runs a study
def test_trainer_writes_forecast_keys_and_live_plot(tiny_config, tmp_path, monkeypatch):
    from scalerl.train.records.metrics_log import read_rows
    from scalerl.train.trainer import train

    _rising_validation(monkeypatch, tmp_path)
    config = tiny_config("max_steps=10", "eval_every=2", "checkpoint_every=10", "torch_threads=1")
    train(config, tmp_path, show_progress=False)
    val_rows = [row for row in read_rows(tmp_path / "metrics.jsonl") if "val_pass_rate" in row]
    assert [row["step"] for row in val_rows] == [0, 2, 4, 6, 8, 10]
    assert all("forecast_A" not in row for row in val_rows[:3])  # R0 + 2 points: skipped silently
    for index, row in enumerate(val_rows[3:], start=3):
        assert set(FORECAST_KEYS) <= set(row)
        points = val_rows[: index + 1]
        budget = row["flops"] / row["step"] * config.max_steps
        expected = live_forecast(
            [p["flops"] for p in points],
            [p["val_pass_rate"] for p in points],
            budget=budget,
            n_draws=config.forecast.n_draws,
        ).row()
        assert row == {**row, **expected}
    assert val_rows[-1]["forecast_budget"] == pytest.approx(val_rows[-1]["flops"])  # at max_steps
    assert (tmp_path / "forecast_live.png").is_file()


def test_trainer_without_live_forecast_writes_no_keys(tiny_config, tmp_path, monkeypatch):
    from scalerl.train.records.metrics_log import read_rows
    from scalerl.train.trainer import train

    _rising_validation(monkeypatch, tmp_path)
    train(
        tiny_config("max_steps=8", "eval_every=2", "forecast.enabled=false", "torch_threads=1"),
        tmp_path,
        show_progress=False,
    )
    assert not any("forecast_A" in row for row in read_rows(tmp_path / "metrics.jsonl"))
    assert not (tmp_path / "forecast_live.png").exists()


def test_fixed_budget_is_used_as_given(tiny_config, tmp_path, monkeypatch):
    from scalerl.train.records.metrics_log import read_rows
    from scalerl.train.trainer import train

    _rising_validation(monkeypatch, tmp_path)
    train(
        tiny_config("max_steps=8", "eval_every=2", "budget_flops=1e12", "torch_threads=1"),
        tmp_path,
        show_progress=False,
    )
    last = read_rows(tmp_path / "metrics.jsonl")[-1]
    assert last["forecast_budget"] == 1e12


class _Crash(Exception):
    pass


@pytest.mark.slow  # ~8-20 s: trains or runs a study
def test_resumed_run_forecasts_from_the_curve_before_the_crash(tiny_config, tmp_path, monkeypatch):
    from scalerl.train.records.metrics_log import read_rows
    from scalerl.train.trainer import train

    whole, crashed = tmp_path / "whole", tmp_path / "crashed"
    current = _rising_validation(monkeypatch, whole, crashed)
    config = tiny_config("max_steps=10", "eval_every=2", "checkpoint_every=4", "torch_threads=1")
    train(config, whole, show_progress=False)

    def crash_at_step_7(row):
        if row["step"] == 7:
            raise _Crash

    current[0] = crashed
    with pytest.raises(_Crash):
        train(config, crashed, show_progress=False, on_row=crash_at_step_7)
    train(config, crashed, resume=True, show_progress=False)  # from the step-4 checkpoint

    def comparable(rows):
        return [{k: v for k, v in row.items() if k != "device_hours"} for row in rows]

    resumed_rows = read_rows(crashed / "metrics.jsonl")
    assert any("forecast_A" in row for row in resumed_rows if row["step"] > 4)
    assert comparable(resumed_rows) == comparable(read_rows(whole / "metrics.jsonl"))
