"""TRL's GRPOTrainer in the throughput benchmark (transformers generate, no vLLM) on the same
model, prompts and batch as scalerl's run: its steps timed, or profiled after the warm-up.
"""

from __future__ import annotations

import tempfile
import time

from benchmarks.trainer_runs.matched_setup import GRAD_CLIP, LEARNING_RATE, WEIGHT_DECAY, scalerl_config
from benchmarks.trainer_runs.measures import peak_rss_mib, profile_summary, throughput


def trl_dataset(args):
    """The task's training prompts as a datasets.Dataset of {"prompt", "answer"}."""
    from datasets import Dataset

    from scalerl.train.run_setup import build_task

    task = build_task(scalerl_config(args, "builtin"))
    return task, Dataset.from_dict({"prompt": [e.prompt for e in task.train], "answer": [e.answer for e in task.train]})


def run_trl(args, profiler=None) -> dict:
    """TRL's GRPOTrainer (transformers generate, no vLLM) on the same model, prompts and batch."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from scalerl.tasks.types import TaskExample

    torch.set_num_threads(args.threads)
    task, dataset = trl_dataset(args)
    step_tokens: list[int] = []
    end_times: list[float] = []
    rewards_seen: list[float] = []

    def verifier_reward(prompts, completions, completion_ids, answer, **_):
        step_tokens.append(sum(len(ids) for ids in completion_ids))
        rewards = [
            task.reward(text, TaskExample(prompt=p, answer=a)) for p, text, a in zip(prompts, completions, answer)
        ]
        rewards_seen.extend(rewards)
        return rewards

    class StepClock(TrainerCallback):
        def on_step_end(self, *_, **__):
            end_times.append(time.perf_counter())
            if profiler is not None and len(end_times) == args.warmup_steps:
                profiler.enable()

    batch_size = args.prompts * args.generations
    with tempfile.TemporaryDirectory(prefix="bench_trl_") as output_dir:
        grpo_args = GRPOConfig(
            output_dir=output_dir,
            max_steps=args.warmup_steps + args.steps,
            per_device_train_batch_size=batch_size,
            num_generations=args.generations,
            generation_batch_size=batch_size,
            gradient_accumulation_steps=1,
            max_completion_length=args.max_new_tokens,
            temperature=1.0,
            top_p=1.0,
            beta=0.0,
            num_iterations=1,
            epsilon=0.2,
            loss_type="dapo",
            scale_rewards="group",
            learning_rate=LEARNING_RATE,
            weight_decay=WEIGHT_DECAY,
            max_grad_norm=GRAD_CLIP,
            lr_scheduler_type="constant",
            warmup_steps=0,
            use_vllm=False,
            use_cpu=True,
            bf16=False,
            fp16=False,
            report_to=[],
            save_strategy="no",
            eval_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            dataloader_num_workers=0,
            seed=0,
        )
        model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
        tokenizer.padding_side = "left"
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[verifier_reward],
            args=grpo_args,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[StepClock()],
        )
        trainer.train()
        if profiler is not None:
            profiler.disable()
    result = throughput(end_times, step_tokens, args.warmup_steps, batch_size)
    result.update(
        trainer="trl",
        trl_version=_version("trl"),
        mean_train_reward=sum(rewards_seen) / max(1, len(rewards_seen)),
        torch_threads=torch.get_num_threads(),
        peak_rss_mib=peak_rss_mib(),
    )
    return result


TRL_PHASES = (
    "_generate",
    "generate",
    "_calculate_rewards",
    "compute_loss",
    "_get_per_token_logps_and_entropies",
    "run_backward",
)


def profile_trl(args) -> dict:
    """cProfile of TRL's steps after the warm-up (switched on by the step callback)."""
    import cProfile

    profiler = cProfile.Profile()
    result = run_trl(args, profiler=profiler)
    return {**profile_summary(profiler, args.steps, TRL_PHASES), "wall_seconds": result["wall_seconds"]}


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)
