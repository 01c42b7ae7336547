"""Data parallelism across trainer processes with torch.distributed: every rank holds the whole
batch of rollouts (so filters, advantages and the aggregation's normalisers are the whole
batch's), back-propagates its contiguous shard of the sequences, and the ranks' gradients are
summed with `all_reduce`. Because each shard's loss is already weighted as part of the whole
batch (train/parallel/micro_batches.py), the sum is the whole batch's gradient, and every rank then makes
the same optimiser step.

Launched by `torchrun --nproc-per-node N ...` (its environment: RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT); gloo on CPU, nccl on CUDA. Without an initialised process group everything here is
the single-process identity.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import torch
import torch.distributed as dist


def rank_and_world_size() -> tuple[int, int]:
    """(this process's rank, number of ranks); (0, 1) without an initialised process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_from_environment(device: str = "cpu") -> tuple[int, int]:
    """Join the process group torchrun describes in the environment (WORLD_SIZE > 1): gloo on
    CPU, nccl on CUDA (each rank on cuda:LOCAL_RANK). Returns (rank, world size)."""
    if joins_from_environment():
        backend = "nccl" if device.startswith("cuda") else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend=backend)
    return rank_and_world_size()


def joins_from_environment() -> bool:
    """True when init_from_environment will create the process group (torchrun set WORLD_SIZE > 1
    and nobody joined one yet): the run that joins it is the one to leave it."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and not (dist.is_available() and dist.is_initialized())


def leave_process_group(completed: bool) -> None:
    """Destroy the process group, after a barrier when the run completed on every rank. A rank that
    exits with the group alive can abort in gloo's teardown ("terminate called without an active
    exception", SIGABRT) while its peer is still closing: 2 of 5 two-rank runs did."""
    if not (dist.is_available() and dist.is_initialized()):
        return
    if completed:
        dist.barrier()
    dist.destroy_process_group()


def shard_rows(num_sequences: int, rank: int, world_size: int) -> slice:
    """Rank `rank`'s contiguous share of `num_sequences` rows; shares differ by at most one row
    (the first num_sequences % world_size ranks take one more)."""
    base, extra = divmod(num_sequences, world_size)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (1 if rank < extra else 0))


def all_reduce_gradients(parameters: Iterable[torch.nn.Parameter]) -> None:
    """Sum every trainable parameter's gradient over the ranks, in one flat buffer (a rank whose
    shard was empty contributes zeros)."""
    trainable = [p for p in parameters if p.requires_grad]
    for parameter in trainable:
        if parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)
    flat = torch.cat([p.grad.reshape(-1) for p in trainable])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    offset = 0
    for parameter in trainable:
        count = parameter.grad.numel()
        parameter.grad.copy_(flat[offset : offset + count].view_as(parameter.grad))
        offset += count


def _collective_device() -> str:
    """Where small tensors of a collective live: CUDA under nccl (it reduces only CUDA tensors)."""
    return "cuda" if dist.get_backend() == "nccl" else "cpu"


def all_reduce_sums(values: Sequence[float]) -> list[float]:
    """Each value summed over the ranks (float64)."""
    summed = torch.tensor(list(values), dtype=torch.float64, device=_collective_device())
    dist.all_reduce(summed, op=dist.ReduceOp.SUM)
    return summed.tolist()


def broadcast_object(value: object = None, source: int = 0) -> object:
    """`value` of rank `source`, on every rank (pickled; small objects: a step's plan)."""
    holder = [value]
    dist.broadcast_object_list(holder, src=source)
    return holder[0]


def all_gather_objects(value: object) -> list[object]:
    """Every rank's `value`, in rank order, on every rank."""
    gathered: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def all_reduce_max(value: int) -> int:
    """The largest of the ranks' `value`."""
    most = torch.tensor([int(value)], dtype=torch.int64, device=_collective_device())
    dist.all_reduce(most, op=dist.ReduceOp.MAX)
    return int(most.item())


def broadcast_model_state(model: torch.nn.Module, source: int = 0) -> None:
    """Every tensor of `model`'s state dict (weights and buffers) replaced by rank `source`'s, in place."""
    with torch.no_grad():
        for tensor in model.state_dict().values():
            dist.broadcast(tensor, src=source)
