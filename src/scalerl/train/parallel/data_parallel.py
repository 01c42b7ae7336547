"""One batch's gradient from pieces: shards of the batch across trainer processes and micro-batches
on one process. Each piece's loss is weighted as part of the whole batch, so the pieces' gradients
sum to the whole batch's gradient.

Micro-batches: the aggregation's normalisers are taken from the whole batch, then each
micro-batch back-propagates its share. Every registered aggregation is linear in the token loss,
L = sum_{i,t} w_it * l_it, with weights that depend only on the whole batch's mask and prompt
groups (token: 1 / #tokens; sample: 1 / (N' |y_i|); prompt: 1 / (P' #tokens of i's group)). Every
registered loss gives sequence i's token losses from sequence i alone, so sum over micro-batches b
of sum_{i in b, t} w_it * l_it is L itself, and so is the sum of the micro-batches' gradients.

Data parallelism across trainer processes with torch.distributed: every rank holds the whole
batch of rollouts (so filters, advantages and the aggregation's normalisers are the whole
batch's), back-propagates its contiguous shard of the sequences, and the ranks' gradients are
summed with `all_reduce`. Because each shard's loss is already weighted as part of the whole
batch (`aggregation_token_weights`), the sum is the whole batch's gradient, and every rank then
makes the same optimiser step.

Launched by `torchrun --nproc-per-node N ...` (its environment: RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT); gloo on CPU, nccl on CUDA. Without an initialised process group everything here is
the single-process identity.

The synchronous trainer on several processes: rank 0 runs the run as a single process does (run
folder and its lock, metrics, validation, checkpoints) and every other rank follows it
(scalerl.train.trainer.follow). At the start rank 0 says which checkpoint it resumed from (the
others restore the same one) or sends its starting weights (`announce_start`); each step it
broadcasts a `StepPlan`, the prompts it sampled and the state of the run's sampling stream
(`announce_step`), from which every rank generates its shard of the batch
(scalerl.train.step_rollouts.generate_together); when the run stops (its last step, every prompt
retired, Ctrl-C or SIGTERM) it broadcasts None (`announce_stop`) and every rank stops after the
same step.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from scalerl.errors import InputError


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


@dataclass(frozen=True)
class StepPlan:
    """What every rank needs to generate step `step`: the prompts and the sampling stream's state."""

    step: int
    prompt_indices: tuple[int, ...]
    rng_state: torch.Tensor


def announce_start(resumed_from: Path | None, model: torch.nn.Module) -> None:
    """Rank 0, once its run is open: the checkpoint it resumed from, else its starting weights."""
    broadcast_object(None if resumed_from is None else str(resumed_from))
    if resumed_from is None:
        broadcast_model_state(model)


def announce_step(step: int, prompt_indices: Sequence[int], generator: torch.Generator) -> StepPlan:
    """Rank 0: send (and return) the plan of step `step`."""
    plan = StepPlan(step=step, prompt_indices=tuple(int(i) for i in prompt_indices), rng_state=generator.get_state())
    broadcast_object(plan)
    return plan


def announce_stop() -> None:
    """Rank 0: the run stops; every rank leaves its loop."""
    broadcast_object(None)


def aggregation_token_weights(
    aggregation: Callable[..., torch.Tensor], mask: torch.Tensor, group_ids: torch.Tensor
) -> torch.Tensor:
    """The weights w [N, T] with aggregation(l, mask, group_ids) = sum_{i,t} w_it * l_it.

    For an aggregation linear in the token loss l, w = dL/dl, read off by differentiating it once
    at l = 0 (float64, so the weights carry no rounding of their own). Zero on padding.
    """
    token_loss = torch.zeros(mask.shape, dtype=torch.float64, device=mask.device, requires_grad=True)
    total = aggregation(token_loss, mask.to(torch.float64), group_ids)
    (weights,) = torch.autograd.grad(total, token_loss, allow_unused=True)
    return torch.zeros_like(token_loss).detach() if weights is None else weights.detach()


def micro_batch_slices(num_sequences: int, micro_batch_size: int) -> list[slice]:
    """Consecutive slices of at most `micro_batch_size` sequences covering 0..num_sequences
    (micro_batch_size 0: one slice, the whole batch)."""
    if num_sequences < 0 or micro_batch_size < 0:
        raise InputError(f"cannot split {num_sequences} sequences into micro-batches of {micro_batch_size}")
    size = micro_batch_size if micro_batch_size > 0 else max(num_sequences, 1)
    return [slice(start, min(start + size, num_sequences)) for start in range(0, num_sequences, size)]


@dataclass
class AccumulatedStats:
    """Running sums over micro-batches: the back-propagated loss (sum of the micro-batches' shares,
    equal to the whole batch's aggregated loss), the entropy summed over real tokens, and the loss
    diagnostics weighted by each micro-batch's real tokens."""

    loss: float = 0.0
    entropy_sum: float = 0.0
    tokens: float = 0.0
    ratio_sum: float = 0.0
    clipped_sum: float = 0.0

    def add(self, loss: float, entropy_sum: float, tokens: float, mean_ratio: float, clipped_fraction: float) -> None:
        """One micro-batch: its loss share, its summed token entropy, its real-token count and the
        loss function's mean ratio and clipped fraction on it."""
        self.loss += loss
        self.entropy_sum += entropy_sum
        self.tokens += tokens
        if tokens > 0:
            self.ratio_sum += mean_ratio * tokens
            self.clipped_sum += clipped_fraction * tokens

    def means(self) -> tuple[float, float, float]:
        """(entropy, mean_ratio, clipped_fraction) over the real tokens of every micro-batch
        (nan, nan, 0 without any)."""
        if self.tokens <= 0:
            return float("nan"), float("nan"), 0.0
        return self.entropy_sum / self.tokens, self.ratio_sum / self.tokens, self.clipped_sum / self.tokens
