"""What the Ray pipeline tests share: a local Ray instance (no dashboard, no driver logs, one thread
per worker), a silent log, and the synchronous reference run trained as the actors train."""

import pytest
import torch


def start_local_ray(num_cpus: int):
    """The ray module after `ray.init` on `num_cpus` local CPUs (the test is skipped without ray);
    the caller shuts it down."""
    ray = pytest.importorskip("ray")
    ray.init(
        num_cpus=num_cpus,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}},
    )
    return ray


def quiet(_message) -> None:
    """A pipeline log that prints nothing."""


def train_on_one_thread(config, out) -> None:
    """The synchronous trainer's run of `config` into `out` with one torch thread, as each actor
    runs: the same float reduction order, so k = 0 can match it exactly."""
    from scalerl.train.trainer import train

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(config, out, show_progress=False)
    finally:
        torch.set_num_threads(threads)


def sync_and_pipeline_runs(config, pipeline, out):
    """`config` trained by the synchronous trainer (one thread) into out/sync and by the pipeline
    `pipeline` into out/pipe, the pipeline's final weights kept: (pipeline result, synchronous
    metrics rows, pipeline metrics rows)."""
    from scalerl.distributed.pipeline import run_pipeline
    from scalerl.train.records.metrics_log import read_rows

    train_on_one_thread(config, out / "sync")
    result = run_pipeline(config, pipeline, out / "pipe", keep_weights=True, log=quiet)
    return result, read_rows(out / "sync" / "metrics.jsonl"), read_rows(out / "pipe" / "metrics.jsonl")


def assert_weights_match_checkpoint(arrays, weights_file) -> None:
    """Each array of `arrays` (name -> numpy array) equals the checkpoint tensor of that name."""
    from safetensors.torch import load_file

    checkpoint = load_file(str(weights_file))
    for name, array in arrays.items():
        assert torch.allclose(torch.tensor(array), checkpoint[name], atol=1e-6), name
