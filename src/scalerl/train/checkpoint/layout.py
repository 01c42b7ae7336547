"""Where a checkpoint's files are: the names of its folders and of its training-state files.

Every checkpoint is a Hugging Face model folder (`AutoModelForCausalLM.from_pretrained` and
`AutoTokenizer.from_pretrained` load it, and so does vLLM); the training state sits in a
subfolder where model loaders do not look. Layout of `RUN/checkpoints/step_00000120/`:
    config.json, generation_config.json, model.safetensors (or shards + index),
    tokenizer files         the policy, written by save_pretrained
    training_state/
      optimizer.safetensors optimiser state tensors, keyed "state/<param id>/<name>"
      rng.safetensors       torch RNG states (global CPU state and the run's generators)
      state.json            step, optimiser param groups and scalar state, LR-scheduler state,
                            numpy RNG state, curriculum pool state, cumulative counters
Checkpoints written before this layout (the same files, flat) still load. A LoRA run's checkpoint
(model.lora_r > 0) holds its adapter instead of the weights (adapter_config.json,
adapter_model.safetensors: what peft's `PeftModel.from_pretrained` loads onto the starting model).
Writing, listing and loading live in scalerl.train.checkpoint.save_load, verification in
scalerl.train.checkpoint.verify; both read these names from here.
"""

from __future__ import annotations

import os
from pathlib import Path

CHECKPOINTS_DIR_NAME = "checkpoints"
TRAINING_STATE_DIR = "training_state"
STATE_FILE = "state.json"
_PREFIX = "step_"


def checkpoint_name(step: int) -> str:
    """The folder name of checkpoint `step` (120 -> step_00000120)."""
    return f"{_PREFIX}{step:08d}"


def checkpoint_step(path: str | os.PathLike) -> int | None:
    """The step in a checkpoint folder's name (step_00000120 -> 120); None for another name."""
    name = Path(path).name
    return int(name[len(_PREFIX) :]) if name.startswith(_PREFIX) and name[len(_PREFIX) :].isdigit() else None


def training_file(checkpoint: str | os.PathLike, name: str) -> Path:
    """Path of a training-state file (state.json, optimizer.safetensors, rng.safetensors) of a
    checkpoint: in its training_state/ subfolder, or beside the weights in the older flat layout."""
    checkpoint = Path(checkpoint)
    nested = checkpoint / TRAINING_STATE_DIR / name
    flat = checkpoint / name
    return flat if not nested.exists() and flat.exists() else nested
