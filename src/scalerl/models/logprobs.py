"""Log-probs of given tokens from the body's hidden states, computed a chunk of positions at a time
so that the [batch, length, vocab] float32 logits never exist at once (forward or backward).

For a linear LM head z = h W^T (+ b) the chunks run inside one autograd function
(`_ChunkedHeadLogprobs`): the forward keeps no logits, only the per-position log-probs and
entropies; the backward recomputes one chunk's logits at a time and applies, in place,

    dL/dz_t = g_t (onehot(token_t) - softmax(z_t)),   dL/dh_t = dL/dz_t W,   dL/dW += dL/dz_t^T h_t

so the peak holds one chunk's logits, [batch, chunk, vocab], and one weight-sized gradient that
every chunk adds into. (A checkpoint per chunk instead hands autograd one weight-sized gradient
per chunk, which it sums out of place into a buffer of its own: three weight-sized tensors at
once, 281 of the 305 MiB it added at 8 x 256 positions, vocabulary 32k, hidden 768.) The head
weight is cast to the head's dtype once per call, not per chunk. The cost is a second
LM-head forward per chunk in the backward pass. A head that is not a plain linear layer (used
only without the FP32 head) falls back to a checkpoint per chunk.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from scalerl.models.policy import head_logits


def _chunk_logprobs_and_entropy(
    model: torch.nn.Module, hidden: torch.Tensor, token_ids: torch.Tensor, fp32_head: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p(token), entropy H) per position of one chunk; H carries no gradient.

        log p_t = log_softmax(head(h_t))[token_t],   H_t = -sum_v p_t(v) log p_t(v)

    in float32, or in the logits' dtype when it is wider (a float64 model stays float64)."""
    logits = head_logits(model, hidden, fp32_head=fp32_head)
    log_probs = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    token_logprob = log_probs.gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)
    detached = log_probs.detach()
    return token_logprob, -(detached.exp() * detached).sum(dim=-1)


def _softmax_dtype(head_dtype: torch.dtype) -> torch.dtype:
    """float32, or the head's dtype when it is wider."""
    return torch.promote_types(head_dtype, torch.float32)


def _chunk_slices(length: int, chunk_size: int) -> list[slice]:
    return [slice(start, min(start + chunk_size, length)) for start in range(0, length, chunk_size)]


class _ChunkedHeadLogprobs(torch.autograd.Function):
    """(log p(token) [N, T], entropy [N, T]) of z = hidden W^T + b computed in the head's dtype,
    chunk_size positions at a time; the gradient formulas are in the module docstring."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, token_ids, chunk_size, head_dtype):
        ctx.save_for_backward(hidden, weight, bias, token_ids)
        ctx.chunk_size, ctx.head_dtype = chunk_size, head_dtype
        head_weight = weight.to(head_dtype)
        head_bias = None if bias is None else bias.to(head_dtype)
        shape = token_ids.shape
        token_logprob = hidden.new_empty(shape, dtype=_softmax_dtype(head_dtype))
        entropy = torch.empty_like(token_logprob)
        for piece in _chunk_slices(shape[1], chunk_size):
            logits = F.linear(hidden[:, piece].to(head_dtype), head_weight, head_bias)
            log_probs = torch.log_softmax(logits.to(token_logprob.dtype), dim=-1)
            del logits
            token_logprob[:, piece] = log_probs.gather(-1, token_ids[:, piece].unsqueeze(-1)).squeeze(-1)
            entropy[:, piece] = -log_probs.exp().mul_(log_probs).sum(dim=-1)
        ctx.mark_non_differentiable(entropy)
        return token_logprob, entropy

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_logprob, _grad_entropy):
        hidden, weight, bias, token_ids = ctx.saved_tensors
        head_dtype = ctx.head_dtype
        accumulate_dtype = _softmax_dtype(head_dtype)
        wants_hidden, wants_weight, wants_bias = ctx.needs_input_grad[:3]
        head_weight = weight.to(head_dtype)
        head_bias = None if bias is None else bias.to(head_dtype)
        grad_hidden = torch.empty_like(hidden) if wants_hidden else None
        grad_weight = torch.zeros_like(weight, dtype=accumulate_dtype) if wants_weight else None
        grad_bias = torch.zeros_like(bias, dtype=accumulate_dtype) if wants_bias else None
        for piece in _chunk_slices(token_ids.shape[1], ctx.chunk_size):
            chunk_hidden = hidden[:, piece].to(head_dtype)
            logits = F.linear(chunk_hidden, head_weight, head_bias)
            grad_logits = torch.softmax(logits.to(grad_logprob.dtype), dim=-1)
            del logits
            chunk_grad = grad_logprob[:, piece].unsqueeze(-1)
            grad_logits.mul_(-chunk_grad).scatter_add_(-1, token_ids[:, piece].unsqueeze(-1), chunk_grad)
            grad_logits = grad_logits.to(head_dtype)
            if wants_hidden:
                grad_hidden[:, piece] = (grad_logits @ head_weight).to(hidden.dtype)
            flat_grad = grad_logits.flatten(0, -2).to(accumulate_dtype)
            if wants_weight:
                grad_weight.addmm_(flat_grad.T, chunk_hidden.flatten(0, -2).to(accumulate_dtype))
            if wants_bias:
                grad_bias.add_(flat_grad.sum(dim=0))
        grad_weight = None if grad_weight is None else grad_weight.to(weight.dtype)
        grad_bias = None if grad_bias is None else grad_bias.to(bias.dtype)
        return grad_hidden, grad_weight, grad_bias, None, None, None


def _checkpointed_chunks(
    model: torch.nn.Module, hidden: torch.Tensor, token_ids: torch.Tensor, fp32_head: bool, chunk_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The fallback for a head that is not a plain linear layer: each chunk under a checkpoint."""
    logprobs, entropies = [], []
    for piece in _chunk_slices(token_ids.shape[1], chunk_size):
        chunk = (model, hidden[:, piece], token_ids[:, piece], fp32_head)
        if torch.is_grad_enabled():
            token_logprob, entropy = checkpoint(_chunk_logprobs_and_entropy, *chunk, use_reentrant=False)
        else:
            token_logprob, entropy = _chunk_logprobs_and_entropy(*chunk)
        logprobs.append(token_logprob)
        entropies.append(entropy)
    return torch.cat(logprobs, dim=1), torch.cat(entropies, dim=1)


def hidden_token_logprobs(
    model: torch.nn.Module,
    hidden: torch.Tensor,
    token_ids: torch.Tensor,
    *,
    fp32_head: bool = True,
    chunk_size: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs [N, T] of `token_ids` [N, T] under the LM head applied to `hidden` [N, T, H] (the
    hidden state that predicts each token), and the per-position entropy [N, T] (no gradient).

    chunk_size > 0: positions [s, s + chunk_size) at a time (see the module docstring); the values
    and gradients equal the unchunked ones up to float rounding. chunk_size = 0 (or >= T): one
    piece through ordinary autograd, the [N, T, V] logits materialised.
    """
    length = token_ids.shape[1]
    if chunk_size <= 0 or chunk_size >= length:
        return _chunk_logprobs_and_entropy(model, hidden, token_ids, fp32_head)
    head = model.get_output_embeddings()
    if fp32_head or type(head) is torch.nn.Linear:
        head_dtype = torch.float32 if fp32_head else head.weight.dtype
        return _ChunkedHeadLogprobs.apply(hidden, head.weight, head.bias, token_ids, chunk_size, head_dtype)
    return _checkpointed_chunks(model, hidden, token_ids, fp32_head, chunk_size)
