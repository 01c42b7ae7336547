"""The policy's forward pass, the same in the generator and the trainer: the transformer body, the
FP32 LM head, the logits and the log-probs of given tokens.

FP32 head (ScaleRL, arXiv 2510.13786 section 4; MiniMax-M1): the transformer body may run in
bf16, but the final projection hidden -> logits is computed in float32, so that the generator's
and the trainer's log-probs (and hence the importance ratio pi_theta / pi_gen) do not differ by
bf16 rounding of the logits. On CPU the body is usually float32 anyway and the switch changes
nothing; it matters for bf16 runs (GPU, or `dtype="bfloat16"` on CPU, which tests use). A policy
wrapped by peft with LoRA adapters (scalerl.models.lora) runs through the model it wraps, whose
adapted layers run the adapters (`plain_model`).

The trainer's log-probs come from the body's hidden states a chunk of positions at a time
(`hidden_token_logprobs`), so that the [batch, length, vocab] float32 logits never exist at once
(forward or backward). For a linear LM head z = h W^T (+ b) the chunks run inside one autograd
function (`_ChunkedHeadLogprobs`): the forward keeps no logits, only the per-position log-probs and
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

import dataclasses
import inspect
from dataclasses import dataclass
from functools import cache

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


@dataclass
class PolicyOutput:
    """Logits [batch, seq, vocab] (float32 with the FP32 head) and the KV cache if requested."""

    logits: torch.Tensor
    past_key_values: object | None


def positions_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids for left-padded rows: position = number of real tokens before; pads get 0."""
    return (attention_mask.long().cumsum(dim=-1) - 1).clamp(min=0)


@cache
def _cache_keyword(forward) -> str:
    """The body's name for the KV cache argument: `cache` in transformers >= 5.2x, where
    `past_key_values` is deprecated; `past_key_values` before."""
    return "cache" if "cache" in inspect.signature(forward).parameters else "past_key_values"


def _returned_cache(body_output) -> object | None:
    """The KV cache of a body output, under either name (`cache` in newer transformers)."""
    names = {f.name for f in dataclasses.fields(body_output)} if dataclasses.is_dataclass(body_output) else set()
    return getattr(body_output, "cache" if "cache" in names else "past_key_values", None)


def is_lora(model: torch.nn.Module) -> bool:
    """True for a peft-wrapped model (adapters attached)."""
    return callable(getattr(model, "get_base_model", None)) and hasattr(model, "peft_config")


def plain_model(model: torch.nn.Module) -> torch.nn.Module:
    """The Hugging Face causal LM itself: the wrapped one of a peft model (its adapted layers sit
    inside it, so running it runs the adapters), else `model`."""
    return model.get_base_model() if is_lora(model) else model


def transformer_body(model: torch.nn.Module) -> torch.nn.Module:
    """The transformer below the LM head (`base_model` of a Hugging Face causal LM); of a
    peft-wrapped policy, that of the model it wraps, whose adapted layers run the adapters."""
    return plain_model(model).base_model


def policy_forward(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    position_ids: torch.Tensor | None = None,
    past_key_values: object | None = None,
    use_cache: bool = False,
    fp32_head: bool = True,
) -> PolicyOutput:
    """Run the body, then the LM head on the last hidden states.

    With `fp32_head` the head is `logits = h.float() @ W.float()^T (+ b)`: float32 logits whatever
    the body dtype (ScaleRL section 4). Without it the model's own head runs in the model dtype.
    `attention_mask` covers the cached positions plus the new ones; `position_ids` default to
    positions derived from the mask (correct for left padding).
    """
    if position_ids is None:
        position_ids = positions_from_mask(attention_mask)[:, -input_ids.shape[1] :]
    body = transformer_body(model)
    body_output = body(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        use_cache=use_cache,
        **{_cache_keyword(type(body).forward): past_key_values},
    )
    logits = head_logits(model, body_output.last_hidden_state, fp32_head=fp32_head)
    return PolicyOutput(logits=logits, past_key_values=_returned_cache(body_output) if use_cache else None)


def head_logits(model: torch.nn.Module, hidden: torch.Tensor, *, fp32_head: bool = True) -> torch.Tensor:
    """The LM head on hidden states [..., H] -> logits [..., V].

    With `fp32_head`: `h.float() @ W.float()^T (+ b)`, float32 whatever the body dtype (ScaleRL
    section 4); without it the model's own head in the model dtype."""
    head = model.get_output_embeddings()
    if fp32_head:
        bias = None if head.bias is None else head.bias.float()
        return F.linear(hidden.float(), head.weight.float(), bias)
    return head(hidden)


def policy_hidden(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The body's last hidden states [batch, seq, hidden] (no LM head, no cache), positions from
    the mask as in `policy_forward`: what the trainer turns into log-probs a chunk at a time."""
    body = transformer_body(model)
    return body(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=positions_from_mask(attention_mask),
        use_cache=False,
    ).last_hidden_state


def policy_logits(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    past_key_values: object | None = None,
    *,
    fp32_head: bool = True,
) -> torch.Tensor:
    """Logits [batch, seq, vocab]: float32 with the FP32 head, else in the model dtype."""
    return policy_forward(model, input_ids, attention_mask, past_key_values=past_key_values, fp32_head=fp32_head).logits


def token_logprobs(logits: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[token]: logits [..., V], token_ids [...] -> float32 log-probs [...].

    The softmax is taken in float32 whatever the logits dtype (bf16 logits are rounded already;
    that rounding is what the FP32 head removes)."""
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    return log_probs.gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)


def teacher_forced_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    fp32_head: bool = True,
) -> torch.Tensor:
    """Log-prob of every token given its prefix: [batch, seq - 1] for tokens 1..seq-1."""
    logits = policy_logits(model, input_ids, attention_mask, fp32_head=fp32_head)
    return token_logprobs(logits[:, :-1], input_ids[:, 1:])


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
