"""The GPU path: the vLLM generator and a trainer on another device. Runs only where vLLM and a
CUDA GPU are present and SCALERL_VLLM_MODEL names a local Hugging Face causal LM directory (e.g.
a 0.5 B instruct model); skipped everywhere else. The command to run it is in docs/distributed.md
("Checking the GPU path"):

    SCALERL_VLLM_MODEL=/models/Qwen2.5-0.5B-Instruct pytest -q tests/test_vllm_gpu.py
"""

import os

import pytest

from scalerl.distributed.vllm_generator import vllm_usable

MODEL = os.environ.get("SCALERL_VLLM_MODEL", "")

pytestmark = [
    pytest.mark.skipif(not vllm_usable(), reason="needs the vllm package and a CUDA GPU"),
    pytest.mark.skipif(not MODEL, reason="set SCALERL_VLLM_MODEL to a local HF model directory"),
]


def _config(*extra):
    from scalerl.train.config.train_config import TrainConfig

    return TrainConfig().with_overrides(
        [
            f"model.path={MODEL}",
            "device=cuda",
            "dtype=bfloat16",
            "prompts_per_step=4",
            "generations_per_prompt=4",
            "max_new_tokens=64",
            "eval_prompts=8",
            "eval_samples_per_prompt=1",
            *extra,
        ]
    )


def test_vllm_backend_meets_the_generator_contract_and_loads_published_weights():
    import torch
    from generator_contract import rollout_violations
    from transformers import AutoModelForCausalLM

    from scalerl.distributed.vllm_generator import VllmRolloutBackend
    from scalerl.distributed.weight_sync.object_store import snapshot_weights
    from scalerl.train.batch.packed_rollouts import unpack_rollouts
    from scalerl.train.config.step_recipe import length_control, sampling_settings

    config = _config()
    backend = VllmRolloutBackend(MODEL, sampling_settings(config), length_control(config), gpu_memory_utilization=0.4)
    prompts = ["What is 2 + 3?", "What is 7 * 6?"]
    rollouts = unpack_rollouts(backend.generate(prompts, [0, 1], num_generations=2, seed=0, policy_version=0))
    assert rollout_violations(rollouts, [0, 1], 2, min_version=0, max_version=0) == []
    model = AutoModelForCausalLM.from_pretrained(MODEL, torch_dtype=torch.bfloat16)
    backend.load_snapshot(snapshot_weights(model, 1))  # the trainer's format, bf16 bit-exact
    again = unpack_rollouts(backend.generate(prompts, [0, 1], num_generations=2, seed=0, policy_version=1))
    assert rollout_violations(again, [0, 1], 2, min_version=1, max_version=1) == []
    # same weights, same seeds: the reloaded engine samples what it sampled before
    assert [r.completion_token_ids for r in again] == [r.completion_token_ids for r in rollouts]


def test_async_pipeline_with_vllm_generator_and_a_trainer_on_another_gpu(tmp_path):
    import torch

    from scalerl.distributed.pipeline import run_pipeline
    from scalerl.distributed.settings import PipelineConfig

    two_gpus = torch.cuda.device_count() >= 2
    share = 1.0 if two_gpus else 0.5  # one GPU each, or halves of the only one
    pipeline = PipelineConfig(
        mode="async", max_lag=2, backend="vllm", num_generators=1, generator_gpus=share, trainer_gpus=share
    )
    result = run_pipeline(
        _config("max_steps=3", "eval_every=3", "checkpoint_every=3"), pipeline, tmp_path / "run", log=lambda _m: None
    )
    assert result.steps_done == 3 and result.generator_failures == 0
    assert all(0 <= row["policy_lag_max"] <= 2 for row in result.rows[1:])
    assert (tmp_path / "run" / "checkpoints" / "step_00000003").is_dir()
