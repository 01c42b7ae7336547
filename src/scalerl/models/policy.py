"""Policy models: the built-in tiny Llama-style model, local Hugging Face loading, and the
FP32 LM head used identically by the generator and the trainer.

FP32 head (ScaleRL, arXiv 2510.13786 section 4; MiniMax-M1): the transformer body may run in
bf16, but the final projection hidden -> logits is computed in float32, so that the generator's
and the trainer's log-probs (and hence the importance ratio pi_theta / pi_gen) do not differ by
bf16 rounding of the logits. On CPU the body is usually float32 anyway and the switch changes
nothing; it matters for bf16 runs (GPU, or `dtype="bfloat16"` on CPU, which tests use).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import shutil
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from scalerl.errors import ConfigError, InputError
from scalerl.models.char_tokenizer import build_char_tokenizer
from scalerl.models.hf_folder import quiet_progress_bars, write_model_folder
from scalerl.models.lora import plain_model

BUILTIN_MODEL = "builtin"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class TinyModelSpec:
    """Shape of the built-in model (defaults: 2 layers, hidden 128, 4 heads, ~0.45 M params)."""

    num_layers: int = 2
    hidden_size: int = 128
    num_heads: int = 4
    intermediate_size: int = 384
    max_positions: int = 256


@dataclass
class PolicyOutput:
    """Logits [batch, seq, vocab] (float32 with the FP32 head) and the KV cache if requested."""

    logits: torch.Tensor
    past_key_values: object | None


def resolve_dtype(name: str | torch.dtype | None) -> torch.dtype | None:
    """Turn "float32" / "bfloat16" / "float16" (or a torch.dtype, or None) into a torch.dtype."""
    if name is None or isinstance(name, torch.dtype):
        return name
    if name not in DTYPES:
        raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return DTYPES[name]


def build_tiny_model(
    spec: TinyModelSpec = TinyModelSpec(), *, seed: int = 0, dtype: str | torch.dtype | None = None
) -> tuple[LlamaForCausalLM, object]:
    """A freshly initialised Llama-style causal LM with the character tokenizer.

    Initialisation is deterministic under `seed` and leaves the global RNG untouched.
    """
    tokenizer = build_char_tokenizer(model_max_length=spec.max_positions)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_heads,
        max_position_embeddings=spec.max_positions,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    body_dtype = resolve_dtype(dtype)
    if body_dtype is not None:
        model = model.to(body_dtype)
    return model, tokenizer


def save_model(model: torch.nn.Module, tokenizer: object, directory: str | os.PathLike) -> Path:
    """Write weights (safetensors), config and tokenizer to `directory`. Everything goes to a
    temporary sibling directory first, renamed into place once complete, so a crash never leaves
    a half-written model at `directory` (an old one there is removed just before the rename)."""
    target = Path(directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        write_model_folder(model, tokenizer, staging)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def load_policy(
    path_or_builtin: str | os.PathLike = BUILTIN_MODEL,
    *,
    dtype: str | torch.dtype | None = None,
    device: str | torch.device = "cpu",
    tiny_spec: TinyModelSpec = TinyModelSpec(),
    seed: int = 0,
) -> tuple[torch.nn.Module, object]:
    """(model, tokenizer) from "builtin" (a fresh tiny model) or a local HF model directory.

    Nothing is downloaded (local_files_only=True). The tokenizer pads on the left (generation)
    and falls back to EOS as pad token when the model has none.
    """
    if str(path_or_builtin) == BUILTIN_MODEL:
        model, tokenizer = build_tiny_model(tiny_spec, seed=seed, dtype=dtype)
        return model.to(device), tokenizer
    path = Path(path_or_builtin)
    if not (path / "config.json").is_file():
        raise InputError(
            f"model path {str(path)!r} is not a local Hugging Face model directory "
            f"(no config.json); use {BUILTIN_MODEL!r} for the built-in tiny model"
        )
    body_dtype = resolve_dtype(dtype)
    with quiet_progress_bars():
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=body_dtype)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.to(device), tokenizer


def count_parameters(model: torch.nn.Module) -> int:
    """Number of parameters (the N of the 2N / 6N FLOPs-per-token estimates)."""
    return sum(parameter.numel() for parameter in model.parameters())


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
