"""A trainer_state.json written by a real TRL GRPOTrainer (a transformers.Trainer) on the built-in
tiny model, read with the default columns: the evaluation rewards against the tokens seen."""

import json

import numpy as np
import pytest

pytest.importorskip("trl")

from tiny_grpo import tiny_grpo_trainer  # noqa: E402

from scalerl.forecast.readers import read_curve  # noqa: E402


@pytest.mark.slow
def test_checkpoint_trainer_state_is_read_with_defaults(tmp_path):
    def rising_reward(completions, trainer_state, **_):
        return [0.1 + 0.1 * trainer_state.global_step] * len(completions)

    trainer = tiny_grpo_trainer(tmp_path, rising_reward, max_steps=4, save_strategy="steps", save_steps=4)
    trainer.train()

    path = tmp_path / "checkpoint-4" / "trainer_state.json"
    history = json.loads(path.read_text())["log_history"]
    evals = [entry for entry in history if "eval_reward" in entry]
    assert [entry["step"] for entry in evals] == [0, 1, 2, 3, 4]
    curve = read_curve(path)
    assert (curve.x_name, curve.y_name) == ("eval_num_tokens", "eval_reward")
    np.testing.assert_array_equal(curve.compute, [entry["eval_num_tokens"] for entry in evals])
    np.testing.assert_allclose(curve.reward, [entry["eval_reward"] for entry in evals])
    np.testing.assert_allclose(curve.reward, [0.1, 0.2, 0.3, 0.4, 0.5], atol=1e-6)
    assert curve.compute[0] == 0 and np.all(np.diff(curve.compute) > 0)
