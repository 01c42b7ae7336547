"""The Ray pipeline on a local 2-CPU Ray instance with the tiny model: k = 0 equivalence with the
synchronous trainer, bounded lag, in-flight weight swaps, PPO-off-policy-k lags, a generator
killed mid-run, Ctrl-C then resume. One Ray instance serves the whole module."""

import copy
import subprocess
import sys
import time

import pytest
import torch
from pipeline_support import assert_weights_match_checkpoint, quiet, sync_and_pipeline_runs

from scalerl.distributed.observability import PIPELINE_COLUMNS, strip_timing_columns
from scalerl.distributed.settings import PipelineConfig
from scalerl.errors import ConfigError
from scalerl.train.records.metrics_log import TRAIN_COLUMNS, read_rows


def _pipeline(**overrides):
    return PipelineConfig(**{"num_cpus": 2, **overrides})


@pytest.mark.slow
def test_importing_the_package_and_the_cpu_path_never_import_vllm():
    code = (
        "import sys, scalerl.distributed, scalerl.distributed.pipeline, "
        "scalerl.distributed.actors, scalerl.distributed.offpolicy; "
        "assert 'vllm' not in sys.modules, 'vllm imported'; "
        "assert 'ray' not in sys.modules, 'ray imported at import time'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pipeline_config_validation_names_the_field():
    with pytest.raises(ConfigError, match="pipeline.mode"):
        PipelineConfig(mode="fast")
    with pytest.raises(ConfigError, match="pipeline.max_lag"):
        PipelineConfig(max_lag=-1)
    with pytest.raises(ConfigError, match="pipeline.on_stale"):
        PipelineConfig(on_stale="skip")


@pytest.mark.slow
def test_k0_pipeline_reproduces_the_synchronous_trainer(tiny_config, ray_session, tmp_path):
    config = tiny_config("max_steps=4", "eval_every=2", "checkpoint_every=2")
    result, sync_rows, pipe_rows = sync_and_pipeline_runs(config, _pipeline(mode="async", max_lag=0), tmp_path)

    assert [r["step"] for r in pipe_rows] == [0, 1, 2, 3, 4]
    assert [strip_timing_columns(r) for r in pipe_rows] == [strip_timing_columns(r) for r in sync_rows]
    assert all(r["policy_lag_max"] == 0 for r in pipe_rows[1:])
    # the trainer actor writes the validation samples as the synchronous trainer does
    sync_samples = (tmp_path / "sync" / "completions.jsonl").read_text()
    assert sync_samples and (tmp_path / "pipe" / "completions.jsonl").read_text() == sync_samples
    assert_weights_match_checkpoint(
        result.final_weights.arrays, tmp_path / "sync" / "checkpoints" / "step_00000004" / "model.safetensors"
    )
    assert (tmp_path / "pipe" / "checkpoints" / "step_00000004" / "model.safetensors").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("weight_sync", ["object_store", "broadcast"])
def test_k0_lora_pipeline_reproduces_the_synchronous_lora_trainer(tiny_config, ray_session, tmp_path, weight_sync):
    """LoRA on the Ray pipeline: the generators hold the starting weights and receive the adapter
    only, by either transport; at k = 0 the run equals the synchronous LoRA run row for row and
    its checkpoint holds the same adapter."""
    pytest.importorskip("peft")
    from safetensors.torch import load_file

    from scalerl.models.lora import ADAPTER_WEIGHTS_FILE

    config = tiny_config("model.lora_r=4", "model.lora_alpha=8", "max_steps=3", "eval_every=3", "checkpoint_every=3")
    pipeline = _pipeline(mode="async", max_lag=0, weight_sync=weight_sync)
    result, sync_rows, pipe_rows = sync_and_pipeline_runs(config, pipeline, tmp_path)

    assert [strip_timing_columns(r) for r in pipe_rows] == [strip_timing_columns(r) for r in sync_rows]
    assert result.final_weights.arrays and all("lora_" in name for name in result.final_weights.arrays)
    step = "step_00000003"
    sync_adapter = load_file(str(tmp_path / "sync" / "checkpoints" / step / ADAPTER_WEIGHTS_FILE))
    pipe_adapter = load_file(str(tmp_path / "pipe" / "checkpoints" / step / ADAPTER_WEIGHTS_FILE))
    assert sync_adapter.keys() == pipe_adapter.keys()
    for name, tensor in sync_adapter.items():
        assert torch.allclose(pipe_adapter[name], tensor, atol=1e-6), name
    assert any(float(t.abs().max()) > 0 for n, t in pipe_adapter.items() if "lora_B" in n)  # it trained


@pytest.mark.slow
def test_two_data_parallel_trainer_actors_train_like_one(tiny_config, ray_session, tmp_path):
    """pipeline.num_trainers = 2: two trainer actors, each back-propagating half of every batch,
    gradients summed by torch.distributed (gloo), make the same run as one trainer actor with
    the whole batch: every row and the final weights equal up to float32 summation order."""
    from scalerl.distributed.pipeline import run_pipeline

    config = tiny_config("max_steps=3", "eval_every=3", "checkpoint_every=3")
    shared = {"mode": "async", "max_lag": 0, "trainer_cpus": 0.5, "generator_cpus": 0.5}
    one = run_pipeline(config, _pipeline(**shared), tmp_path / "one", keep_weights=True, log=quiet)
    lines = []
    two = run_pipeline(
        config, _pipeline(**shared, num_trainers=2), tmp_path / "two", keep_weights=True, log=lines.append
    )
    assert any("data parallel on 2 trainer actors" in line for line in lines)

    one_rows = [strip_timing_columns(r) for r in read_rows(tmp_path / "one" / "metrics.jsonl")]
    two_rows = [strip_timing_columns(r) for r in read_rows(tmp_path / "two" / "metrics.jsonl")]
    assert [r["step"] for r in two_rows] == [0, 1, 2, 3]
    assert any(r.get("grad_norm", 0) > 0 for r in two_rows)  # the steps trained
    for first, second in zip(one_rows, two_rows):
        assert first.keys() == second.keys()
        for key, value in first.items():
            if isinstance(value, float):
                assert second[key] == pytest.approx(value, rel=1e-5, abs=1e-6), (first["step"], key)
            else:
                assert second[key] == value, (first["step"], key)
    for name, array in one.final_weights.arrays.items():
        assert torch.allclose(torch.tensor(two.final_weights.arrays[name]), torch.tensor(array), atol=1e-6), name
    with pytest.raises(ConfigError, match="pipeline.num_trainers"):
        PipelineConfig(num_trainers=0)


@pytest.mark.slow
def test_in_flight_update_tags_later_tokens_with_the_new_version(tiny_config, ray_session):
    from scalerl.distributed.actors import GeneratorWorker, remote_class
    from scalerl.distributed.weight_sync.object_store import WeightRegistry, publish_weights, snapshot_weights

    config = tiny_config("sampling.length_control=truncate")
    registry = remote_class(WeightRegistry, num_cpus=0, max_concurrency=100).remote()
    worker = GeneratorWorker(config, 0, registry)
    new_model = copy.deepcopy(worker.model)
    with torch.no_grad():
        for parameter in new_model.parameters():
            parameter.add_(0.05)
    publish_weights(registry, worker.model, 0)
    worker.subscriber.sync(worker.model, 0)
    calls = []

    def hook():  # hook call n runs before decoding step n; version 1 is published before step 4
        calls.append(len(calls) + 1)
        if len(calls) == 4:
            publish_weights(registry, new_model, 1)
            deadline = time.time() + 30  # the long poll's answer travels back asynchronously
            while (version := worker.subscriber.maybe_update(worker.model)) is None:
                assert time.time() < deadline, "the new version never arrived"
                time.sleep(0.01)
            return version
        return worker.subscriber.maybe_update(worker.model)

    from scalerl.train.batch.packed_rollouts import unpack_rollouts
    from scalerl.train.step_rollouts import generate_step

    rollouts = unpack_rollouts(
        generate_step(
            worker.model,
            worker.tokenizer,
            worker.task,
            worker.recipe,
            [0, 1],
            torch_generator=torch.Generator().manual_seed(0),
            policy_version=0,
            weight_update_hook=hook,
        )
    )
    assert any(r.num_completion_tokens > 4 for r in rollouts), "no sequence outlived the swap"
    for rollout in rollouts:  # tokens sampled before the swap keep version 0, later ones get 1
        versions = rollout.token_policy_versions
        assert versions == (0,) * min(4, len(versions)) + (1,) * max(0, len(versions) - 4)
    swapped = snapshot_weights(worker.model, 1).arrays
    assert all((swapped[name] == array).all() for name, array in snapshot_weights(new_model, 1).arrays.items())
    assert worker.subscriber.num_swaps == 2 and worker.subscriber.sync_seconds > 0
    assert "vllm" not in sys.modules


@pytest.mark.slow
def test_async_run_with_a_killed_generator_finishes_within_the_lag_bound(tiny_config, ray_session, tmp_path):
    from scalerl.distributed.pipeline import run_pipeline

    killed = []

    def kill_a_generator_mid_batch(row, session):
        busy = session.busy_generators()
        if busy and not killed:
            killed.append(busy[0])
            ray_session.kill(session.generators[busy[0]], no_restart=False)

    max_lag = 2
    # longer sequences: a batch takes long enough for the kill to land in the middle of one
    config = tiny_config("max_steps=6", "eval_every=3", "checkpoint_every=6", "max_new_tokens=48")
    pipeline = _pipeline(mode="async", max_lag=max_lag, num_generators=2, generator_cpus=0.5)
    lines = []
    result = run_pipeline(config, pipeline, tmp_path, on_row=kill_a_generator_mid_batch, log=lines.append)
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert killed, "no generator was ever caught in the middle of a batch"
    assert result.steps_done == 6 and result.generator_failures == 1
    assert result.dropped_batches == 0  # under "wait" the dispatch gate leaves nothing to drop
    assert any(f"generator {killed[0]} died" in line and "Ray restarts it" in line for line in lines)
    assert [r["step"] for r in rows] == list(range(7))
    assert [r["samples"] for r in rows] == [9 * step for step in range(7)]
    for row in rows[1:]:
        assert set(TRAIN_COLUMNS) | set(PIPELINE_COLUMNS) <= set(row)
        assert 0 <= row["policy_lag_mean"] <= row["policy_lag_max"] <= max_lag
        assert 0.0 <= row["generator_idle_fraction"] <= 1.0
        assert 0.0 <= row["trainer_idle_fraction"] <= 1.0
        assert row["weight_sync_seconds"] > 0


@pytest.mark.slow
def test_ppo_offpolicy_k_lags_and_ctrl_c_then_resume(tiny_config, ray_session, tmp_path):
    from scalerl.distributed.pipeline import run_pipeline

    def interrupt_at_step_2(row, _session):
        if row["step"] == 2:
            raise KeyboardInterrupt

    config = tiny_config("max_steps=4", "eval_every=2", "checkpoint_every=10")
    pipeline = _pipeline(mode="ppo-offpolicy", offpolicy_steps=2)
    first = run_pipeline(config, pipeline, tmp_path, on_row=interrupt_at_step_2, log=quiet)
    assert first.interrupted and first.steps_done == 2
    assert (tmp_path / "checkpoints" / "step_00000002").is_dir()
    second = run_pipeline(config, pipeline, tmp_path, resume=True, log=quiet)
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert not second.interrupted and [r["step"] for r in rows] == [0, 1, 2, 3, 4]
    # slice j of a round of k = 2 batches is trained j versions after it was generated
    assert [r["policy_lag_max"] for r in rows[1:]] == [0, 1, 0, 1]
    assert [r["samples"] for r in rows] == [0, 9, 18, 27, 36]
    # the second slice of a round waits for no generation: the generator sat idle
    assert rows[2]["generator_idle_fraction"] == pytest.approx(1.0)


@pytest.mark.slow
def test_scalerl_train_routes_to_the_pipeline(tiny_set_options, ray_session, tmp_path):
    import json

    from typer.testing import CliRunner

    from scalerl.cli.app import app

    sets = tiny_set_options("eval_every=2")
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "train",
            "--out",
            str(tmp_path / "run"),
            "--pipeline",
            "async",
            "--max-lag",
            "1",
            "--generators",
            "1",
            "--max-steps",
            "2",
            "--no-progress",
            *sets,
        ],
    )
    assert result.exit_code == 0, result.output
    rows = read_rows(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert all(r["policy_lag_max"] <= 1 for r in rows[1:])
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["pipeline"]["mode"] == "async" and saved["pipeline"]["max_lag"] == 1
    bad = runner.invoke(app, ["train", "--out", str(tmp_path / "bad"), "--pipeline", "fast", *sets])
    assert bad.exit_code == 2 and "pipeline.mode" in bad.stderr


@pytest.mark.slow  # ~8-20 s: trains or runs a study
def test_async_driver_rows_carry_the_live_forecast_of_the_synchronous_trainer(tiny_config, tmp_path):
    """The run state (the async driver's, the synchronous trainer's) adds the live forecast keys
    of the validation curve so far to each validation row."""
    from scalerl.forecast.curves import sigmoid_reward
    from scalerl.train.run_state import RunState, add_live_forecast

    config = tiny_config("max_steps=20")
    books = RunState(config, tmp_path, num_train_prompts=8)
    flops = [0.0] + [1e9 * step for step in range(2, 21, 2)]
    rewards = [0.1] + [float(sigmoid_reward(c, 0.7, 2.0, 8e9, 0.1)) for c in flops[1:]]
    for step, (c, r) in enumerate(zip(flops, rewards)):
        books.append({"step": 2 * step, "flops": c, "val_pass_rate": r})
    last = books.rows[-1]
    assert last["forecast_A"] == pytest.approx(0.7, abs=0.02)
    expected = {"step": 20, "flops": flops[-1], "val_pass_rate": rewards[-1]}
    (tmp_path / "sync").mkdir()
    add_live_forecast(config, tmp_path / "sync", list(zip(flops, rewards)), expected, 20)
    assert {key: last[key] for key in expected} == expected
    assert "forecast_A" not in books.rows[2]  # three points: nothing to fit yet
    books.close()
