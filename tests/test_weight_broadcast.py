"""Weights by collective (scalerl.distributed.weight_sync.collective): the bucket plan, and weights a generator
actor receives by gloo broadcast are bit-identical to the trainer actor's."""

from __future__ import annotations

import pytest
from pipeline_support import start_local_ray

from scalerl.distributed.weight_sync.collective import Bucket, bucket_plan
from scalerl.errors import ConfigError


def test_bucket_plan_groups_by_dtype_and_fills_buckets_in_order():
    items = [
        ("a", "float32", 10, 4),
        ("b", "bfloat16", 8, 2),
        ("c", "float32", 20, 4),
        ("d", "float32", 5, 4),
        ("e", "bfloat16", 100, 2),
    ]
    plan = bucket_plan(items, bucket_bytes=100)
    # float32: a (40 B) + c (80 B) > 100 -> a alone; c + d = 100 B fits; bfloat16: b (16 B), e (200 B) alone
    assert plan == (
        Bucket("float32", ("a",), (10,)),
        Bucket("float32", ("c", "d"), (20, 5)),
        Bucket("bfloat16", ("b",), (8,)),
        Bucket("bfloat16", ("e",), (100,)),
    )
    assert bucket_plan(items, bucket_bytes=10**6) == (
        Bucket("float32", ("a", "c", "d"), (10, 20, 5)),
        Bucket("bfloat16", ("b", "e"), (8, 100)),
    )
    assert bucket_plan([], 1) == ()
    with pytest.raises(ConfigError, match="bucket size"):
        bucket_plan(items, 0)


def _state(fill: str):
    """fp32, bf16 and fp16 tensors of odd sizes; `fill`="special" puts values whose bits matter in
    them (signed zero, infinities, NaN with a payload, subnormals), "zeros" the receiver's start."""
    import torch

    generator = torch.Generator().manual_seed(0)
    shapes = {
        "layer.weight": ((33, 7), torch.float32),
        "layer.bias": ((33,), torch.float32),
        "head.weight": ((5, 129), torch.bfloat16),
        "norm": ((17,), torch.float16),
        "big": ((70_000,), torch.bfloat16),
    }
    state = {}
    for name, (shape, dtype) in shapes.items():
        values = torch.randn(shape, generator=generator).to(dtype)
        state[name] = torch.zeros(shape, dtype=dtype) if fill == "zeros" else values
    if fill == "special":
        flat = state["layer.bias"]
        flat[:5] = torch.tensor([-0.0, float("inf"), -float("inf"), 1e-45, float("nan")])
        flat.view(torch.int32)[5] = 0x7FC00123  # a NaN with a payload
        state["head.weight"].view(-1)[:2] = torch.tensor([-0.0, 1e-40]).to(torch.bfloat16)
    return state


def _bits(state) -> dict:
    import torch

    views = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}
    return {name: t.view(views[t.dtype]).clone() for name, t in state.items()}


class _Rank:
    """One process of the group: holds a state dict, sends or receives it."""

    def __init__(self, fill: str) -> None:
        self.state = _state(fill)

    def join(self, rank: int, world_size: int, address: str) -> None:
        from scalerl.distributed.weight_sync.collective import join_group

        self.group = join_group(rank, world_size, address, "gloo", timeout_seconds=120)

    def sync(self, send: bool, bucket_mb: float) -> int:
        from scalerl.distributed.weight_sync.collective import model_bucket_plan, receive_weights, send_weights

        plan = model_bucket_plan(self.state, bucket_mb)
        return (send_weights if send else receive_weights)(self.state, plan, self.group)

    def bits(self) -> dict:
        return {name: bits.numpy() for name, bits in _bits(self.state).items()}

    def default_group_used(self) -> bool:
        import torch.distributed as dist

        return dist.is_initialized()


@pytest.mark.slow
def test_weights_received_by_broadcast_are_bit_identical_to_the_trainers():
    import numpy as np

    from scalerl.distributed.weight_sync.collective import free_address

    ray = start_local_ray(num_cpus=3)
    try:
        import sys

        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # tests/ is not on the workers' path
        actor = ray.remote(num_cpus=0)(_Rank)
        trainer, generators = actor.remote("special"), [actor.remote("zeros") for _ in range(2)]
        ranks = [trainer, *generators]
        address = free_address()
        ray.get([r.join.remote(i, len(ranks), address) for i, r in enumerate(ranks)])
        expected = ray.get(trainer.bits.remote())
        assert any(not np.array_equal(expected[n], b) for n, b in ray.get(generators[0].bits.remote()).items())
        # 0.1 MiB buckets: "big" (140 kB of bf16) alone, the small ones grouped per dtype
        sizes = ray.get([r.sync.remote(i == 0, 0.1) for i, r in enumerate(ranks)])
        assert len(set(sizes)) == 1 and sizes[0] == sum(v.nbytes for v in expected.values())
        for generator in generators:
            received = ray.get(generator.bits.remote())
            assert received.keys() == expected.keys()
            for name in expected:
                assert np.array_equal(received[name], expected[name]), name
        # the weight-sync group is a group of its own: the default group stays free (data parallel)
        assert ray.get([r.default_group_used.remote() for r in ranks]) == [False] * 3
    finally:
        ray.shutdown()


class _GatedGroup:
    """A stand-in for the weight-sync group: each broadcast waits for `gate`, then records a copy of
    what it sends (what a receiver would get)."""

    def __init__(self) -> None:
        import threading

        self.gate, self.sent = threading.Event(), []

    def broadcast(self, tensor, src: int = 0, async_op: bool = False):
        assert self.gate.wait(timeout=30), "the test never opened the gate"
        self.sent.append(tensor.clone())

        class Done:
            def wait(self):
                return None

        return Done() if async_op else None


def test_the_broadcast_overlaps_the_next_step_and_sends_the_weights_as_they_were_at_publish():
    import torch

    from scalerl.distributed.weight_sync.broadcast import BroadcastPublisher

    model = torch.nn.Linear(3, 2)
    published = {name: p.detach().clone() for name, p in model.named_parameters()}
    group = _GatedGroup()
    publisher = BroadcastPublisher(model, bucket_mb=1.0, group=group)
    publisher.publish(model, 7)  # returns while the send waits at the gate: nothing is on the wire yet
    assert group.sent == []
    with torch.no_grad():  # the next optimiser step changes the weights in place
        for p in model.parameters():
            p.add_(1.0)
    group.gate.set()
    publisher.wait()
    header, *buckets = group.sent
    assert header.tolist() == [7]
    sent = torch.cat(buckets)
    expected = torch.cat([published[name].reshape(-1) for bucket in publisher.plan for name in bucket.names])
    assert torch.equal(sent, expected)  # version 7's weights, not the stepped ones


def test_a_failed_broadcast_is_raised_by_the_next_publish():
    import torch

    from scalerl.distributed.weight_sync.broadcast import BroadcastPublisher

    class Broken:
        def broadcast(self, tensor, src=0, async_op=False):
            raise RuntimeError("connection reset by peer")

    model = torch.nn.Linear(3, 2)
    publisher = BroadcastPublisher(model, bucket_mb=1.0, group=Broken())
    publisher.publish(model, 1)
    with pytest.raises(RuntimeError, match="connection reset"):
        publisher.publish(model, 2)
