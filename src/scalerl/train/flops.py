"""Compute accounting: FLOPs estimates of generation, training and log-prob recompute, and device-hours.

Transformer FLOPs per token (Kaplan et al., "Scaling Laws for Neural Language Models",
arXiv 2001.08361, section 2.1), with N the number of non-embedding-lookup parameters
(every weight that takes part in a matrix product, the LM head included), n_layer layers of width
d_model and n_ctx the number of tokens the token attends to:

    forward  ~ 2 * N + 2 * n_layer * n_ctx * d_model
    backward ~ 2 * forward

so over a run

    generation FLOPs = 2 * N * tokens_generated + 2 * n_layer * d_model * sum(n_ctx over generated tokens)
    training   FLOPs = 6 * N * tokens_trained   + 6 * n_layer * d_model * sum(n_ctx over trained tokens)
    recompute  FLOPs = 2 * N * tokens_recomputed + 2 * n_layer * d_model * sum(n_ctx over recomputed tokens)

The recompute term counts a separate no-grad log-prob forward: the frozen reference policy's
forward over the trained sequences when the loss has a KL term (GRPO with rl.grpo_kl_coef > 0),
booked with the step (`RunState.book_step`). The policy's own teacher-forced forward is both the
log-prob recompute and the training forward, so its tokens are booked once, under training.
A generated token at position i of a completion after a prompt of P tokens attends to P + i + 1
tokens (KV cache). Trained and recomputed tokens are the prompt and completion tokens of the
sequences kept after filtering (padding excluded). Evaluation is not training compute and is not
counted.
Device-hours = wall-clock hours of training x number of devices (the paper's GPU-hours).
`Counters` holds a run's cumulative totals of these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: this module stays torch-free
    import torch


@dataclass
class Counters:
    """Cumulative compute of the run (the x axes of the compute-performance curve)."""

    samples: int = 0
    tokens_generated: int = 0
    tokens_trained: int = 0
    flops: float = 0.0
    device_hours: float = 0.0


@dataclass(frozen=True)
class ModelShape:
    """What the FLOPs formulas need to know about a model."""

    n_params: int
    n_layers: int
    d_model: int


def context_token_sum(prompt_tokens: int, completion_tokens: int) -> int:
    """Sum over completion tokens of the tokens each attends to: sum_{i=0}^{L-1} (P + i + 1).

    = L * P + L * (L + 1) / 2        (L completion tokens, P prompt tokens)
    """
    length = completion_tokens
    return length * prompt_tokens + length * (length + 1) // 2


def sequence_context_sum(sequence_tokens: int) -> int:
    """Teacher-forced forward over S tokens: token i attends to i + 1 tokens: S (S + 1) / 2."""
    return sequence_tokens * (sequence_tokens + 1) // 2


def forward_flops(shape: ModelShape, tokens: int, context_sum: int) -> float:
    """One forward pass: 2 * N * tokens + 2 * n_layer * d_model * sum(n_ctx)  (Kaplan 2020)."""
    return 2.0 * shape.n_params * tokens + 2.0 * shape.n_layers * shape.d_model * context_sum


def generation_flops(shape: ModelShape, tokens_generated: int, context_sum: int) -> float:
    """Sampling with a KV cache: one forward per generated token."""
    return forward_flops(shape, tokens_generated, context_sum)


def training_flops(shape: ModelShape, tokens_trained: int, context_sum: int) -> float:
    """Forward + backward: 3 x forward = 6 * N * tokens + 6 * n_layer * d_model * sum(n_ctx)."""
    return 3.0 * forward_flops(shape, tokens_trained, context_sum)


def recompute_flops(shape: ModelShape, tokens_recomputed: int, context_sum: int) -> float:
    """A separate no-grad log-prob forward: 2 * N * tokens + 2 * n_layer * d_model * sum(n_ctx)."""
    return forward_flops(shape, tokens_recomputed, context_sum)


def device_hours(wall_seconds: float, num_devices: int) -> float:
    """Device-hours = wall-clock seconds / 3600 x number of devices."""
    return wall_seconds / 3600.0 * num_devices


def model_shape(model: torch.nn.Module) -> ModelShape:
    """ModelShape of a Hugging Face causal LM: parameters minus the input-embedding lookup table
    (unless it is tied to the LM head, which does a matrix product with it)."""
    n_params = sum(p.numel() for p in model.parameters())
    embedding = model.get_input_embeddings().weight
    output = model.get_output_embeddings()
    tied = output is not None and output.weight is embedding
    if not tied:
        n_params -= embedding.numel()
    config = model.config
    return ModelShape(n_params=int(n_params), n_layers=int(config.num_hidden_layers), d_model=int(config.hidden_size))
