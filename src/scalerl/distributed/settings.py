"""Settings of the distributed pipeline: the `pipeline` section of TrainConfig (defined with the
rest of the run's config in scalerl.train.config.train_config, so `--set pipeline.max_lag=4` works and the
settings are saved in config.json), and the GPUs the actors request.
"""

from __future__ import annotations

from scalerl.train.config.train_config import (  # noqa: F401 - re-exported for the pipeline's users
    GENERATOR_BACKENDS as BACKENDS,
)
from scalerl.train.config.train_config import (
    PipelineConfig,
)


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
