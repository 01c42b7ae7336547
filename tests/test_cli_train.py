"""`scalerl train` / `demo` / `presets`: error handling, a tiny real run, the demo's forecast check."""

import json

import numpy as np
import pytest
from cli_invocation import assert_one_line_error, invoke


@pytest.mark.parametrize(
    ("arguments", "fragments"),
    [
        (["--set", "rl.loss=ppo"], ["rl.loss", "cispo, dapo, grpo, gspo"]),
        (["--set", "rl.los=cispo"], ["unknown config key", "rl.loss"]),
        (["--set", "npr=maybe"], ["rl.npr", "boolean"]),
        (["--set", "max_steps"], ["key=value"]),
        (["--preset", "ppo"], ["unknown preset", "scalerl"]),
        (["--model", "/no/such/model"], ["model.path"]),
        (["--task", "/no/such/task.jsonl"], ["task.name"]),
        (["--resume"], ["no run to resume"]),
        (["--max-steps", "0"], ["max_steps"]),
    ],
)
def test_bad_train_arguments_give_one_error_line(tmp_path, arguments, fragments):
    out = tmp_path / "run"
    result = invoke("train", "--out", out, *arguments)
    assert_one_line_error(result, *fragments)
    assert not (out / "config.json").exists()  # nothing written for a rejected config


def test_bad_jsonl_task_names_the_line(tiny_set_options, tmp_path):
    task = tmp_path / "task.jsonl"
    task.write_text('{"prompt": "1+1=", "answer": "2"}\n{"prompt": "2+2="\n')
    result = invoke("train", "--out", tmp_path / "run", "--task", task, *tiny_set_options("max_steps=1"))
    assert_one_line_error(result, "line 2")


@pytest.mark.slow  # a tiny run, its resume and two reruns: 5-11 s on 2 shared cores
def test_tiny_train_run_then_resume_and_rerun_errors(tiny_set_options, tmp_path):
    out = tmp_path / "run"
    result = invoke("train", "--out", out, "--no-progress", *tiny_set_options("max_steps=1", "eval_every=1"))
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [0, 1]
    assert json.loads((out / "config.json").read_text())["max_steps"] == 1
    again = invoke("train", "--out", out, *tiny_set_options("max_steps=1"))
    assert_one_line_error(again, "already holds a run", "--resume")
    resumed = invoke("train", "--out", out, "--resume", "--max-steps", "2", "--no-progress")
    assert resumed.exit_code == 0, resumed.output
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [0, 1, 2]
    changed = invoke("train", "--out", out, "--resume", "--set", "optim.lr=0.5")
    assert_one_line_error(changed, "only max_steps may change")


def test_a_resume_may_change_how_a_step_runs_but_not_the_recipe():
    """train.* (micro-batching, non-finite skips: the same update) may change on --resume, the recipe may not."""
    from scalerl.train.config.train_config import TrainConfig
    from scalerl.train.run_setup import resume_changes

    saved = TrainConfig().to_dict()
    allowed = TrainConfig().with_overrides(["train.skip_nonfinite_steps=3", "train.micro_batch_size=2", "max_steps=9"])
    assert resume_changes(saved, allowed.to_dict()) == []
    refused = TrainConfig().with_overrides(["optim.lr=0.5", "train.skip_nonfinite_steps=3"])
    assert resume_changes(saved, refused.to_dict()) == [f"optim.lr: {TrainConfig().optim.lr!r} -> 0.5"]


def test_presets_command_lists_recipes_and_ablations():
    result = invoke("presets")
    assert result.exit_code == 0
    for name in ("scalerl", "grpo", "dapo", "gspo", "minimax", "magistral", "rl.loss=dapo"):
        assert name in result.stdout


@pytest.mark.parametrize(("option", "value"), [("--fit-fraction", "1.5"), ("--level", "0")])
def test_demo_rejects_bad_options(tmp_path, option, value):
    assert_one_line_error(invoke("demo", "--out", tmp_path, option, value), option)


def _synthetic_metrics(path, a=0.8, b=2.0, c_mid=4e12, r0=0.1):
    """A run whose validation pass rate follows a known sigmoid in FLOPs (with train rows between)."""
    from scalerl.forecast.curves import sigmoid_reward

    rows = []
    for step in range(0, 61):
        flops = step * 2e11
        row = {"step": step, "flops": flops, "train_reward": 0.0}
        if step % 4 == 0:
            row["val_pass_rate"] = float(sigmoid_reward(flops, a, b, c_mid, r0))
        rows.append(row)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_demo_forecast_fits_the_first_half_and_checks_the_rest(tmp_path):
    from scalerl.train.demo import forecast_from_metrics, report_to_dict, whole_run_line, write_outputs

    metrics = tmp_path / "metrics.jsonl"
    _synthetic_metrics(metrics)
    report = forecast_from_metrics(metrics, fit_fraction=0.5)
    assert report.fit_until_flops == pytest.approx(6e12)
    assert report.fit.r0 == pytest.approx(0.1)
    assert report.fit.a == pytest.approx(0.8, abs=0.02) and report.fit.b == pytest.approx(2.0, rel=0.1)
    assert [p.flops for p in report.held_out] == pytest.approx([6.4e12 + 8e11 * i for i in range(8)])
    assert report.max_abs_error < 0.02 and report.band_coverage == 1.0
    json_path, plot_path = write_outputs(report, tmp_path)
    payload = json.loads(json_path.read_text())
    assert payload["fit"]["params"]["A"] == pytest.approx(report.fit.a)
    assert len(payload["held_out"]) == 8 and payload == report_to_dict(report)
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert np.isfinite(payload["mean_abs_error"])
    # The whole run, as `scalerl fit` sees it, with how far it must go to read A to 0.02.
    whole = payload["fit_all_points"]
    assert whole["n_points"] == 15 and whole["params"]["A"] == pytest.approx(0.8, abs=0.01)
    # The run length per posterior draw, its median reported: within 0.02 of A* = R_l + m (A - R_l)
    # on the sigmoid when that is before the last evaluation, else where the sigmoid is within 0.02 / m of A.
    a, b, c_mid = report.whole.param_draws.T
    m, c_last = report.whole.gain_factor_draws, report.whole.compute.max()
    r_last = 0.1 + (a - 0.1) / (1.0 + (c_mid / c_last) ** b)
    target = r_last + m * (a - r_last) - 0.02
    with np.errstate(invalid="ignore"):
        on_sigmoid = c_mid * ((a - 0.1) / (target - 0.1) - 1.0) ** (-1.0 / b)
    per_draw = np.where(target <= r_last, on_sigmoid, c_mid * ((a - 0.1) / (0.02 / m) - 1.0) ** (1.0 / b))
    assert whole["compute_near_ceiling"]["value"] == pytest.approx(np.quantile(per_draw, 0.5, method="inverted_cdf"))
    line = whole_run_line(report.whole, 0.8)
    assert line.startswith(f"fitted on every evaluation: A = {report.whole.a:.3f} [") and "run length:" in line


def test_scalerl_fit_reads_a_run_metrics_file_directly(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    _synthetic_metrics(metrics)
    result = invoke("fit", metrics, "--x", "flops", "--y", "val_pass_rate", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["n_points"] == 15  # 16 evaluations, the step-0 one sets R0
    assert payload["params"]["R0"] == pytest.approx(0.1)
    assert payload["params"]["A"] == pytest.approx(0.8, abs=0.01)


@pytest.mark.slow  # a 2-step demo: ~4 s
def test_a_demo_too_short_to_fit_trains_says_so_and_exits_0(tiny_set_options, tmp_path):
    out = tmp_path / "demo"
    result = invoke(
        "demo",
        "--out",
        out,
        "--no-progress",
        *tiny_set_options("max_steps=2", "eval_every=1", "eval_samples_per_prompt=1"),
    )
    assert result.exit_code == 0, result.output
    assert "no forecast" in result.stdout and "too few points" in result.stdout
    assert "scalerl demo --out" in result.stdout and not (out / "forecast.json").exists()
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [0, 1, 2]
