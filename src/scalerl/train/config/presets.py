"""Named recipes: ScaleRL and the prevalent recipes it is compared with, as `--set` overrides.

The defaults of `TrainConfig` are the ScaleRL recipe (Khatri, Madaan et al., arXiv 2510.13786,
section 4 and Table 1) with batch and learning rate scaled to the built-in tiny model. Every other
preset is the ScaleRL config with the knobs that recipe changes; the leave-one-out ablations of the
paper are ScaleRL with exactly one knob flipped, so each is a single `--set`.
Other recipes are approximations of the published descriptions, at tiny-model scale:
GRPO / DeepSeek (arXiv 2402.03300), DAPO (arXiv 2503.14476), GSPO (arXiv 2507.18071),
MiniMax-M1 (arXiv 2506.13585), Magistral (arXiv 2506.10910).
"""

from __future__ import annotations

from dataclasses import dataclass

from scalerl.errors import ConfigError
from scalerl.train.config.train_config import TrainConfig


@dataclass(frozen=True)
class Preset:
    """A named recipe: a description and the overrides applied to the ScaleRL defaults."""

    name: str
    description: str
    overrides: tuple[str, ...]


# What GRPO and GSPO change alike: each sequence weighs the same, prompt-std advantages, no filter,
# no curriculum, truncation, no FP32 head; they differ in the loss.
SEQUENCE_LEVEL_BASELINE = (
    "rl.aggregation=sample",
    "rl.advantage_norm=prompt",
    "rl.zero_variance_filter=false",
    "rl.npr=false",
    "sampling.length_control=truncate",
    "model.fp32_head=false",
)

PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            "scalerl",
            "ScaleRL: CISPO, prompt-level aggregation, batch-std advantages, "
            "zero-variance filter, no-positive-resampling 0.9, forced interruption, FP32 head",
            (),
        ),
        Preset(
            "grpo",
            "DeepSeek-style GRPO: symmetric clip 0.2, sample-level aggregation, "
            "prompt-std advantages, no filter, no curriculum, truncation, no FP32 head",
            ("rl.loss=grpo", *SEQUENCE_LEVEL_BASELINE),
        ),
        Preset(
            "dapo",
            "DAPO: clip-higher (0.2/0.28), token-level aggregation, prompt-std "
            "advantages, zero-variance filter, overlong length penalty, no FP32 head",
            (
                "rl.loss=dapo",
                "rl.aggregation=token",
                "rl.advantage_norm=prompt",
                "rl.npr=false",
                "sampling.length_control=penalty",
                "model.fp32_head=false",
            ),
        ),
        Preset(
            "gspo",
            "GSPO: sequence-level ratio with tight clipping, sample-level aggregation, "
            "prompt-std advantages, truncation, no FP32 head",
            ("rl.loss=gspo", *SEQUENCE_LEVEL_BASELINE),
        ),
        Preset(
            "minimax",
            "MiniMax-M1: CISPO, token-level aggregation, prompt-std advantages, FP32 head, truncation, no curriculum",
            ("rl.aggregation=token", "rl.advantage_norm=prompt", "rl.npr=false", "sampling.length_control=truncate"),
        ),
        Preset(
            "magistral",
            "Magistral: clip-higher loss, token-level aggregation, batch-std "
            "advantages, zero-variance filter, length penalty, no FP32 head",
            (
                "rl.loss=dapo",
                "rl.aggregation=token",
                "rl.npr=false",
                "sampling.length_control=penalty",
                "model.fp32_head=false",
            ),
        ),
    )
}

# Leave-one-out ablations of the paper (section 4.1): ScaleRL with exactly one knob flipped.
LEAVE_ONE_OUT: dict[str, str] = {
    "loss: DAPO instead of CISPO": "rl.loss=dapo",
    "loss: GSPO instead of CISPO": "rl.loss=gspo",
    "aggregation: sample-level": "rl.aggregation=sample",
    "aggregation: token-level": "rl.aggregation=token",
    "advantages: prompt-level std": "rl.advantage_norm=prompt",
    "advantages: no normalisation": "rl.advantage_norm=none",
    "no zero-variance filter": "rl.zero_variance_filter=false",
    "no no-positive-resampling": "rl.npr=false",
    "no FP32 LM head": "model.fp32_head=false",
    "length penalty instead of interruption": "sampling.length_control=penalty",
}


def preset_config(name: str, overrides: tuple[str, ...] | list[str] = ()) -> TrainConfig:
    """The TrainConfig of preset `name` with further `key=value` overrides applied after it."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}: choose one of {', '.join(PRESETS)}")
    return TrainConfig().with_overrides([*PRESETS[name].overrides, *overrides])
