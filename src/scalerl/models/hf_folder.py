"""Hugging Face model folders: write a model and its tokenizer so that
`AutoModelForCausalLM.from_pretrained` / `AutoTokenizer.from_pretrained` (and vLLM) load them,
and read the weights of such a folder back into a model that is already built.

A folder holds `config.json`, `generation_config.json`, the weights (`model.safetensors`, or
shards listed in `model.safetensors.index.json`) and the tokenizer files. Writing never shows
transformers' "Writing model shards" bar: a run's output stays one line per event.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from transformers.utils import logging as hf_logging

from scalerl.errors import InputError
from scalerl.models.forward import is_lora
from scalerl.models.lora import ADAPTER_WEIGHTS_FILE, load_adapter

WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"
MODEL_CONFIG_FILE = "config.json"


@contextlib.contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """Turn transformers' progress bars off for the block (restored afterwards)."""
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def write_model_folder(model: torch.nn.Module, tokenizer: object | None, directory: str | os.PathLike) -> None:
    """`save_pretrained` of the model (safetensors) and, when given, the tokenizer into `directory`."""
    with quiet_progress_bars():
        model.save_pretrained(directory, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(directory)


def is_model_folder(directory: str | os.PathLike) -> bool:
    """True when `directory` has a model config and weights (from_pretrained can load it)."""
    directory = Path(directory)
    return (directory / MODEL_CONFIG_FILE).is_file() and (
        (directory / WEIGHTS_FILE).is_file() or (directory / WEIGHTS_INDEX_FILE).is_file()
    )


def weight_files(directory: str | os.PathLike) -> list[Path]:
    """The safetensors files holding the weights: the shards of the index, else model.safetensors
    (a LoRA checkpoint's adapter_model.safetensors when that is all there is)."""
    directory = Path(directory)
    index = directory / WEIGHTS_INDEX_FILE
    adapter = directory / ADAPTER_WEIGHTS_FILE
    if not index.is_file() and not (directory / WEIGHTS_FILE).exists() and adapter.is_file():
        return [adapter]  # a LoRA checkpoint holds the adapter only (scalerl.models.lora)
    if not index.is_file():
        return [directory / WEIGHTS_FILE]
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        return [directory / name for name in sorted(set(weight_map.values()))]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise InputError(f"{index} is unreadable: {error}") from None


def read_weights(directory: str | os.PathLike) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's weight files, by name; InputError names a damaged file."""
    tensors: dict[str, torch.Tensor] = {}
    for path in weight_files(directory):
        try:
            tensors.update(load_file(str(path)))
        except FileNotFoundError:
            raise InputError(f"{path} is missing") from None
        except MemoryError:
            raise InputError(f"{path} is damaged or too large: reading it needs more memory than there is") from None
        except (SafetensorError, OSError, ValueError, RuntimeError) as error:
            raise InputError(f"{path} is damaged or not a safetensors file: {error}") from None
    return tensors


def load_weights_into(model: torch.nn.Module, directory: str | os.PathLike) -> None:
    """Copy the folder's weights into `model` in place.

    `save_pretrained` leaves out tied weights (an LM head sharing the embedding matrix), so a
    parameter may be missing only when it shares its storage with one that was loaded. Any other
    missing or unexpected name, or a shape that differs, is an InputError naming the folder.
    A peft-wrapped model takes the folder's adapter weights (scalerl.models.lora).
    """
    tensors = read_weights(directory)
    if is_lora(model):
        load_adapter(model, tensors, directory)
        return
    expected = model.state_dict()
    unexpected = sorted(set(tensors) - set(expected))
    shared = _shared_names(expected, loaded=set(tensors))
    missing = sorted(set(expected) - set(tensors) - shared)
    if unexpected or missing:
        detail = f"missing {missing[:3]}" if missing else f"unexpected {unexpected[:3]}"
        raise InputError(f"weights in {directory} do not fit this model: {detail}")
    for name, tensor in tensors.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise InputError(
                f"weights in {directory} do not fit this model: {name} has shape "
                f"{tuple(tensor.shape)}, the model {tuple(expected[name].shape)}"
            )
    model.load_state_dict(tensors, strict=False)


def _shared_names(state: dict[str, torch.Tensor], *, loaded: set[str]) -> set[str]:
    """Names not in `loaded` whose tensor shares storage with a loaded one (tied weights)."""
    pointers = {state[name].untyped_storage().data_ptr() for name in loaded if name in state}
    return {
        name for name, tensor in state.items() if name not in loaded and tensor.untyped_storage().data_ptr() in pointers
    }
