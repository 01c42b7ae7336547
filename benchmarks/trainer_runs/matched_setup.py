"""What both trainers of the throughput benchmark share: the optimiser settings, scalerl's config
doing the work of TRL's GRPOTrainer defaults, and the starting model saved once for both.
"""

from __future__ import annotations

from pathlib import Path

LEARNING_RATE = 1e-4


WEIGHT_DECAY = 0.01


GRAD_CLIP = 1.0


# scalerl configured to do the same work as TRL's GRPOTrainer defaults (loss_type "dapo": token-level
# aggregation, symmetric clip 0.2, group-std advantages, no filter, no curriculum, plain truncation).
MATCHED_OVERRIDES = (
    "rl.loss=grpo",
    "rl.grpo_eps=0.2",
    "rl.aggregation=token",
    "rl.advantage_norm=prompt",
    "rl.zero_variance_filter=false",
    "rl.npr=false",
    "sampling.length_control=truncate",
    f"optim.lr={LEARNING_RATE}",
    f"optim.weight_decay={WEIGHT_DECAY}",
    "optim.warmup_steps=0",
    f"optim.grad_clip={GRAD_CLIP}",
)


def scalerl_config(args, model_path: str):
    """The benchmark's TrainConfig: P x G, max new tokens, model path, the chosen recipe."""
    from scalerl.train.config.train_config import TrainConfig

    overrides = [
        f"model.path={model_path}",
        f"sampling.prompts_per_step={args.prompts}",
        f"sampling.generations_per_prompt={args.generations}",
        f"sampling.max_new_tokens={args.max_new_tokens}",
        f"max_steps={args.warmup_steps + args.steps}",
        f"eval_every={args.warmup_steps + args.steps}",
        f"checkpoint_every={args.warmup_steps + args.steps}",
    ]
    if args.recipe == "matched":
        overrides += list(MATCHED_OVERRIDES)
    budget_max = min(48, args.max_new_tokens - 1)
    overrides += [
        f"sampling.thinking_budget_max={budget_max}",
        f"sampling.thinking_budget_min={min(40, budget_max)}",
        f"sampling.penalty_cache_tokens={min(16, args.max_new_tokens)}",
    ]
    return TrainConfig().with_overrides(overrides)


def save_starting_model(args, directory: Path) -> dict:
    """Build the starting policy once (warm-started unless --fresh) and save it for both trainers."""
    import torch

    from scalerl.models.policy import save_model
    from scalerl.train.run_setup import build_policy, build_task, fresh_policy

    torch.set_num_threads(args.threads)
    config = scalerl_config(args, "builtin")
    task = build_task(config)
    model, tokenizer = fresh_policy(config) if args.fresh else build_policy(config, task)
    save_model(model, tokenizer, directory)
    return {
        "start": "fresh" if args.fresh else "warm-started (cached demo warm start)",
        "parameters": sum(p.numel() for p in model.parameters()),
    }
