"""A task named by a Hugging Face Hub dataset id (`org/name`, or `org/name/subfolder` for one of
its configurations), read from the local Hugging Face cache only (as with HF_HUB_OFFLINE=1:
nothing is downloaded). Its parquet and JSONL files are the task's rows; a file named like a
split (train-*, test-*, validation-*) places rows that name no split themselves.
"""

from __future__ import annotations

import re
from pathlib import Path

from scalerl.errors import InputError
from scalerl.models.hub_cache import cached_snapshot, is_hub_id

DATA_SUFFIXES = (".parquet", ".jsonl")
_SPLIT_WORDS = {
    "train": "train",
    "test": "test",
    "validation": "validation",
    "valid": "validation",
    "val": "validation",
    "eval": "eval",
    "dev": "validation",
}


def is_hub_dataset_id(name: str) -> bool:
    """A name that is no existing path, has no data-file suffix and reads org/name[/subfolder]."""
    return is_hub_id(name) and not name.lower().endswith((*DATA_SUFFIXES, ".json"))


def split_of_file(path: Path) -> str | None:
    """'train-00000-of-00001.parquet' -> 'train', 'test.jsonl' -> 'test'; None when the name says no split."""
    words = re.split(r"[-_.]", path.name.lower())
    return next((_SPLIT_WORDS[word] for word in words if word in _SPLIT_WORDS), None)


def cached_dataset_files(name: str) -> list[Path]:
    """The data files of hub dataset `name` in the local cache, sorted; InputError when it is not
    cached, holds no data file, or holds several configurations and `name` picks none."""
    parts = name.split("/")
    repo_id, subfolder = "/".join(parts[:2]), "/".join(parts[2:])
    root = cached_snapshot(repo_id, "dataset")
    base = root / subfolder if subfolder else root
    files = sorted(path for path in base.rglob("*") if path.suffix in DATA_SUFFIXES and path.is_file())
    if not files:
        raise InputError(f"dataset {name!r} in the local Hugging Face cache holds no .parquet or .jsonl file")
    folders = sorted({path.parent.relative_to(root).as_posix() for path in files})
    if len(folders) > 1:
        raise InputError(
            f"dataset {name!r} holds several configurations ({', '.join(folders)}): "
            f"name one, e.g. {repo_id}/{folders[0]}"
        )
    return files
