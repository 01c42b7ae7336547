"""The ScaleRL recipe's algorithm blocks as pure torch functions (never transformers, ray, vllm).

losses (cispo, dapo, grpo, gspo) -> aggregation (prompt, sample, token) -> scalar loss;
advantages, zero-variance filtering, the no-positive-resampling prompt pool, length control and
batch statistics. Config strings resolve through the specs of `scalerl.rl.registry`, which is
torch-free: this package file imports nothing, so the config can read the registry without torch.
Import the blocks from their modules (`scalerl.rl.losses.cispo`, ...).
"""
