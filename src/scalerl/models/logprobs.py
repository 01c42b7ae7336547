"""Log-probs of given tokens from the body's hidden states, computed a chunk of positions at a time
so that the [batch, length, vocab] float32 logits never exist at once (forward or backward).

Each chunk's LM head, log-softmax and gather run under `torch.utils.checkpoint` (non-reentrant):
the forward keeps only the chunk's log-probs, the backward recomputes the chunk's logits, so the
peak holds one chunk's logits, [batch, chunk, vocab], instead of the whole sequence's. The cost
is a second LM-head forward per chunk in the backward pass.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from scalerl.models.policy import head_logits


def _chunk_logprobs_and_entropy(model: torch.nn.Module, hidden: torch.Tensor, token_ids: torch.Tensor,
                                fp32_head: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p(token), entropy H) per position of one chunk; H carries no gradient.

        log p_t = log_softmax(head(h_t))[token_t],   H_t = -sum_v p_t(v) log p_t(v)

    in float32, or in the logits' dtype when it is wider (a float64 model stays float64)."""
    logits = head_logits(model, hidden, fp32_head=fp32_head)
    log_probs = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    token_logprob = log_probs.gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)
    detached = log_probs.detach()
    return token_logprob, -(detached.exp() * detached).sum(dim=-1)


def hidden_token_logprobs(model: torch.nn.Module, hidden: torch.Tensor, token_ids: torch.Tensor, *,
                          fp32_head: bool = True, chunk_size: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs [N, T] of `token_ids` [N, T] under the LM head applied to `hidden` [N, T, H] (the
    hidden state that predicts each token), and the per-position entropy [N, T] (no gradient).

    chunk_size > 0: positions [s, s + chunk_size) at a time, each chunk checkpointed (see the
    module docstring); the values equal the unchunked ones up to float rounding. chunk_size = 0
    (or >= T): one piece, no checkpoint.
    """
    length = token_ids.shape[1]
    if chunk_size <= 0 or chunk_size >= length:
        return _chunk_logprobs_and_entropy(model, hidden, token_ids, fp32_head)
    logprobs, entropies = [], []
    for start in range(0, length, chunk_size):
        stop = start + chunk_size
        chunk = (model, hidden[:, start:stop], token_ids[:, start:stop], fp32_head)
        if torch.is_grad_enabled():
            token_logprob, entropy = checkpoint(_chunk_logprobs_and_entropy, *chunk, use_reentrant=False)
        else:
            token_logprob, entropy = _chunk_logprobs_and_entropy(*chunk)
        logprobs.append(token_logprob)
        entropies.append(entropy)
    return torch.cat(logprobs, dim=1), torch.cat(entropies, dim=1)
