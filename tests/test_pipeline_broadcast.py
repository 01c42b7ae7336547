"""The Ray pipeline with pipeline.weight_sync = broadcast (a gloo group of the trainer and the
generator actors): k = 0 still reproduces the synchronous trainer, and the lag bound holds."""

import pytest
from pipeline_support import assert_weights_match_checkpoint, quiet, sync_and_pipeline_runs

from scalerl.distributed.observability import strip_timing_columns
from scalerl.distributed.settings import PipelineConfig
from scalerl.errors import ConfigError
from scalerl.train.records.metrics_log import read_rows


def _pipeline(**overrides):
    return PipelineConfig(**{"num_cpus": 2, "weight_sync": "broadcast", "bucket_mb": 0.05, **overrides})


def test_weight_sync_settings_are_checked():
    with pytest.raises(ConfigError, match="pipeline.weight_sync"):
        PipelineConfig(weight_sync="nccl")
    with pytest.raises(ConfigError, match="pipeline.bucket_mb"):
        PipelineConfig(bucket_mb=0)
    with pytest.raises(ConfigError, match="pipeline.weight_sync"):
        PipelineConfig(weight_sync="broadcast", backend="vllm")


@pytest.mark.slow
def test_k0_broadcast_pipeline_reproduces_the_synchronous_trainer(tiny_config, ray_session, tmp_path):
    config = tiny_config("max_steps=3", "eval_every=3", "checkpoint_every=3")
    # 0.05 MiB buckets: the tiny model's weights go in several buckets per version
    result, sync_rows, pipe_rows = sync_and_pipeline_runs(config, _pipeline(mode="async", max_lag=0), tmp_path)
    assert [r["step"] for r in pipe_rows] == [0, 1, 2, 3]
    assert [strip_timing_columns(r) for r in pipe_rows] == [strip_timing_columns(r) for r in sync_rows]
    assert_weights_match_checkpoint(
        result.final_weights.arrays, tmp_path / "sync" / "checkpoints" / "step_00000003" / "model.safetensors"
    )


@pytest.mark.slow
def test_async_broadcast_run_keeps_the_lag_bound(tiny_config, ray_session, tmp_path):
    from scalerl.distributed.pipeline import run_pipeline

    config = tiny_config("max_steps=5", "eval_every=5", "checkpoint_every=5")
    result = run_pipeline(config, _pipeline(mode="async", max_lag=1), tmp_path, log=quiet)
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert result.steps_done == 5 and [r["step"] for r in rows] == [0, 1, 2, 3, 4, 5]
    assert all(0 <= r["policy_lag_max"] <= 1 for r in rows[1:])
