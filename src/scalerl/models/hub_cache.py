"""Hugging Face Hub ids (`org/name`) resolved in the local Hugging Face cache only (HF_HOME; as
with HF_HUB_OFFLINE=1, nothing is downloaded): a model id becomes its cached snapshot folder."""

from __future__ import annotations

import os
import re
from pathlib import Path

from scalerl.errors import InputError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(/[\w.-]+)*$")


def is_hub_id(name: str) -> bool:
    """`org/name` (optionally `/subfolder`...) that is no existing path."""
    return HUB_ID.match(name) is not None and not Path(name).exists()


def hub_cache_dir() -> str | None:
    """HF_HUB_CACHE, else HF_HOME/hub, as set now (huggingface_hub reads them once, when first
    imported); None: huggingface_hub's default."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    return None


def cached_snapshot(repo_id: str, repo_type: str = "model") -> Path:
    """The folder of `repo_id`'s cached snapshot (its `main` revision); InputError saying how to
    fetch it when it is not in the local cache."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, repo_type=repo_type, local_files_only=True, cache_dir=hub_cache_dir()))
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError):
        kind = "dataset" if repo_type == "dataset" else "model"
        raise InputError(
            f"{repo_id!r} is neither a local path nor a {kind} in the local Hugging Face cache "
            f"(HF_HOME); fetch it first: hf download {repo_id} --repo-type {repo_type}"
        ) from None


def cached_model_folder(name: str) -> Path:
    """The cached snapshot folder of model `name` (it must hold a config.json)."""
    folder = cached_snapshot(name, "model")
    if not (folder / "config.json").is_file():
        raise InputError(f"model {name!r} in the local Hugging Face cache has no config.json")
    return folder
