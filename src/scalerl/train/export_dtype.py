"""`scalerl export --dtype`: an exported model folder's weights cast to one floating dtype, and the
note that says when the exported LM head computes in another precision than the run's did
(a run with model.fp32_head computed its logits in float32 whatever the body dtype; a bfloat16
export loaded by from_pretrained computes them in bfloat16, so they differ slightly).
"""

from __future__ import annotations

import json
from pathlib import Path

from scalerl.errors import InputError
from scalerl.models.hf_folder import weight_files

EXPORT_DTYPES = ("float32", "bfloat16", "float16")
_HEADER_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16", "F64": "float64"}
HEAD_NAMES = ("lm_head.weight", "model.embed_tokens.weight")  # the head, or the embedding tied to it


def cast_model_folder(folder: Path, dtype: str) -> None:
    """Every floating tensor of the folder's safetensors files cast to `dtype` (files rewritten),
    and config.json's torch_dtype / dtype set to it."""
    if dtype not in EXPORT_DTYPES:
        raise InputError(f"--dtype must be one of {', '.join(EXPORT_DTYPES)}, got {dtype!r}")
    import torch
    from safetensors.torch import load_file, save_file

    target = getattr(torch, dtype)
    for path in weight_files(folder):
        tensors = {
            name: tensor.to(target) if tensor.is_floating_point() else tensor
            for name, tensor in load_file(path).items()
        }
        save_file(tensors, path, metadata={"format": "pt"})
    config_path = folder / "config.json"
    if config_path.is_file():
        config = json.loads(config_path.read_text())
        for key in ("torch_dtype", "dtype"):
            if key in config or key == "torch_dtype":
                config[key] = dtype
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def head_dtype(folder: Path) -> str | None:
    """The dtype the folder stores its LM head in (its tied embedding when it has no head of its
    own), from the safetensors headers; None when neither is found."""
    from safetensors import safe_open

    for path in weight_files(folder):
        with safe_open(path, framework="pt") as weights:
            names = set(weights.keys())
            for name in HEAD_NAMES:
                if name in names:
                    return _HEADER_DTYPES.get(weights.get_slice(name).get_dtype(), None)
    return None


def head_precision_note(trained_head: str, folder: Path) -> str | None:
    """'note: ...' when the exported head's dtype differs from `trained_head` (the dtype the run
    computed its logits in), else None."""
    exported = head_dtype(folder)
    if exported is None or exported == trained_head:
        return None
    return (
        f"note: the run computed its LM head in {trained_head}; the exported head is {exported}, so "
        f"from_pretrained's logits differ slightly from the trained ones (--dtype {trained_head} keeps "
        "the head's precision)"
    )


def trained_head_dtype(run_dir: Path) -> str | None:
    """float32 when the run's config had model.fp32_head, else its dtype; None without a config."""
    from scalerl.train.config.train_config import load_config

    if not (run_dir / "config.json").is_file():
        return None
    config = load_config(run_dir)
    return "float32" if config.model.fp32_head else config.dtype
