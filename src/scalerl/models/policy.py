"""Policy models made, loaded and saved: the built-in tiny Llama-style model with its character
tokenizer, a local Hugging Face model folder, the body's dtype. What the policy computes is
scalerl.models.forward.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from scalerl.errors import ConfigError, InputError
from scalerl.models.char_tokenizer import build_char_tokenizer
from scalerl.models.hf_folder import quiet_progress_bars, write_model_folder

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
