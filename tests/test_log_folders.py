"""What `scalerl fit PATH` reads: a folder by what it holds (a scalerl run folder, a TRL
checkpoint or output folder, TensorBoard otherwise); paths that are not regular files (devices,
FIFOs) or are too large are refused unopened; JSON records with a depth limit and no silent
flattened-name collisions; rewards outside [0, 1] fit with an inferred open range."""

import json
import os

import numpy as np
import pytest
from cli_invocation import assert_one_line_error, invoke

from scalerl.errors import InputError
from scalerl.forecast.readers import read_curve
from scalerl.forecast.readers.log_files import MAX_LOG_BYTES

FAST = ("--n-draws", "20")


def trainer_state(folder, rewards, first_step=0):
    """A transformers trainer_state.json in `folder`: one evaluation per step."""
    folder.mkdir(parents=True, exist_ok=True)
    history = [
        {"step": first_step + index, "eval_reward": reward, "epoch": 0.1} for index, reward in enumerate(rewards)
    ]
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": len(rewards), "log_history": history}))
    return folder


# --- folders ---------------------------------------------------------------------------------------


def test_a_checkpoint_folder_is_read_through_its_trainer_state(tmp_path):
    folder = trainer_state(tmp_path / "checkpoint-3", [0.1, 0.2, 0.3])
    curve = read_curve(folder)
    assert (curve.x_name, curve.y_name) == ("step", "eval_reward")
    np.testing.assert_allclose(curve.reward, [0.1, 0.2, 0.3])
    assert curve.notes[0] == f"read {folder / 'trainer_state.json'} (a checkpoint folder)"


def test_an_output_folder_is_read_through_its_newest_checkpoint(tmp_path):
    trainer_state(tmp_path / "checkpoint-9", [0.1, 0.2])
    trainer_state(tmp_path / "checkpoint-10", [0.1, 0.2, 0.3, 0.4])  # step 10 > 9: not the name order
    trainer_state(tmp_path / "checkpoint-x", [0.9])
    (tmp_path / "runs").mkdir()
    curve = read_curve(tmp_path)
    np.testing.assert_allclose(curve.reward, [0.1, 0.2, 0.3, 0.4])
    newest = tmp_path / "checkpoint-10" / "trainer_state.json"
    assert curve.notes[0] == f"read {newest} (the newest of 2 checkpoints, step 10)"


def test_a_scalerl_run_folder_is_read_through_its_metrics(tmp_path):
    rows = [{"step": step, "flops": 1e12 * step, "val_pass_rate": 0.1 * step} for step in range(1, 5)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    trainer_state(tmp_path / "checkpoint-2", [0.9, 0.9])  # metrics.jsonl wins in a run folder
    curve = read_curve(tmp_path)
    assert (curve.x_name, curve.y_name) == ("flops", "val_pass_rate")
    np.testing.assert_allclose(curve.reward, [0.1, 0.2, 0.3, 0.4])


def test_a_folder_with_neither_is_taken_for_tensorboard(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here")
    with pytest.raises(InputError, match="no TensorBoard event files"):
        read_curve(tmp_path)


def test_fit_on_a_checkpoint_folder_says_which_file_it_read(tmp_path):
    steps = np.arange(12)
    rewards = 0.1 + 0.5 / (1 + (4.0 / np.maximum(steps, 1e-9)) ** 2)
    folder = trainer_state(tmp_path / "out" / "checkpoint-12", rewards.tolist())
    result = invoke("fit", tmp_path / "out", "--json", *FAST)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert f"read {folder / 'trainer_state.json'} (the newest, step 12)" in payload["warnings"]


# --- paths that are not logs ---------------------------------------------------------------------------


def test_a_device_is_refused_unopened():
    assert_one_line_error(invoke("fit", "/dev/zero"), "/dev/zero is a device")


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer forever
    assert_one_line_error(invoke("fit", fifo), "pipe.csv is a FIFO")


def test_a_file_over_the_size_limit_is_refused_before_reading(tmp_path, monkeypatch):
    huge = tmp_path / "huge.csv"
    with huge.open("wb") as handle:
        handle.truncate(MAX_LOG_BYTES + 1)  # sparse: no disk used, and never read
    assert_one_line_error(
        invoke("fit", huge), "huge.csv holds 1.0 GiB, over the 1.0 GiB", "SCALERL_MAX_LOG_BYTES=BYTES"
    )
    monkeypatch.setenv("SCALERL_MAX_LOG_BYTES", "1000")
    small = tmp_path / "small.csv"
    small.write_text("step,loss\n" + "".join(f"{i},0.5\n" for i in range(200)))
    assert_one_line_error(invoke("fit", small), "small.csv holds 0.0 GiB, over the 0.0 GiB")
    monkeypatch.setenv("SCALERL_MAX_LOG_BYTES", "lots")
    assert_one_line_error(invoke("fit", small), "SCALERL_MAX_LOG_BYTES='lots' is not a positive number of bytes")


def test_a_sparse_or_binary_text_log_is_refused_from_its_first_bytes(tmp_path):
    """A 900 MB sparse file (NUL bytes, valid UTF-8) is refused from its first 64 KiB (the message
    names the NUL byte found there), not decoded and parsed for minutes."""
    sparse = tmp_path / "sparse.csv"
    with sparse.open("wb") as handle:
        handle.write(b"step,val_pass_rate\n")
        handle.truncate(900 * 2**20)
    assert_one_line_error(
        invoke("fit", sparse), "sparse.csv is not a UTF-8 or UTF-16 text file (a NUL byte at byte 19)"
    )


def test_a_csv_header_with_a_million_columns_is_refused_before_parsing(tmp_path):
    wide = tmp_path / "wide.csv"
    header = ",".join(f"c{i}" for i in range(10**6))
    wide.write_text(header + "\n" + ",".join("1" for _ in range(10**6)) + "\n")
    assert_one_line_error(invoke("fit", wide), "wide.csv has 1000000 columns in its header, more than the 10000")
    fine = tmp_path / "fine.csv"
    fine.write_text(",".join(f"c{i}" for i in range(10_000)) + "\n" + ",".join("1" for _ in range(10_000)) + "\n")
    assert "columns in its header" not in invoke("fit", fine).output


# --- JSON records ------------------------------------------------------------------------------------


def test_a_flattened_name_that_is_also_a_key_is_one_error(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "val/pass_rate": 0.5}\n{"step": 2, "val/pass_rate": 0.5, "val": {"pass_rate": 0.6}}\n')
    assert_one_line_error(invoke("fit", path), "line 2 of", "'val/pass_rate' is both a key and a flattened nested name")
    verl = tmp_path / "verl.jsonl"
    verl.write_text('{"step": 1, "data": {"step": 5, "acc": 0.1}}\n')
    assert_one_line_error(invoke("fit", verl), "line 1 of", "'step' is both a key")


def test_records_nested_deeper_than_the_limit_are_one_error(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"step": 1, "x": ' + '{"a": ' * 40 + "1" + "}" * 40 + "}\n")
    assert_one_line_error(invoke("fit", path), "line 1 of", "nested deeper than 32 levels")
    very_deep = tmp_path / "very_deep.jsonl"
    very_deep.write_text('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    assert_one_line_error(invoke("fit", very_deep), "line 1 of", "not usable JSON")


# --- rewards that are not pass rates ------------------------------------------------------------------


def summed_rewards_csv(path, column="eval_reward"):
    """TRL's eval_reward summed over two reward functions: 1.2 rising to a ceiling of 1.8."""
    steps = np.arange(0, 30)
    rewards = 1.2 + 0.6 / (1 + (6.0 / np.maximum(steps, 1e-9)) ** 2)
    path.write_text(f"step,{column}\n" + "".join(f"{s},{r:.6f}\n" for s, r in zip(steps, rewards)))
    return path


def test_rewards_outside_the_unit_range_fit_with_an_inferred_open_range(tmp_path):
    path = summed_rewards_csv(tmp_path / "trl.csv")
    result = invoke("fit", path, "--json", *FAST)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["params"]["A"] == pytest.approx(1.8, abs=0.03)  # in the reward's own units
    assert any(
        "go from 1.2 to 1.775" in w and "outside [0, 1]: the reward range is inferred as open" in w
        for w in payload["warnings"]
    )
    explicit = json.loads(invoke("fit", path, "--json", "--reward-range", "0", "2", *FAST).stdout)
    assert not any("inferred" in w for w in explicit["warnings"])
    assert_one_line_error(invoke("fit", path, "--reward-range", "0", "1"), "outside the reward range [0, 1]")


def test_pass_rates_keep_the_unit_range(tmp_path):
    steps = np.arange(0, 30)
    path = tmp_path / "p.csv"
    path.write_text(
        "step,val_pass_rate\n" + "".join(f"{s},{0.1 + 0.5 / (1 + (6.0 / max(s, 1e-9)) ** 2):.6f}\n" for s in steps)
    )
    payload = json.loads(invoke("fit", path, "--json", *FAST).stdout)
    assert not any("inferred" in w for w in payload["warnings"])
    explicit = json.loads(invoke("fit", path, "--json", "--reward-range", "0", "1", *FAST).stdout)
    assert payload["params"] == explicit["params"]  # the default is [0, 1] itself


@pytest.mark.parametrize(
    ("columns", "chosen"),
    [
        (["val-core/openai/gsm8k/acc/mean@1"], "val-core/openai/gsm8k/acc/mean@1"),
        (["val-core/gsm8k/reward/mean@1", "val-core/gsm8k/acc/mean@1"], "val-core/gsm8k/reward/mean@1"),
        (["loss", "eval_rewards/accuracy/mean"], "eval_rewards/accuracy/mean"),
        (["reward", "rewards/accuracy/mean"], "reward"),
        (["loss", "rewards/accuracy/mean"], "rewards/accuracy/mean"),
    ],
)
def test_verl_acc_and_trl_per_function_rewards_are_default_columns(tmp_path, columns, chosen):
    path = tmp_path / "log.csv"
    path.write_text(
        "step,"
        + ",".join(columns)
        + "\n"
        + "".join(f"{step}," + ",".join(f"{0.1 * step:.1f}" for _ in columns) + "\n" for step in range(1, 6))
    )
    assert read_curve(path).y_name == chosen


def test_two_trl_reward_functions_are_for_the_user_to_pick(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("step,rewards/format/mean,rewards/accuracy/mean\n1,0.1,0.2\n2,0.2,0.3\n")
    with pytest.raises(InputError, match="several reward columns.*rewards/format/mean, rewards/accuracy/mean"):
        read_curve(path)
