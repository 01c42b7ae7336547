"""Scale-out of the trainer on Ray: asynchronous PipelineRL and PPO-off-policy-k.

The only package of scalerl that imports ray (or vllm); both are imported inside the modules
that need them, so `import scalerl.distributed` stays light and torch-free. The staleness rule
lives in `scalerl.distributed.staleness` (pure Python).
"""
