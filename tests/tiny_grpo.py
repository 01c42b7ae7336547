"""A real TRL GRPOTrainer on the built-in tiny model, evaluating every step on 4 of its 16
arithmetic prompts, rewarded by a function of the trainer state the test chooses."""

from collections.abc import Callable, Sequence


def tiny_grpo_trainer(output_dir, reward: Callable, *, max_steps: int, callbacks: Sequence = (), **config_overrides):
    """GRPOTrainer(model = a 1-layer tiny model seeded 0, reward_funcs=[reward]) with CPU float32,
    no vLLM, beta 0, batches of 4 prompts x 2 generations, completions of 4 tokens, evaluation on
    start and every step, no reports and no checkpoints unless `config_overrides` (GRPOConfig
    fields) say otherwise."""
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
    settings = dict(
        output_dir=str(output_dir),
        max_steps=max_steps,
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
        save_strategy="no",
        eval_strategy="steps",
        eval_steps=1,
        eval_on_start=True,
        logging_steps=1,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=GRPOConfig(**{**settings, **config_overrides}),
        train_dataset=prompts,
        eval_dataset=prompts.select(range(4)),
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )
