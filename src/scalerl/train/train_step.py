"""One optimiser step on a batch of rollouts: the code the synchronous trainer and the async
pipeline share (so that the pipeline with k = 0 reproduces the synchronous run exactly).

    rollouts -> zero-variance filter (fewer than rl.min_kept_prompts prompts left: no update)
             -> group-centred advantages (configured normalisation)
             -> per micro-batch (train.micro_batch_size; train/parallel/data_parallel.py):
                padded tensors -> teacher-forced log-probs with the FP32-head forward (chunked
                over positions: train.logprob_chunk_size) -> loss (the run's StepRecipe: the
                registry's function and its config parameters, resolved once; GRPO's KL term with
                the frozen reference policy's log-probs) -> its share of the aggregation (the
                whole batch's normalisers) -> backward, gradients accumulated
             -> clip -> checks (non-finite numbers, the update's size: guards/divergence_guard.py) -> AdamW -> LR

`guarded_train_step` is the step every trainer takes: `train_step`, with a non-finite step skipped
or the run stopped as its DivergenceGuard says. Also the optimiser and learning-rate schedule
builders (AdamW; linear warm-up, then optim.lr_schedule: ScaleRL, arXiv 2510.13786, section 4).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from scalerl.errors import ConfigError, InputError
from scalerl.models.forward import hidden_token_logprobs, policy_hidden
from scalerl.rl.advantages import count_kept_prompts, normalised_advantages, zero_variance_keep_mask
from scalerl.rl.config import RLConfig
from scalerl.train.batch.packed_rollouts import PackedRollouts
from scalerl.train.config.optimiser_config import LR_SCHEDULES, OptimConfig
from scalerl.train.config.step_recipe import StepRecipe
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.flops import sequence_context_sum
from scalerl.train.guards.divergence_guard import (
    DivergenceGuard,
    NonFiniteStep,
    require_bounded_step,
    require_finite_rollouts,
    require_finite_update,
)
from scalerl.train.parallel.data_parallel import (
    AccumulatedStats,
    aggregation_token_weights,
    all_reduce_gradients,
    all_reduce_sums,
    micro_batch_slices,
    rank_and_world_size,
    shard_rows,
)


@dataclass(frozen=True)
class StepStats:
    """What one optimiser step did. `lr` is the learning rate the step used; `tokens_recomputed` and
    `recomputed_context_sum` count the frozen reference policy's no-grad forward (0 without one)."""

    loss: float
    grad_norm: float
    lr: float
    entropy: float
    mean_ratio: float
    clipped_fraction: float
    kept_prompts: int
    total_prompts: int
    kept_sequences: int
    tokens_trained: int
    trained_context_sum: int
    updated: bool
    tokens_recomputed: int = 0
    recomputed_context_sum: int = 0
    nonfinite: str = ""  # why the step was skipped for a non-finite number (scalerl.train.guards.divergence_guard)


@dataclass(frozen=True)
class RolloutBatch:
    """Padded tensors of N sequences: prompts left-padded to P, completions right-padded to T.

    input_ids / attention_mask [N, P + T]; completion_ids, generator_logprobs, loss_mask [N, T]
    (loss_mask is 1 on sampled completion tokens, 0 on padding and forced tokens);
    rewards [N]; group_ids [N]; prompt_width = P.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    completion_ids: torch.Tensor
    generator_logprobs: torch.Tensor
    loss_mask: torch.Tensor
    rewards: torch.Tensor
    group_ids: torch.Tensor
    prompt_width: int


def warmup_lr_factor(step: int, warmup_steps: int) -> float:
    """Linear warm-up then constant: factor = min(1, (step + 1) / warmup_steps), 1 if no warm-up.

    `step` counts optimiser steps from 0, so the first step uses lr / warmup_steps and step
    warmup_steps - 1 reaches the full rate (ScaleRL: 100 warm-up steps then constant).
    """
    if warmup_steps <= 0:
        return 1.0
    return min(1.0, (step + 1) / warmup_steps)


def build_optimizer(model: torch.nn.Module, optim: OptimConfig) -> torch.optim.AdamW:
    """AdamW with the configured lr, betas, eps and weight decay (ScaleRL: eps 1e-15, wd 0.01)."""
    return torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=optim.lr,
        betas=(optim.adam_beta1, optim.adam_beta2),
        eps=optim.adam_eps,
        weight_decay=optim.weight_decay,
    )


def lr_factor(step: int, warmup_steps: int, schedule: str = "constant", total_steps: int = 0) -> float:
    """`warmup_lr_factor` during the warm-up, then by `schedule` with progress
    p = (step - warmup_steps) / (total_steps - warmup_steps) clamped to [0, 1]:
    constant 1, linear 1 - p, cosine (1 + cos(pi p)) / 2 (transformers' decays to 0 at total_steps)."""
    if step < warmup_steps or schedule == "constant":
        return warmup_lr_factor(step, warmup_steps)
    progress = min(1.0, max(0.0, (step - warmup_steps) / max(1, total_steps - warmup_steps)))
    if schedule == "linear":
        return 1.0 - progress
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ConfigError(f"optim.lr_schedule: {schedule!r} is not one of {', '.join(LR_SCHEDULES)}")


def build_scheduler(
    optimizer: torch.optim.Optimizer, warmup_steps: int, schedule: str = "constant", total_steps: int = 0
) -> torch.optim.lr_scheduler.LambdaLR:
    """LambdaLR applying `lr_factor` (its state is plain numbers: JSON-serialisable)."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, warmup_steps, schedule, total_steps)
    )


def _padded_flat(
    flat: np.ndarray, lengths: np.ndarray, width: int, fill: float, *, left: bool, dtype: torch.dtype
) -> torch.Tensor:
    """`_padded` of rows given concatenated (`flat`, row i = the next lengths[i] values)."""
    out = np.full((lengths.size, width), fill, dtype=np.float64 if dtype.is_floating_point else np.int64)
    if lengths.sum():
        row_index = np.repeat(np.arange(lengths.size), lengths)
        offsets = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        column = offsets + np.repeat(width - lengths, lengths) if left else offsets
        out[row_index, column] = flat
    return torch.from_numpy(out).to(dtype)


def build_batch(packed: PackedRollouts, pad_token_id: int = 0) -> RolloutBatch:
    """Padded tensors of a batch (prompt left-padded, completion right-padded): one vectorised
    scatter per field from its flat buffers, cut by its offsets; no Rollout objects."""
    if not len(packed):
        raise InputError("cannot build a batch from zero rollouts")
    prompt_lengths, completion_lengths = np.diff(packed.prompt_offsets), np.diff(packed.completion_offsets)
    prompt_width = int(prompt_lengths.max())
    completion_width = max(int(completion_lengths.max()), 1)

    def completion_field(flat: np.ndarray, fill: float, dtype: torch.dtype) -> torch.Tensor:
        return _padded_flat(flat, completion_lengths, completion_width, fill, left=False, dtype=dtype)

    prompt_ids = _padded_flat(
        packed.prompt_tokens, prompt_lengths, prompt_width, pad_token_id, left=True, dtype=torch.long
    )
    prompt_mask = _padded_flat(
        np.ones(int(prompt_lengths.sum()), dtype=np.int64), prompt_lengths, prompt_width, 0, left=True, dtype=torch.long
    )
    completion_ids = completion_field(packed.completion_tokens, pad_token_id, torch.long)
    completion_mask = completion_field(np.ones(int(completion_lengths.sum()), dtype=np.int64), 0, torch.long)
    return RolloutBatch(
        input_ids=torch.cat([prompt_ids, completion_ids], dim=1),
        attention_mask=torch.cat([prompt_mask, completion_mask], dim=1),
        completion_ids=completion_ids,
        generator_logprobs=completion_field(packed.logprobs, 0.0, torch.float32),
        loss_mask=completion_field(packed.loss_mask, 0, torch.float32),
        rewards=torch.tensor(packed.reward, dtype=torch.float32),
        group_ids=torch.tensor(packed.group_index, dtype=torch.long),
        prompt_width=prompt_width,
    )


def completion_logprobs(
    model: torch.nn.Module, batch: RolloutBatch, *, fp32_head: bool, chunk_size: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probs, entropies) [N, T] of the completion tokens (teacher forcing: the hidden state at
    position p - 1 predicts token p); the LM head runs on completion positions only, `chunk_size`
    of them at a time (models/forward.py)."""
    hidden = policy_hidden(model, batch.input_ids, batch.attention_mask)
    start = batch.prompt_width - 1
    completion_hidden = hidden[:, start : start + batch.completion_ids.shape[1]]
    return hidden_token_logprobs(
        model, completion_hidden, batch.completion_ids, fp32_head=fp32_head, chunk_size=chunk_size
    )


def loss_arguments(
    recipe: StepRecipe, reference: torch.nn.Module | None, batch: RolloutBatch, device: torch.device
) -> dict[str, Any]:
    """The configured loss's keyword arguments (its spec's parameters), plus `ref_logprobs`, the
    frozen reference policy's log-probs of the completion tokens, when the spec needs them."""
    arguments: dict[str, Any] = dict(recipe.loss_kwargs)
    if not recipe.needs_reference:
        return arguments
    config = recipe.config
    if reference is None:
        raise InputError(f"rl.loss={config.rl.loss} with these parameters needs the reference policy (`reference`)")
    with torch.no_grad():
        arguments["ref_logprobs"], _ = completion_logprobs(
            reference,
            _to_device(batch, device),
            fp32_head=config.model.fp32_head,
            chunk_size=config.train.logprob_chunk_size,
        )
    return arguments


def keep_mask_for(rewards: torch.Tensor, group_ids: torch.Tensor, rl: RLConfig) -> torch.Tensor:
    """Zero-variance filter (when enabled): drop every sequence of a constant-reward group."""
    if rl.zero_variance_filter:
        return zero_variance_keep_mask(rewards, group_ids)
    return torch.ones_like(rewards, dtype=torch.bool)


def _trained_token_counts(packed: PackedRollouts) -> tuple[int, int]:
    """(tokens, attention context sum) of the teacher-forced forward, padding excluded."""
    lengths = (np.diff(packed.prompt_offsets) + np.diff(packed.completion_offsets)).tolist()
    return sum(lengths), sum(sequence_context_sum(length) for length in lengths)


def rewards_and_groups(packed: PackedRollouts) -> tuple[torch.Tensor, torch.Tensor]:
    """(rewards float32 [N], group ids long [N]) of a batch, from its arrays."""
    return torch.tensor(packed.reward, dtype=torch.float32), torch.tensor(packed.group_index, dtype=torch.long)


def select_rows(packed: PackedRollouts, rows: Sequence[int]) -> PackedRollouts:
    """The rollouts at `rows`, in order, still packed."""
    return packed.select(np.fromiter(rows, dtype=np.int64, count=len(rows)))


def _step_without_update(
    optimizer: torch.optim.Optimizer, scheduler: Any, *, kept_prompts: int, total_prompts: int, nonfinite: str = ""
) -> StepStats:
    """A step that trains nothing: the optimiser is not stepped, the LR schedule advances and the
    step's generation still counts as compute. Its loss and gradient norm are 0 when the filter
    left too few prompts, NaN for a non-finite step (`nonfinite` says why)."""
    lr = float(optimizer.param_groups[0]["lr"])
    with warnings.catch_warnings():  # stepping the schedule without an optimiser step is intended
        warnings.simplefilter("ignore", UserWarning)
        scheduler.step()
    nan = float("nan")
    return StepStats(
        loss=nan if nonfinite else 0.0,
        grad_norm=nan if nonfinite else 0.0,
        lr=lr,
        entropy=nan,
        mean_ratio=nan,
        clipped_fraction=0.0,
        kept_prompts=kept_prompts,
        total_prompts=total_prompts,
        kept_sequences=0,
        tokens_trained=0,
        trained_context_sum=0,
        updated=False,
        nonfinite=nonfinite,
    )


def prepare_for_training(model: torch.nn.Module, config: TrainConfig) -> None:
    """Training mode, and transformers' own activation checkpointing when
    train.gradient_checkpointing asks for it (switched on once; non-reentrant). Newer transformers
    name the switch `activation_checkpointing_enable`, older ones `gradient_checkpointing_enable`."""
    model.train()
    if not config.train.gradient_checkpointing:
        return
    if hasattr(model, "activation_checkpointing_enable"):
        if not model.is_activation_checkpointing:
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    elif not model.is_gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def accumulate_gradients(
    model: torch.nn.Module,
    rollouts: PackedRollouts,
    advantages: torch.Tensor,
    recipe: StepRecipe,
    reference: torch.nn.Module | None = None,
    rows: slice = slice(None),
) -> AccumulatedStats:
    """Back-propagate the configured loss of `rollouts` (advantages [N], one per rollout) into the
    parameters' `.grad`, one forward/backward per train.micro_batch_size sequences.

    The aggregation's normalisers are the whole batch's (data_parallel.aggregation_token_weights),
    so the accumulated gradient is the whole batch's. `rows` restricts the work to those
    sequences (a data-parallel rank's shard), still weighted as part of the whole batch: the
    shards' gradients add up to the whole batch's."""
    config, aggregation = recipe.config, recipe.aggregation
    device = next(model.parameters()).device
    pad_token_id = int(getattr(model.config, "pad_token_id", 0) or 0)
    whole = build_batch(rollouts, pad_token_id=pad_token_id)
    indices = range(len(rollouts))[rows]
    parts = [indices[part] for part in micro_batch_slices(len(indices), config.train.micro_batch_size)]
    in_one_piece = len(parts) == 1 and len(indices) == len(rollouts)
    weights = None if in_one_piece else aggregation_token_weights(aggregation, whole.loss_mask, whole.group_ids)
    prepare_for_training(model, config)
    stats = AccumulatedStats()
    for part in parts:
        batch = whole if in_one_piece else build_batch(select_rows(rollouts, part), pad_token_id=pad_token_id)
        on_device = _to_device(batch, device)
        mask = on_device.loss_mask
        logprobs, entropy = completion_logprobs(
            model, on_device, fp32_head=config.model.fp32_head, chunk_size=config.train.logprob_chunk_size
        )
        loss_output = recipe.loss(
            logprobs,
            on_device.generator_logprobs,
            advantages[part.start : part.stop].to(device),
            mask,
            **loss_arguments(recipe, reference, batch, device),
        )
        if weights is None:
            loss = aggregation(loss_output.token_loss, mask, on_device.group_ids)
        else:
            share = weights[part.start : part.stop, : mask.shape[1]].to(device, loss_output.token_loss.dtype)
            loss = (loss_output.token_loss * share).sum()
        loss.backward()
        stats.add(
            float(loss.detach()),
            float((entropy * mask).sum()),
            float(mask.sum()),
            loss_output.mean_ratio,
            loss_output.clipped_fraction,
        )
    return stats


def train_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    rollouts: PackedRollouts,
    recipe: StepRecipe,
    reference: torch.nn.Module | None = None,
) -> StepStats:
    """One policy-gradient update on `rollouts` (rewards filled in) with the run's `recipe`.

    `reference`: the frozen starting policy, needed only by a loss whose spec asks for reference
    log-probs (GRPO with rl.grpo_kl_coef > 0; see run_setup.reference_policy). A non-finite
    generation log-prob, loss, gradient norm or weight raises NonFiniteStep before the optimiser
    applies anything, and so does an update out of bounds (a learning rate >= 1, an update larger
    than the weights: scalerl.train.guards.divergence_guard)."""
    config = recipe.config
    require_finite_rollouts(rollouts)
    rewards, group_ids = rewards_and_groups(rollouts)
    keep = keep_mask_for(rewards, group_ids, config.rl)
    kept = count_kept_prompts(keep, group_ids)
    kept_rollouts = select_rows(rollouts, [i for i, k in enumerate(keep.tolist()) if k])
    if not len(kept_rollouts) or kept.kept < config.rl.min_kept_prompts:
        # nothing, or fewer prompts than rl.min_kept_prompts, survived the filter: a full-size Adam
        # step on one or two prompts is mostly noise
        return _step_without_update(optimizer, scheduler, kept_prompts=kept.kept, total_prompts=kept.total)
    tokens = _trained_token_counts(kept_rollouts)
    advantages = normalised_advantages(rewards, group_ids, recipe.advantage_normalisation, keep_mask=keep)
    optimizer.zero_grad(set_to_none=True)
    rank, world_size = rank_and_world_size()
    accumulated = accumulate_gradients(
        model, kept_rollouts, advantages[keep], recipe, reference, rows=shard_rows(len(kept_rollouts), rank, world_size)
    )
    if world_size > 1:  # data parallel: the shards' gradients and sums add up to the whole batch's
        all_reduce_gradients(model.parameters())
        accumulated = AccumulatedStats(*all_reduce_sums(dataclasses.astuple(accumulated)))
    entropy, mean_ratio, clipped_fraction = accumulated.means()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.optim.grad_clip)
    require_finite_update(accumulated.loss, grad_norm, model)
    require_bounded_step(optimizer)
    lr = float(optimizer.param_groups[0]["lr"])
    optimizer.step()
    scheduler.step()
    recomputed = tokens if recipe.needs_reference else (0, 0)  # the reference forward's tokens
    return StepStats(
        loss=accumulated.loss,
        grad_norm=float(grad_norm),
        lr=lr,
        entropy=entropy,
        mean_ratio=mean_ratio,
        clipped_fraction=clipped_fraction,
        kept_prompts=kept.kept,
        total_prompts=kept.total,
        kept_sequences=kept.kept_sequences,
        tokens_trained=tokens[0],
        trained_context_sum=tokens[1],
        updated=True,
        tokens_recomputed=recomputed[0],
        recomputed_context_sum=recomputed[1],
    )


def guarded_train_step(
    guard: DivergenceGuard,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    rollouts: PackedRollouts,
    recipe: StepRecipe,
    reference: torch.nn.Module | None = None,
) -> StepStats:
    """`train_step` for step `step`; a non-finite step is skipped (its StepStats say why in
    `nonfinite`, loss and gradient norm NaN, not updated) or stops the run (DivergenceError)."""
    try:
        return train_step(model, optimizer, scheduler, rollouts, recipe, reference=reference)
    except NonFiniteStep as error:
        optimizer.zero_grad(set_to_none=True)
        note = guard.admit(step, error)
    total_prompts = int(rewards_and_groups(rollouts)[1].unique().numel())
    return _step_without_update(optimizer, scheduler, kept_prompts=0, total_prompts=total_prompts, nonfinite=note)


def _to_device(batch: RolloutBatch, device: torch.device) -> RolloutBatch:
    if device.type == "cpu":
        return batch
    return RolloutBatch(
        **{
            name: (value.to(device) if isinstance(value, torch.Tensor) else value)
            for name, value in vars(batch).items()
        }
    )
