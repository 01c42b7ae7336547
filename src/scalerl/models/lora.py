"""LoRA adapters through peft (the `peft` extra): wrap a policy, read and write its adapter
weights, merge them into a plain model for export. Whether a policy is wrapped (`is_lora`) and the
model a wrapped one runs through (`plain_model`) belong to its forward pass, scalerl.models.forward.

LoRA (Hu et al. 2021, arXiv 2106.09685): each adapted linear layer W x becomes
W x + (alpha / r) B A x with A [r, in], B [out, r]; W is frozen, only A and B train. peft
initialises B = 0, so the adapted policy starts equal to the starting weights. The adapter's
initialisation draws from a generator seeded by the caller (every process builds the same one).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from scalerl.errors import ConfigError, InputError
from scalerl.models.forward import is_lora

ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors"
ADAPTER_CONFIG_FILE = "adapter_config.json"
ALL_LINEAR = "all-linear"


def require_peft() -> Any:
    """The peft module; ConfigError naming the extra when it is not installed."""
    try:
        import peft
    except ImportError:
        raise ConfigError('model.lora_r > 0 needs peft, which is not installed: pip install "scalerl[peft]"') from None
    return peft


def target_modules(spec: str) -> str | list[str]:
    """model.lora_target_modules -> peft's target_modules: 'all-linear' (every linear layer but
    the output head) or the list of comma-separated module names."""
    names = [name.strip() for name in spec.split(",")]
    return ALL_LINEAR if names == [ALL_LINEAR] else names


def with_lora(model: torch.nn.Module, *, rank: int, alpha: float, targets: str, seed: int = 0) -> torch.nn.Module:
    """`model` wrapped by peft with LoRA adapters of rank `rank` on `targets` (no dropout, no bias):
    the base weights frozen, the adapters trainable. A's initialisation is drawn under `seed`
    (the global RNG is left untouched)."""
    peft = require_peft()
    config = peft.LoraConfig(
        r=rank,
        lora_alpha=alpha,
        target_modules=target_modules(targets),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            return peft.get_peft_model(model, config)
        except ValueError as error:  # a target module the model does not have
            raise ConfigError(f"model.lora_target_modules: {' '.join(str(error).split())[:300]}") from None


def state_to_sync(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The tensors another process needs to hold the same policy, by state-dict name, not copied:
    a LoRA model's trainable adapter weights (its frozen starting weights are built the same way on
    both sides), else the whole state dict. What a trainer publishes and a generator copies into."""
    if not is_lora(model):
        return model.state_dict()
    return {name: parameter for name, parameter in model.named_parameters() if parameter.requires_grad}


def adapter_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The adapter weights by the names peft saves them under (what a LoRA checkpoint holds)."""
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(model)


def load_adapter(model: torch.nn.Module, tensors: dict[str, torch.Tensor], source: str | os.PathLike) -> None:
    """Copy adapter weights into a peft model in place; every adapter tensor must be there with its
    shape, and nothing else (InputError naming `source`)."""
    from peft import set_peft_model_state_dict

    expected = adapter_state(model)
    missing, unexpected = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
    if missing or unexpected:
        detail = f"missing {missing[:3]}" if missing else f"unexpected {unexpected[:3]}"
        raise InputError(f"adapter weights in {source} do not fit this model: {detail}")
    for name, tensor in tensors.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise InputError(
                f"adapter weights in {source} do not fit this model: {name} has shape "
                f"{tuple(tensor.shape)}, the model {tuple(expected[name].shape)}"
            )
    set_peft_model_state_dict(model, tensors)


def is_adapter_folder(directory: str | os.PathLike) -> bool:
    """True when `directory` holds a peft adapter (its config and weights)."""
    directory = Path(directory)
    return (directory / ADAPTER_CONFIG_FILE).is_file() and (directory / ADAPTER_WEIGHTS_FILE).is_file()


def merged_model(model: torch.nn.Module) -> torch.nn.Module:
    """A plain Hugging Face model with the adapters merged into its weights (W + alpha / r B A;
    peft's merge_and_unload). The peft model is unusable afterwards."""
    return model.merge_and_unload(progressbar=False, safe_merge=True)
