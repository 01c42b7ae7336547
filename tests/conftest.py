"""The tiny run the tests train: a one-layer model, a few prompts and short completions, so a step
takes about a second on one CPU core. As a config (`tiny_config`), as `--set` options of
`scalerl train` (`tiny_set_options`) or of a study (`tiny_study_options`), each followed by the
test's own overrides (later ones win)."""

from __future__ import annotations

import pytest

TINY_SIZES = (
    "model.num_layers=1",
    "model.hidden_size=32",
    "model.num_heads=2",
    "model.warmstart_steps=0",
    "eval_prompts=4",
    "num_val_prompts=8",
    "eval_samples_per_prompt=2",
    "num_train_prompts=50",
    "prompts_per_step=3",
    "generations_per_prompt=3",
    "max_new_tokens=16",
    "thinking_budget_min=6",
    "thinking_budget_max=8",
    "penalty_cache_tokens=8",
)
# length-penalty rewards vary with the length, so even the untrained model gets gradients
LEARNS_FROM_THE_START = ("sampling.length_control=penalty", "optim.lr=1e-2", "warmup_steps=2")
TINY_RUN = (*TINY_SIZES, *LEARNS_FROM_THE_START)


def set_options(assignments) -> list[str]:
    """`--set key=value` for each assignment, in order."""
    return [token for assignment in assignments for token in ("--set", assignment)]


@pytest.fixture(scope="session")
def tiny_config():
    """tiny_config(*overrides): the tiny run's TrainConfig."""
    from scalerl.train.config.train_config import TrainConfig

    return lambda *overrides: TrainConfig().with_overrides([*TINY_RUN, *overrides])


@pytest.fixture(scope="session")
def tiny_set_options():
    """tiny_set_options(*overrides): the tiny run as `--set` options."""
    return lambda *overrides: set_options([*TINY_RUN, *overrides])


@pytest.fixture(scope="session")
def tiny_study_options():
    """tiny_study_options(*overrides): the tiny sizes only, as `--set` options of a study. A study's
    `--set` wins over its variants' knobs, so it must leave the loss, length control, learning rate
    and warm-up to the variants."""
    return lambda *overrides: set_options([*TINY_SIZES, *overrides])


@pytest.fixture
def one_torch_thread():
    """Torch on one thread for the test: tiny matrices run faster so, and far faster when the
    cores are shared."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def ray_session():
    """A local 2-CPU Ray instance shared by the tests of one module."""
    from pipeline_support import start_local_ray

    ray = start_local_ray(num_cpus=2)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    """One folder per fuzz module for the generated log, config and task files."""
    return tmp_path_factory.mktemp("fuzz")
