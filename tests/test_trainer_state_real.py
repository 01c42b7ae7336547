"""A trainer_state.json written by a real TRL GRPOTrainer (a transformers.Trainer) on the built-in
tiny model, read with the default columns: the evaluation rewards against the tokens seen."""

import json

import numpy as np
import pytest

pytest.importorskip("trl")

from scalerl.forecast.readers import read_curve  # noqa: E402


@pytest.mark.slow
def test_checkpoint_trainer_state_is_read_with_defaults(tmp_path):
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from scalerl.models.policy import TinyModelSpec, build_tiny_model

    torch.manual_seed(0)
    model, tokenizer = build_tiny_model(
        TinyModelSpec(num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_positions=64), seed=0
    )
    tokenizer.padding_side = "left"
    prompts = Dataset.from_dict({"prompt": [f"{a}+{b}=" for a in range(4) for b in range(4)]})

    def rising_reward(completions, trainer_state, **_):
        return [0.1 + 0.1 * trainer_state.global_step] * len(completions)

    config = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=4,
        per_device_train_batch_size=4,
        num_generations=2,
        per_device_eval_batch_size=4,
        generation_batch_size=4,
        max_completion_length=4,
        beta=0.0,
        learning_rate=1e-3,
        use_vllm=False,
        use_cpu=True,
        bf16=False,
        fp16=False,
        report_to=[],
        save_strategy="steps",
        save_steps=4,
        eval_strategy="steps",
        eval_steps=1,
        eval_on_start=True,
        logging_steps=1,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[rising_reward],
        args=config,
        train_dataset=prompts,
        eval_dataset=prompts.select(range(4)),
        processing_class=tokenizer,
    )
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
