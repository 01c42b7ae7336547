"""Named sizes of the built-in Llama-style model, for model-size sweeps (`--sweep model_size=xs,s,m`).

Each size is a set of `model.*` assignments; "s" is TrainConfig's default (hidden 128, 2 layers,
4 heads, about 0.45 M parameters). Head size stays 32 so only width and depth change.
"""

from __future__ import annotations

from types import MappingProxyType

from scalerl.errors import ConfigError

# name -> (hidden_size, num_layers, num_heads)
MODEL_SIZES = MappingProxyType(
    {
        "xs": (64, 1, 2),
        "s": (128, 2, 4),
        "m": (192, 3, 6),
        "l": (256, 4, 8),
        "xl": (384, 6, 12),
    }
)


def model_size_assignments(name: str) -> tuple[str, ...]:
    """'m' -> ('model.hidden_size=192', 'model.num_layers=3', 'model.num_heads=6')."""
    if name not in MODEL_SIZES:
        raise ConfigError(f"unknown model size {name!r}: choose from {', '.join(MODEL_SIZES)}")
    hidden_size, num_layers, num_heads = MODEL_SIZES[name]
    return (f"model.hidden_size={hidden_size}", f"model.num_layers={num_layers}", f"model.num_heads={num_heads}")
