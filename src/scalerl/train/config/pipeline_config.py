"""The `pipeline` section of a run's config: where the run executes (this process, PipelineRL on
Ray, or PPO-style off-policy rounds), its actors and their resources, the generator backend and how
new weights reach the generators. Torch-free, like the config.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scalerl.checks import require as _require
from scalerl.checks import require_choice as _require_choice
from scalerl.checks import require_non_negative as _require_non_negative
from scalerl.checks import require_positive as _require_positive

PIPELINE_MODES = ("sync", "async", "ppo-offpolicy")
STALE_BATCH_POLICIES = ("wait", "drop")
GENERATOR_BACKENDS = ("hf", "vllm")
WEIGHT_SYNC_METHODS = ("object_store", "broadcast")


@dataclass(frozen=True)
class PipelineConfig:
    """Where the run executes (scalerl.distributed, docs/distributed.md): "sync" (this package's
    synchronous trainer), "async" (PipelineRL on Ray: the trainer at most max_lag steps ahead of
    its data) or "ppo-offpolicy" (offpolicy_steps optimiser steps per generated round);
    actors, their resources and the Ray cluster to join ("" starts a local one)."""

    mode: str = field(
        default="sync", metadata={"help": "sync (this process), async (PipelineRL on Ray) or ppo-offpolicy"}
    )
    max_lag: int = field(default=8, metadata={"help": "async: most steps the trainer may be ahead of its data (k)"})
    on_stale: str = field(
        default="wait", metadata={"help": "async: what to do with a batch older than max_lag: wait or drop"}
    )
    num_generators: int = field(default=1, metadata={"help": "Ray generator actors"})
    offpolicy_steps: int = field(default=4, metadata={"help": "ppo-offpolicy: optimiser steps per generated round (k)"})
    ray_address: str = field(
        default="", metadata={"help": "Ray cluster to join ('auto' or host:port; '': start a local one)"}
    )
    num_cpus: int = field(default=0, metadata={"help": "CPUs of the local Ray instance (0: Ray's default)"})
    generator_cpus: float = field(default=1.0, metadata={"help": "CPUs reserved per generator actor"})
    trainer_cpus: float = field(default=1.0, metadata={"help": "CPUs reserved per trainer actor"})
    num_trainers: int = field(
        default=1,
        metadata={
            "help": "trainer actors training one policy data parallel (torch.distributed: gloo on CPU, NCCL on "
            "GPUs; each back-propagates its share of the batch, gradients summed)"
        },
    )
    generator_gpus: float = field(default=0.0, metadata={"help": "GPUs reserved per generator actor"})
    trainer_gpus: float = field(default=0.0, metadata={"help": "GPUs reserved for the trainer actor"})
    torch_threads: int = field(default=1, metadata={"help": "torch threads per actor"})
    max_generator_restarts: int = field(
        default=3, metadata={"help": "restarts of a generator actor that died before the run fails"}
    )
    # ray.wait costs ~1-2 ms on a busy CPU: ask at most every 10 ms.
    weight_poll_seconds: float = field(
        default=0.01, metadata={"help": "async: how often a generator looks for new weights"}
    )
    backend: str = field(default="hf", metadata={"help": "generator backend: hf (transformers) or vllm"})
    weight_sync: str = field(
        default="object_store",
        metadata={
            "help": "how new weights reach the generators: object_store (ray.put, each generator fetches) or "
            "broadcast (a torch.distributed group: gloo on CPU, NCCL on GPUs; a generator that dies "
            "stops the run)"
        },
    )
    bucket_mb: float = field(default=256.0, metadata={"help": "weight_sync=broadcast: MiB of parameters per bucket"})

    def __post_init__(self) -> None:
        _require_choice(self.mode, "pipeline.mode", PIPELINE_MODES)
        _require_choice(self.on_stale, "pipeline.on_stale", STALE_BATCH_POLICIES)
        _require_choice(self.backend, "pipeline.backend", GENERATOR_BACKENDS)
        _require_choice(self.weight_sync, "pipeline.weight_sync", WEIGHT_SYNC_METHODS)
        _require_positive(self.bucket_mb, "pipeline.bucket_mb")
        _require(
            self.weight_sync == "object_store" or self.backend == "hf",
            "pipeline.weight_sync",
            "broadcast needs the hf generator backend (vllm takes weights from the object store)",
        )
        _require_non_negative(self.max_lag, "pipeline.max_lag")
        for name in ("num_generators", "num_trainers", "offpolicy_steps", "torch_threads"):
            _require_positive(getattr(self, name), f"pipeline.{name}")
        for name in (
            "num_cpus",
            "generator_cpus",
            "trainer_cpus",
            "generator_gpus",
            "trainer_gpus",
            "max_generator_restarts",
            "weight_poll_seconds",
        ):
            _require_non_negative(getattr(self, name), f"pipeline.{name}")
