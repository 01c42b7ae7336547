"""Weights by collective: the trainer broadcasts its parameters to the generators over one
torch.distributed process group (gloo on CPU, NCCL on GPUs), in dtype-grouped buckets.

Each process of the group (the trainer at rank 0, generator i at rank i + 1; Ray actors or plain
processes) calls `join_group` once and gets a `WeightGroup`: a process group of its own (as
vLLM's stateless groups), so that torch.distributed's default group stays free for the trainer's
data-parallel ranks. Both sides derive the same `bucket_plan` from the model's
state dict (names, dtypes, sizes: the same architecture on every rank), so only tensor bytes
cross: per bucket, the sender flattens its tensors of one dtype into one buffer and
`torch.distributed.broadcast`s it; a receiver broadcasts into a buffer of the same size and
copies the pieces into its own tensors in place (the KV cache of sequences in flight is kept, as
with the object-store path of object_store.py). Bits are copied, never converted: what a generator
receives is bit-identical to the trainer's tensors. PipelineRL and verl send weights this way
(NCCL, bucketed); ScaleRL arXiv 2510.13786 section 4.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scalerl.errors import ConfigError

if TYPE_CHECKING:
    import torch

BACKENDS = ("gloo", "nccl")


@dataclass(frozen=True)
class Bucket:
    """One broadcast: tensors of one dtype, flattened one after the other."""

    dtype: str  # torch dtype name, e.g. "bfloat16"
    names: tuple[str, ...]
    numels: tuple[int, ...]

    @property
    def numel(self) -> int:
        return sum(self.numels)


def bucket_plan(tensors: Iterable[tuple[str, str, int, int]], bucket_bytes: int) -> tuple[Bucket, ...]:
    """Buckets of (name, dtype name, numel, bytes per element) items.

    Items are grouped by dtype (dtypes in order of first appearance, items in their given order);
    a dtype's items fill buckets of at most `bucket_bytes` in turn, and an item larger than
    `bucket_bytes` gets a bucket of its own. Every rank computes the same plan from the same
    state dict, so the plan itself is never sent.
    """
    if bucket_bytes < 1:
        raise ConfigError(f"bucket size must be at least 1 byte, got {bucket_bytes}")
    by_dtype: dict[str, list[tuple[str, int, int]]] = {}
    for name, dtype, numel, item_bytes in tensors:
        by_dtype.setdefault(dtype, []).append((name, int(numel), int(item_bytes)))
    buckets = []
    for dtype, items in by_dtype.items():
        names, numels, size = [], [], 0
        for name, numel, item_bytes in items:
            if names and size + numel * item_bytes > bucket_bytes:
                buckets.append(Bucket(dtype, tuple(names), tuple(numels)))
                names, numels, size = [], [], 0
            names.append(name)
            numels.append(numel)
            size += numel * item_bytes
        if names:
            buckets.append(Bucket(dtype, tuple(names), tuple(numels)))
    return tuple(buckets)


def model_bucket_plan(state: Mapping[str, torch.Tensor], bucket_mb: float) -> tuple[Bucket, ...]:
    """bucket_plan of a state dict, buckets of `bucket_mb` MiB."""
    items = ((name, str(t.dtype).removeprefix("torch."), t.numel(), t.element_size()) for name, t in state.items())
    return bucket_plan(items, max(1, int(bucket_mb * 2**20)))


@dataclass
class WeightGroup:
    """This process's membership of the weight-sync group: a process group of its own, never
    torch.distributed's default group (which the trainer's data-parallel ranks use)."""

    process_group: object  # torch.distributed.ProcessGroupGloo / ProcessGroupNCCL
    store: object  # the TCPStore the group met at (kept alive with it)
    rank: int
    world_size: int

    def broadcast(self, tensor: torch.Tensor, src: int = 0, async_op: bool = False):
        """Broadcast `tensor` in place from rank `src`; the pending Work when `async_op`."""
        work = self.process_group.broadcast(tensor, src)
        return work if async_op else work.wait()


def join_group(
    rank: int, world_size: int, address: str, backend: str = "gloo", timeout_seconds: float = 600.0
) -> WeightGroup:
    """Join the weight-sync group as `rank` of `world_size`; `address` is "host:port" of the
    trainer's rendezvous (rank 0 serves the TCP store there). Blocks until every rank joined."""
    import datetime

    import torch.distributed as dist

    if backend not in BACKENDS:
        raise ConfigError(f"weight-sync backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    timeout = datetime.timedelta(seconds=timeout_seconds)
    host, port = address.rsplit(":", 1)
    store = dist.TCPStore(host, int(port), int(world_size), is_master=int(rank) == 0, timeout=timeout)
    if backend == "gloo":
        group = dist.ProcessGroupGloo(store, int(rank), int(world_size), timeout)
    else:
        group = dist.ProcessGroupNCCL(store, int(rank), int(world_size))
    return WeightGroup(group, store, int(rank), int(world_size))


def free_address(host: str = "127.0.0.1") -> str:
    """ "host:port" with a port free right now on this machine (the rendezvous of join_group)."""
    import socket

    with socket.socket() as probe:
        probe.bind((host, 0))
        return f"{host}:{probe.getsockname()[1]}"


def _flat_bucket(state: Mapping[str, torch.Tensor], bucket: Bucket) -> torch.Tensor:
    """One contiguous copy of a bucket's tensors."""
    import torch

    with torch.no_grad():
        return torch.cat([state[name].detach().reshape(-1) for name in bucket.names])


def flatten_buckets(state: Mapping[str, torch.Tensor], plan: tuple[Bucket, ...]) -> list:
    """Every bucket flattened now (the payload of send_flat): a snapshot the next optimiser step
    cannot change."""
    return [_flat_bucket(state, bucket) for bucket in plan]


def send_flat(flats: Iterable, group: WeightGroup, src: int = 0) -> int:
    """Broadcast flattened buckets from rank `src`, two in flight (the next one is drawn from
    `flats` while the previous one is on the wire); the bytes per receiver (what
    receive_weights takes apart on the other side)."""
    sent, in_flight = 0, []
    for flat in flats:  # each tensor is held until its send is done
        in_flight.append((flat, group.broadcast(flat, src, async_op=True)))
        if len(in_flight) > 1:
            in_flight.pop(0)[1].wait()
        sent += flat.numel() * flat.element_size()
    for _, work in in_flight:
        work.wait()
    return sent


def send_weights(state: Mapping[str, torch.Tensor], plan: tuple[Bucket, ...], group: WeightGroup, src: int = 0) -> int:
    """Broadcast `state` bucket by bucket from rank `src`; returns the bytes sent per receiver.
    Each bucket is flattened while the previous one is on the wire."""
    return send_flat((_flat_bucket(state, bucket) for bucket in plan), group, src)


def receive_weights(
    state: Mapping[str, torch.Tensor], plan: tuple[Bucket, ...], group: WeightGroup, src: int = 0
) -> int:
    """Receive a send_weights broadcast into `state`'s tensors, in place; returns the bytes.

    The next bucket is received while the previous one is copied into place."""
    import torch

    def post(bucket: Bucket):
        device = state[bucket.names[0]].device
        flat = torch.empty(bucket.numel, dtype=getattr(torch, bucket.dtype), device=device)
        return flat, group.broadcast(flat, src, async_op=True)

    received = 0
    with torch.no_grad():
        pending = post(plan[0]) if plan else None
        for index, bucket in enumerate(plan):
            flat, work = pending
            work.wait()
            pending = post(plan[index + 1]) if index + 1 < len(plan) else None
            for name, piece in zip(bucket.names, torch.split(flat, list(bucket.numels))):
                state[name].copy_(piece.view_as(state[name]))
            received += flat.numel() * flat.element_size()
    return received
