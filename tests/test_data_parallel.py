"""Data parallel with torch.distributed: 2 gloo ranks, each back-propagating half of the batch,
make the same update as 1 rank with the whole batch (torch's own launcher starts the ranks)."""

import copy
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from test_micro_batches import _model, _rollouts

from scalerl.train.batch.packed_rollouts import pack_rollouts
from scalerl.train.config.step_recipe import step_recipe
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.parallel.data_parallel import shard_rows
from scalerl.train.train_step import build_scheduler, train_step

TESTS = Path(__file__).resolve().parent
OPTIONS = [
    "rl.loss=cispo",
    "rl.aggregation=prompt",
    "model.fp32_head=false",
    "optim.grad_clip=1e9",
    "warmup_steps=0",
    "train.micro_batch_size=3",
]
WORKER = """
import sys
import torch
sys.path.insert(0, {tests!r})
from scalerl.train.batch.packed_rollouts import pack_rollouts
from scalerl.train.config.step_recipe import step_recipe
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.parallel.data_parallel import init_from_environment
from scalerl.train.train_step import build_scheduler, train_step
from test_micro_batches import _model, _rollouts

rank, world_size = init_from_environment("cpu")
assert world_size == 2
model = _model()
rollouts = pack_rollouts(_rollouts(_model()))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
stats = train_step(model, optimizer, build_scheduler(optimizer, 0), rollouts,
                   step_recipe(TrainConfig().with_overrides({options!r})))
torch.save({{"parameters": [p.detach() for p in model.parameters()], "loss": stats.loss,
            "entropy": stats.entropy, "grad_norm": stats.grad_norm}}, {out!r} + f".rank{{rank}}")
"""


def test_shards_cover_the_batch_once():
    assert [shard_rows(7, rank, 3) for rank in range(3)] == [slice(0, 3), slice(3, 5), slice(5, 7)]
    assert [shard_rows(1, rank, 2) for rank in range(2)] == [slice(0, 1), slice(1, 1)]


@pytest.mark.slow
def test_two_gloo_ranks_with_half_the_batch_each_equal_one_rank_with_all_of_it(tmp_path):
    out = str(tmp_path / "result")
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(WORKER.format(tests=str(TESTS), options=OPTIONS, out=out)))
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone", str(script)],
        start_new_session=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    base = _model()
    rollouts = pack_rollouts(_rollouts(base))
    single = copy.deepcopy(base)
    optimizer = torch.optim.SGD(single.parameters(), lr=0.1)
    stats = train_step(
        single,
        optimizer,
        build_scheduler(optimizer, 0),
        rollouts,
        step_recipe(TrainConfig().with_overrides(OPTIONS[:-1])),
    )
    for rank in range(2):
        result = torch.load(f"{out}.rank{rank}")
        assert result["loss"] == pytest.approx(stats.loss, abs=1e-12)
        assert result["entropy"] == pytest.approx(stats.entropy, rel=1e-12)
        assert result["grad_norm"] == pytest.approx(stats.grad_norm, rel=1e-9)
        moved = [
            float((after - before).detach().abs().max())
            for after, before in zip(single.parameters(), base.parameters())
        ]
        assert max(moved) > 1e-4  # the step did move the weights
        for expected, got in zip(single.parameters(), result["parameters"]):
            torch.testing.assert_close(got, expected.detach(), rtol=0, atol=1e-9)
