"""Settings of the distributed pipeline: the `pipeline` section of TrainConfig (defined with the
rest of the run's config in scalerl.train.config.pipeline_config, so `--set pipeline.max_lag=4` works and the
settings are saved in config.json), the device the actors train on, and the GPUs they request.
"""

from __future__ import annotations

import dataclasses

from scalerl.train.config.pipeline_config import (  # noqa: F401 - re-exported for the pipeline's users
    GENERATOR_BACKENDS as BACKENDS,
)
from scalerl.train.config.pipeline_config import (
    PipelineConfig,
)


def with_cluster_device(config, cluster_gpus: float):
    """`config` with device=auto made cuda when the Ray cluster has GPUs (`cluster_gpus`, Ray's
    "GPU" resource: this machine's for a local cluster), else cpu; another device as it is. The
    actors then request GPUs by `actor_gpus` and the saved config names the device the run used."""
    if config.device != "auto":
        return config
    return dataclasses.replace(config, device="cuda" if cluster_gpus > 0 else "cpu")


def cluster_gpus() -> float:
    """GPUs of the running Ray cluster (its "GPU" resource, 0 when it has none)."""
    import ray

    return float(ray.cluster_resources().get("GPU", 0.0))


def actor_gpus(device: str, pipeline: PipelineConfig) -> tuple[float, float]:
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
