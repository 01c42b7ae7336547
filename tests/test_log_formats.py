"""The logs trainers write, read with the default columns: trainer_state.json, verl's console and
file loggers, W&B history and chart exports; ambiguous defaults list their candidates."""

import json

import numpy as np
import pytest

from scalerl.errors import InputError
from scalerl.forecast.readers import read_curve


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


# --- transformers / TRL trainer_state.json ---------------------------------------------------------


def trainer_state(log_history):
    return json.dumps({"global_step": 6, "max_steps": 6, "log_history": log_history, "total_flos": 0})


def test_trainer_state_eval_rows_are_read_against_eval_num_tokens(tmp_path):
    history = [{"eval_reward": 0.1, "eval_num_tokens": 0.0, "step": 0, "epoch": 0}]
    for step in range(1, 5):
        history.append({"loss": 0.0, "num_tokens": 50.0 * step, "reward": 0.1 * step, "step": step, "epoch": step / 8})
        history.append({"eval_reward": 0.1 + 0.1 * step, "eval_num_tokens": 50.0 * step, "step": step})
    history.append({"train_runtime": 9.0, "train_loss": 0.1, "step": 4})
    curve = read_curve(write(tmp_path / "trainer_state.json", trainer_state(history)))
    assert (curve.x_name, curve.y_name) == ("eval_num_tokens", "eval_reward")
    np.testing.assert_array_equal(curve.compute, [0, 50, 100, 150, 200])
    np.testing.assert_allclose(curve.reward, [0.1, 0.2, 0.3, 0.4, 0.5])


def test_trainer_state_without_tokens_uses_the_step(tmp_path):
    history = [{"eval_loss": 1.0, "eval_accuracy": 0.2 + 0.1 * s, "step": 10 * s, "epoch": s} for s in range(4)]
    curve = read_curve(write(tmp_path / "trainer_state.json", trainer_state(history)), y="eval_accuracy")
    assert curve.x_name == "step"
    np.testing.assert_array_equal(curve.compute, [0, 10, 20, 30])


def test_trainer_state_with_an_empty_log_history(tmp_path):
    with pytest.raises(InputError, match="empty log_history"):
        read_curve(write(tmp_path / "trainer_state.json", trainer_state([])))


def test_trainer_state_read_as_json_not_as_json_lines(tmp_path):
    """Pretty-printed (indent=2, as transformers writes it): one document over many lines."""
    history = [{"eval_reward": 0.1 * s, "step": s} for s in range(1, 5)]
    text = json.dumps({"log_history": history}, indent=2)
    curve = read_curve(write(tmp_path / "trainer_state.json", text))
    np.testing.assert_array_equal(curve.compute, [1, 2, 3, 4])


# --- verl -------------------------------------------------------------------------------------------

VERL_CONSOLE = """\
(TaskRunner pid=2811) Training Progress:   0%|          | 0/4
(TaskRunner pid=2811) step:0 - val-core/openai/gsm8k/reward/mean@1:np.float64(0.12) - training/global_step:0
(TaskRunner pid=2811) step:1 - actor/entropy:0.91 - perf/total_num_tokens:1000 - training/global_step:1 - critic/score/mean:0.2
(TaskRunner pid=2811) step:2 - actor/entropy:0.88 - perf/total_num_tokens:1200 - training/global_step:2 - critic/score/mean:0.3
(TaskRunner pid=2811) step:2 - val-core/openai/gsm8k/reward/mean@1:np.float64(0.31) - training/global_step:2
(TaskRunner pid=2811) WARNING something unrelated: key:value
(TaskRunner pid=2811) step:3 - actor/entropy:0.8 - perf/total_num_tokens:800 - training/global_step:3
(TaskRunner pid=2811) step:4 - perf/total_num_tokens:1000 - val-core/openai/gsm8k/reward/mean@1:0.45 - training/global_step:4
"""


def test_verl_console_log_with_defaults(tmp_path):
    curve = read_curve(write(tmp_path / "train.log", VERL_CONSOLE), x="training/global_step")
    assert curve.y_name == "val-core/openai/gsm8k/reward/mean@1"
    np.testing.assert_array_equal(curve.compute, [0, 2, 4])
    np.testing.assert_allclose(curve.reward, [0.12, 0.31, 0.45])


def test_verl_per_step_tokens_are_accumulated_with_a_note(tmp_path):
    curve = read_curve(write(tmp_path / "train.log", VERL_CONSOLE))
    assert curve.x_name == "perf/total_num_tokens"
    # running totals 1000, 2200, 3000, 4000 at steps 1-4; step 0 logged no tokens (total 0)
    np.testing.assert_array_equal(curve.compute, [0, 2200, 4000])
    np.testing.assert_allclose(curve.reward, [0.12, 0.31, 0.45])
    assert any("accumulated" in note and "per-step" in note for note in curve.notes)


def test_cumulative_option_accumulates_any_column_and_no_cumulative_keeps_it(tmp_path):
    path = write(tmp_path / "m.csv", "step,tokens,val_pass_rate\n1,10,0.1\n2,10,0.2\n3,20,0.3\n")
    curve = read_curve(path, cumulative=True)
    np.testing.assert_array_equal(curve.compute, [10, 20, 40])
    assert any("--cumulative" in note for note in curve.notes)
    verl = write(tmp_path / "train.log", VERL_CONSOLE)
    with pytest.raises(InputError):  # per-step token counts are not increasing: not one run's compute axis
        read_curve(verl, cumulative=False)


def test_verl_file_logger_step_data_records(tmp_path):
    lines = [
        json.dumps({"step": s, "data": {"val-core/gsm8k/reward/mean@1": 0.1 * s, "training/global_step": s}})
        for s in range(1, 5)
    ]
    curve = read_curve(write(tmp_path / "metrics.jsonl", "\n".join(lines) + "\n"))
    assert (curve.x_name, curve.y_name) == ("training/global_step", "val-core/gsm8k/reward/mean@1")
    np.testing.assert_allclose(curve.reward, [0.1, 0.2, 0.3, 0.4])


def test_verl_flat_file_logger_records(tmp_path):
    lines = [json.dumps({"step": s, "val-core/gsm8k/reward/mean@1": 0.1 * s}) for s in range(1, 5)]
    curve = read_curve(write(tmp_path / "metrics.jsonl", "\n".join(lines) + "\n"))
    np.testing.assert_array_equal(curve.compute, [1, 2, 3, 4])


def test_several_verl_datasets_are_listed(tmp_path):
    lines = [
        json.dumps({"step": s, "val-core/gsm8k/reward/mean@1": 0.1, "val-core/math/reward/mean@1": 0.2})
        for s in range(1, 4)
    ]
    path = write(tmp_path / "m.jsonl", "\n".join(lines))
    with pytest.raises(InputError, match="val-core/gsm8k/reward/mean@1, val-core/math/reward/mean@1.*--y"):
        read_curve(path)
    assert read_curve(path, y="val-core/math/reward/mean@1").reward.tolist() == [0.2, 0.2, 0.2]


def test_two_reward_names_of_one_tier_are_listed_not_picked(tmp_path):
    path = write(tmp_path / "m.csv", "step,reward,train/reward\n1,0.1,0.5\n2,0.2,0.6\n")
    with pytest.raises(InputError, match=r"several reward columns .*\(reward, train/reward\); pass --y NAME"):
        read_curve(path)
    assert read_curve(path, y="train/reward").reward.tolist() == [0.5, 0.6]
    both_tiers = write(tmp_path / "n.csv", "step,reward,eval_reward\n1,0.1,0.5\n2,0.2,0.6\n")
    assert read_curve(both_tiers).y_name == "eval_reward"  # an evaluation column before a training one


def test_text_file_with_no_step_lines_is_an_unknown_format(tmp_path):
    with pytest.raises(InputError, match="unknown log format"):
        read_curve(write(tmp_path / "notes.txt", "hello\nworld\n"))


# --- W&B ---------------------------------------------------------------------------------------------


def test_wandb_history_export_with_eval_slash_names(tmp_path):
    text = "_step,train/global_step,eval/num_tokens,eval/reward,train/loss\n0,0,0,0.1,\n1,1,,,0.5\n2,2,200,0.3,\n4,4,400,0.5,\n"
    curve = read_curve(write(tmp_path / "history.csv", text))
    assert (curve.x_name, curve.y_name) == ("eval/num_tokens", "eval/reward")
    np.testing.assert_array_equal(curve.compute, [0, 200, 400])


def test_wandb_chart_export_one_run_is_read_with_defaults(tmp_path):
    text = (
        '"Step","grpo-7b - eval/reward","grpo-7b - eval/reward__MIN","grpo-7b - eval/reward__MAX"\n'
        '"10","0.1","0.1","0.1"\n"20","0.2","0.2","0.2"\n"30","0.35","0.35","0.35"\n'
    )
    curve = read_curve(write(tmp_path / "chart.csv", text))
    assert (curve.x_name, curve.y_name) == ("Step", "eval/reward")
    np.testing.assert_array_equal(curve.compute, [10, 20, 30])
    np.testing.assert_allclose(curve.reward, [0.1, 0.2, 0.35])


def test_wandb_chart_export_with_two_runs_needs_run(tmp_path):
    text = "Step,run-a - eval/reward,run-b - eval/reward\n10,0.1,0.5\n20,0.2,0.6\n30,0.3,\n"
    path = write(tmp_path / "chart.csv", text)
    with pytest.raises(InputError, match="2 runs in column 'run' \\(run-a, run-b\\).*--run NAME"):
        read_curve(path)
    curve = read_curve(path, run="run-b")
    np.testing.assert_array_equal(curve.compute, [10, 20])
    np.testing.assert_allclose(curve.reward, [0.5, 0.6])


@pytest.mark.parametrize("x_name", ["training/global_step", "train/global_step", "global_step", "Step", "_step"])
def test_step_counters_are_default_x(tmp_path, x_name):
    path = write(tmp_path / "m.csv", f"{x_name},eval_reward\n1,0.1\n2,0.2\n")
    assert read_curve(path).x_name == x_name
