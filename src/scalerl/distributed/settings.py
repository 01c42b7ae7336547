"""Settings of the distributed pipeline (mode, staleness bound, actors and their resources).

Kept apart from TrainConfig (the algorithm) so that one TrainConfig runs unchanged under the
synchronous trainer, the asynchronous PipelineRL pipeline or PPO-off-policy-k. Validated on
construction; pure Python.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from scalerl.distributed.staleness import STALENESS_POLICIES
from scalerl.errors import ConfigError

PIPELINE_MODES = ("sync", "async", "ppo-offpolicy")
BACKENDS = ("hf", "vllm")


@dataclass(frozen=True)
class PipelineConfig:
    """How a run is laid out on Ray.

    mode: "sync" (the synchronous reference trainer, no Ray), "async" (PipelineRL: generators
      keep generating while the trainer steps, weights swapped in flight, lag <= max_lag) or
      "ppo-offpolicy" (generate offpolicy_steps x the per-step batch, then offpolicy_steps
      optimiser steps on its slices).
    max_lag: k, the most optimiser steps the trainer may be ahead of a batch's oldest token.
    on_stale: "wait" (generators hold back so no batch ever exceeds k) or "drop" (generators run
      free; the trainer discards batches beyond k).
    ray_address: "" starts a local Ray instance; otherwise joins that cluster ("auto", "ip:6379").
    num_cpus: CPUs for a local Ray instance (0: all of this machine's).
    generator_cpus / trainer_cpus / generator_gpus / trainer_gpus: resources each actor requests.
    torch_threads: intra-op threads per actor (1 each on a 2-core laptop).
    max_generator_restarts: how often Ray restarts a dead generator before the run gives it up.
    weight_poll_seconds: least seconds between two (non-blocking) checks for new weights while
      generating (0: at every decoding step; a check is a local ray.wait, microseconds).
    backend: "hf" (scalerl's own KV-cache decoding loop) or "vllm" (GPU nodes only).
    """

    mode: str = "async"
    max_lag: int = 8
    on_stale: str = "wait"
    num_generators: int = 1
    offpolicy_steps: int = 4
    ray_address: str = ""
    num_cpus: int = 0
    generator_cpus: float = 1.0
    trainer_cpus: float = 1.0
    generator_gpus: float = 0.0
    trainer_gpus: float = 0.0
    torch_threads: int = 1
    max_generator_restarts: int = 3
    weight_poll_seconds: float = 0.0
    backend: str = "hf"

    def __post_init__(self) -> None:
        _check(self.mode in PIPELINE_MODES, "pipeline.mode",
               f"{self.mode!r} is not one of {', '.join(PIPELINE_MODES)}")
        _check(self.on_stale in STALENESS_POLICIES, "pipeline.on_stale",
               f"{self.on_stale!r} is not one of {', '.join(STALENESS_POLICIES)}")
        _check(self.backend in BACKENDS, "pipeline.backend",
               f"{self.backend!r} is not one of {', '.join(BACKENDS)}")
        _check(self.max_lag >= 0, "pipeline.max_lag", f"must be >= 0, got {self.max_lag}")
        for name in ("num_generators", "offpolicy_steps", "torch_threads"):
            _check(getattr(self, name) >= 1, f"pipeline.{name}", f"must be >= 1, got {getattr(self, name)}")
        for name in ("num_cpus", "generator_cpus", "trainer_cpus", "generator_gpus",
                     "trainer_gpus", "max_generator_restarts", "weight_poll_seconds"):
            _check(getattr(self, name) >= 0, f"pipeline.{name}", f"must be >= 0, got {getattr(self, name)}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "PipelineConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        _check(not unknown, f"pipeline.{unknown[0] if unknown else ''}",
               f"unknown setting; known: {', '.join(sorted(known))}")
        return cls(**dict(values))

    @classmethod
    def from_train_config(cls, config: Any, **overrides: Any) -> "PipelineConfig":
        """From a TrainConfig's `pipeline` section when it has one (else defaults), plus overrides."""
        section = getattr(config, "pipeline", None)
        values = dataclasses.asdict(section) if dataclasses.is_dataclass(section) else {}
        values = {k: v for k, v in values.items() if k in {f.name for f in dataclasses.fields(cls)}}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.from_dict(values)


def _check(ok: bool, field_path: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"{field_path}: {message}")


def actor_gpus(device: str, pipeline) -> tuple[float, float]:
    """(GPUs per trainer actor, GPUs per generator actor) that the actors request from Ray.

    Explicit pipeline.trainer_gpus / generator_gpus win. Otherwise a CUDA run (device "cuda...")
    shares one GPU: half for the trainer, the other half split between the generators; a CPU
    run requests none.
    """
    if pipeline.trainer_gpus > 0 or pipeline.generator_gpus > 0:
        return float(pipeline.trainer_gpus), float(pipeline.generator_gpus)
    if str(device).startswith("cuda"):
        return 0.5, 0.5 / pipeline.num_generators
    return 0.0, 0.0
