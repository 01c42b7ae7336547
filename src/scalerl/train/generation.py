"""The decoder behind every rollout: a manual, batched KV-cache decoding loop with per-step hooks.

For P prompts x G generations: left-padded prompts, sampling at the configured temperature, top-k,
top-p and repetition penalty, the generator's per-token log-probs (the policy's own, from the FP32
head), per-token weight versions, EOS / length stops and ScaleRL's forced interruption of
over-long thinking (arXiv 2510.13786, section 4; each sequence's thinking budget drawn by
`sample_interruption_budget`).
`weight_update_hook()` runs between decoding steps (PipelineRL in-flight weight updates: the
model's weights change in place, the KV cache is kept, later tokens carry the new version).
`decode_prompts` returns each sequence's `SequenceState` (and, asked, the batch's TokenGrid);
scalerl.train.step_rollouts turns them into Rollouts or a packed batch.

Performance note: the built-in model's matrices are tiny, so on a small shared CPU one torch
thread per process (`torch.set_num_threads(1)`) is much faster than the default, which
oversubscribes the cores (measured: a 40-step warm-up took 40 s with the default threads under
load and 0.5 s with one thread).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from scalerl.errors import ConfigError, InputError
from scalerl.models.forward import policy_forward, positions_from_mask
from scalerl.tasks.rollout import LengthControl, SamplingSettings
from scalerl.train.batch.packed_rollouts import TokenGrid

WeightUpdateHook = Callable[[], "int | None"]


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus filtering (Holtzman et al. 2020): keep the smallest set of most likely tokens whose
    probability mass reaches `top_p`; the others get -inf. logits [N, V] -> [N, V]."""
    if top_p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    sorted_probs = torch.softmax(sorted_logits, dim=-1)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    sorted_logits = sorted_logits.masked_fill(mass_before >= top_p, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)


def top_k_filter(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """Top-k filtering (Fan et al. 2018): keep the `top_k` largest logits of each row (and those
    tied with the k-th), the others get -inf; top_k 0 keeps all. logits [N, V] -> [N, V]."""
    if top_k <= 0 or top_k >= logits.shape[-1]:
        return logits
    kth_largest = torch.topk(logits, top_k, dim=-1).values[:, -1:]
    return logits.masked_fill(logits < kth_largest, float("-inf"))


def apply_repetition_penalty(logits: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """The CTRL repetition penalty (Keskar et al. 2019), as TRL's generators apply it: the logit l of
    every token already in the sequence (prompt and completion so far; `seen` [N, V] bool) becomes
    l / penalty when l > 0 and l * penalty otherwise; penalty 1 changes nothing. logits [N, V]."""
    if penalty == 1.0:
        return logits
    penalised = torch.where(logits > 0, logits / penalty, logits * penalty)
    return torch.where(seen, penalised, logits)


def gumbel_noise(
    num_rows: int, vocab_size: int, generator: torch.Generator, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Standard Gumbel noise g = -log(-log u), u ~ U[0, 1) i.i.d., shape [num_rows, vocab_size].

    u = 0 gives g = -inf (that token is never picked): an event of probability 2^-24 per entry.
    Drawn for every row of the decoding batch, finished or not, so that which rows are still
    decoding never changes what the others sample."""
    uniform = torch.rand(num_rows, vocab_size, generator=generator, device=device)
    return -torch.log(-torch.log(uniform))


def sample_with_noise(
    logits: torch.Tensor, sampling: SamplingSettings, noise: torch.Tensor, seen: torch.Tensor | None = None
) -> torch.Tensor:
    """One token per row from softmax(top_p(top_k(penalised(logits) / temperature))), by the
    Gumbel-max trick: argmax_v (l_v + g_v) with g_v i.i.d. standard Gumbel is distributed as
    softmax(l) (Gumbel 1954; Maddison, Tarlow & Minka 2014). logits, noise [N, V] -> ids [N];
    `seen` [N, V]: the tokens the repetition penalty applies to (None: no penalty).
    Temperature 0: argmax_v of the penalised logits (greedy; the noise is drawn and ignored).

    On a CPU this is ~5x faster than torch.multinomial (whose exponential draws dominate a
    decoding step of the built-in model)."""
    logits = logits.float()
    if seen is not None:
        logits = apply_repetition_penalty(logits, seen, sampling.repetition_penalty)
    if sampling.temperature == 0:  # greedy: the limit of softmax(l / T) as T -> 0
        return torch.argmax(logits, dim=-1)
    scaled = top_p_filter(top_k_filter(logits / sampling.temperature, sampling.top_k), sampling.top_p)
    return torch.argmax(scaled + noise, dim=-1)


def left_pad(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask), both [N, max_len], real tokens right-aligned."""
    width = max(len(sequence) for sequence in sequences)
    input_ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        if sequence:
            input_ids[row, width - len(sequence) :] = torch.tensor(sequence, dtype=torch.long)
            attention_mask[row, width - len(sequence) :] = 1
    return input_ids, attention_mask


@dataclass
class SequenceState:
    """Book-keeping of one sequence during decoding."""

    budget: int | None
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    forced: list[int] = field(default_factory=list)
    thinking_done: bool = False
    interrupted: bool = False
    finished: bool = False


def sample_interruption_budget(min_tokens: int, max_tokens: int, rng: np.random.Generator | torch.Generator) -> int:
    """Thinking budget (tokens) drawn uniformly from the integers min_tokens..max_tokens inclusive
    (ScaleRL's forced interruption: the thinking is cut at a random point between two budgets).

    `rng` is a numpy Generator or a torch.Generator (so the generator's own seeded stream can be
    used and generation stays deterministic).
    """
    if min_tokens < 0 or max_tokens < min_tokens:
        raise ConfigError(
            f"thinking budgets must satisfy 0 <= min_tokens <= max_tokens, got {min_tokens}, {max_tokens}"
        )
    if isinstance(rng, torch.Generator):
        return int(torch.randint(min_tokens, max_tokens + 1, (1,), generator=rng, device=rng.device).item())
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(min_tokens, max_tokens, endpoint=True))
    raise InputError(f"rng must be a numpy.random.Generator or torch.Generator, got {type(rng).__name__}")


def _encode(tokenizer, text: str) -> list[int]:
    """Token ids of `text` alone, without BOS/EOS."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _eos_ids(model: torch.nn.Module, tokenizer) -> set[int]:
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if configured is not None:
        ids.update(configured if isinstance(configured, (list, tuple)) else [configured])
    if not ids:
        raise InputError("the tokenizer has no EOS token; generation could never stop")
    return ids


def _record_token(
    state: SequenceState,
    token: int,
    logprob: float,
    version: int,
    forced: bool,
    eos_ids: set[int],
    think_end_ids: list[int],
    length_control: LengthControl,
    phrase_ids: list[int],
) -> None:
    """Append one token and update the stop / thinking / interruption state."""
    state.tokens.append(token)
    state.logprobs.append(logprob)
    state.versions.append(version)
    state.loss_mask.append(0 if forced else 1)
    if not forced and token in eos_ids:
        state.finished = True
        return
    if not state.thinking_done and state.tokens[-len(think_end_ids) :] == think_end_ids:
        state.thinking_done = True
    must_interrupt = (
        state.budget is not None and not state.thinking_done and not state.forced and len(state.tokens) >= state.budget
    )
    if must_interrupt:
        state.forced = list(phrase_ids)
        state.interrupted = True


def skip_decoding_steps(generator: torch.Generator, steps: int, num_rows: int, vocab_size: int) -> None:
    """Advance `generator` past `steps` decoding steps' noise of `num_rows` rows (what a shard that
    finished early has not drawn), so that it ends where the whole batch's generation ends."""
    for _ in range(max(int(steps), 0)):
        gumbel_noise(num_rows, vocab_size, generator, generator.device)


def decode_prompts(
    model,
    tokenizer,
    prompts,
    prompt_indices,
    *,
    num_generations,
    sampling,
    length_control,
    torch_generator,
    policy_version,
    weight_update_hook,
    prompt_rows,
    record_grid=False,
):
    """Tokenise the prompts, draw every sequence's thinking budget, decode the sequences of the
    prompts in `prompt_rows`: (prompt ids of every prompt, first sequence row of the shard, the
    shard's states, decoding steps, its TokenGrid or None), or None for an empty shard."""
    if len(prompts) != len(prompt_indices):
        raise InputError(f"{len(prompts)} prompts but {len(prompt_indices)} prompt indices")
    if num_generations < 1 or not prompts:
        raise InputError("generate_rollouts needs at least one prompt and num_generations >= 1")
    prompt_ids = [sampling.cut_prompt(tokenizer(prompt)["input_ids"]) for prompt in prompts]
    sequences = [ids for ids in prompt_ids for _ in range(num_generations)]
    interrupting = length_control.mode == "interrupt"
    states = [
        SequenceState(
            budget=sample_interruption_budget(
                length_control.thinking_budget_min, length_control.thinking_budget_max, torch_generator
            )
            if interrupting
            else None
        )
        for _ in sequences
    ]
    shard = range(len(prompts))[prompt_rows]
    first, stop = shard.start * num_generations, shard.stop * num_generations
    if first >= stop:
        return None
    grid = TokenGrid.empty(stop - first, sampling.max_new_tokens) if record_grid else None
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            steps = _decode(
                model,
                sequences[first:stop],
                states[first:stop],
                sampling,
                torch_generator,
                policy_version,
                weight_update_hook,
                _eos_ids(model, tokenizer),
                _encode(tokenizer, length_control.think_end_text),
                length_control,
                _encode(tokenizer, length_control.interruption_phrase),
                tokenizer.pad_token_id,
                noise_rows=(len(states), first),
                grid=grid,
            )
    finally:
        model.train(was_training)
    return prompt_ids, first, states[first:stop], steps, grid


def should_compact(num_finished: int, num_decoding: int) -> bool:
    """Drop finished rows from the decoding batch once they are >= 1/8 of it: a compaction copies
    the KV cache once, so waiting for a fraction bounds the copies while no step carries more
    than ~1/8 dead rows."""
    return num_finished > 0 and num_finished * 8 >= num_decoding


def _decode(
    model,
    sequences,
    states,
    sampling,
    generator,
    version,
    hook,
    eos_ids,
    think_end_ids,
    length_control,
    phrase_ids,
    pad_id,
    noise_rows: tuple[int, int] | None = None,
    grid: TokenGrid | None = None,
) -> int:
    """The decoding loop: prefill, then one forward per new token, until all stop or the limit;
    returns the number of decoding steps (noise draws) made.

    `rows` maps the decoding batch to `states`: finished sequences leave the batch (KV cache,
    mask and positions are index-selected) so later steps only pay for live ones. `noise_rows`
    (rows drawn, first row of these states): each step draws that many rows of noise and these
    states use theirs (default: one row per state). `grid` (one row per state), when given,
    records every token as the states do."""
    input_ids, attention_mask = left_pad(sequences, pad_id if pad_id is not None else 0)
    device = next(model.parameters()).device
    input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
    positions = positions_from_mask(attention_mask)
    next_positions = positions[:, -1:] + 1
    rows = list(range(len(states)))
    drawn_rows, first_row = noise_rows if noise_rows is not None else (len(states), 0)
    cache = None
    seen = None  # [rows, V] bool: the tokens of each sequence so far, for the repetition penalty
    for step in range(sampling.max_new_tokens):
        if step > 0 and hook is not None:
            new_version = hook()
            version = version if new_version is None else int(new_version)
        output = policy_forward(
            model,
            input_ids,
            attention_mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            fp32_head=sampling.fp32_head,
        )
        cache = output.past_key_values
        logits = output.logits[:, -1, :]
        noise = gumbel_noise(drawn_rows, logits.shape[-1], generator, logits.device)
        if len(rows) < drawn_rows:
            noise = noise[torch.tensor(rows, device=noise.device) + first_row]
        live = [states[row] for row in rows]
        if seen is None and sampling.repetition_penalty != 1.0:
            seen = _tokens_seen(input_ids, attention_mask, logits.shape[-1])
        tokens = sample_with_noise(logits, sampling, noise, seen).tolist()
        is_forced = [bool(state.forced) and not state.finished for state in live]
        tokens = [state.forced.pop(0) if forced else token for state, token, forced in zip(live, tokens, is_forced)]
        token_ids = torch.tensor(tokens, dtype=torch.long, device=logits.device)
        if seen is not None:
            seen[torch.arange(len(rows), device=seen.device), token_ids] = True
        chosen_logprobs = torch.log_softmax(logits.float(), dim=-1).gather(-1, token_ids[:, None])[:, 0].tolist()
        recording = [index for index, state in enumerate(live) if not state.finished]
        if grid is not None:
            grid.write(
                [rows[i] for i in recording],
                [tokens[i] for i in recording],
                [chosen_logprobs[i] for i in recording],
                version,
                [not is_forced[i] for i in recording],
            )
        for index in recording:
            _record_token(
                live[index],
                tokens[index],
                chosen_logprobs[index],
                version,
                is_forced[index],
                eos_ids,
                think_end_ids,
                length_control,
                phrase_ids,
            )
        still_decoding = [index for index, state in enumerate(live) if not state.finished]
        if not still_decoding:
            return step + 1
        input_ids = token_ids.unsqueeze(-1)
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones((len(rows), 1))], dim=1)
        positions = next_positions
        next_positions = next_positions + 1
        if should_compact(len(rows) - len(still_decoding), len(rows)) and hasattr(cache, "batch_select_indices"):
            keep = torch.tensor(still_decoding, device=input_ids.device)
            cache.batch_select_indices(keep)
            input_ids, attention_mask = input_ids[keep], attention_mask[keep]
            positions, next_positions = positions[keep], next_positions[keep]
            seen = seen[keep] if seen is not None else None
            rows = [rows[index] for index in still_decoding]
    return sampling.max_new_tokens


def _tokens_seen(input_ids: torch.Tensor, attention_mask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """[N, vocab_size] bool: which token ids occur among each row's real (unmasked) tokens."""
    counts = torch.zeros(input_ids.shape[0], vocab_size, dtype=torch.long, device=input_ids.device)
    return counts.scatter_add_(1, input_ids, attention_mask.long()) > 0


def completion_text(state: SequenceState, tokenizer) -> str:
    """The completion's text: its tokens without the stopping EOS, special tokens skipped."""
    return tokenizer.decode(state.tokens[:-1] if state.finished else state.tokens, skip_special_tokens=True)
