"""A checkpoint's manifest: every file's size and SHA-256, so damage to any byte is found.

`training_state/manifest.json` lists each regular file of a checkpoint folder (path relative to
the folder, size in bytes, hex SHA-256); it is written last (temporary file, fsync, rename) once
every other file is durable, so a manifest exists only for a complete checkpoint. `verify_manifest`
re-reads every file: a missing, resized or changed file, a file that is not a regular file (a
symbolic link, a FIFO) or a manifest that does not parse is an InputError naming the file.
A checkpoint without a manifest (written by an older scalerl) makes `verify_manifest` return
False; whether that is damage is the caller's policy (scalerl.train.checkpoint.verify).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from scalerl.errors import InputError

MANIFEST_FILE = "manifest.json"
MANIFEST_DIR = "training_state"
_FORMAT = 1
_CHUNK_BYTES = 1 << 20


def manifest_path(folder: str | os.PathLike) -> Path:
    return Path(folder) / MANIFEST_DIR / MANIFEST_FILE


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _regular_files(folder: Path) -> list[str]:
    """Relative paths of the regular files under `folder` (the manifest itself left out), sorted."""
    found = []
    for root, _, names in os.walk(folder):
        for name in names:
            path = Path(root) / name
            relative = path.relative_to(folder).as_posix()
            if relative != f"{MANIFEST_DIR}/{MANIFEST_FILE}" and stat.S_ISREG(os.lstat(path).st_mode):
                found.append(relative)
    return sorted(found)


def write_manifest(folder: str | os.PathLike) -> Path:
    """List every file of `folder` with its size and SHA-256 in its manifest (temporary file,
    fsync, rename); an OSError (disk full) is raised as is, for the caller to name its folder."""
    folder = Path(folder)
    files = {
        relative: {"size": (folder / relative).stat().st_size, "sha256": file_sha256(folder / relative)}
        for relative in _regular_files(folder)
    }
    path = manifest_path(folder)
    path.parent.mkdir(exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as handle:  # an OSError is the caller's to name (the checkpoint)
        handle.write(json.dumps({"format": _FORMAT, "files": files}, indent=1).encode())
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    return path


def read_manifest(folder: str | os.PathLike) -> dict[str, dict] | None:
    """{relative path: {"size", "sha256"}} of the folder's manifest; None when it has none."""
    path = manifest_path(folder)
    if not path.exists() and not path.is_symlink():
        return None
    if not stat.S_ISREG(os.lstat(path).st_mode):
        raise InputError(f"{path} is damaged: not a regular file")
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"))
        files = manifest["files"]
        ok = isinstance(files, dict) and all(
            isinstance(name, str)
            and isinstance(entry, dict)
            and isinstance(entry.get("size"), int)
            and isinstance(entry.get("sha256"), str)
            for name, entry in files.items()
        )
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise InputError(f"{path} is damaged: {type(error).__name__}") from None
    if not ok:
        raise InputError(f"{path} is damaged: its entries are not {{path: {{size, sha256}}}}")
    return files


def _inside(folder: Path, relative: str) -> Path:
    path = folder / relative
    if Path(relative).is_absolute() or ".." in Path(relative).parts:
        raise InputError(f"{manifest_path(folder)} is damaged: it lists {relative[:200]!r}, outside the checkpoint")
    return path


def verify_manifest(folder: str | os.PathLike, *, checksums: bool = True) -> bool:
    """Check every file the manifest lists (regular file, size, and with `checksums` SHA-256); True
    when checked, False when the folder has no manifest. InputError names the first file that
    differs. Sizes alone cost a stat per file: a caller checks them before reading headers, and
    hashes once the headers bound what each file may hold."""
    folder = Path(folder)
    files = read_manifest(folder)
    if files is None:
        return False
    for relative, entry in files.items():
        path = _inside(folder, relative)
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            raise InputError(f"{path} is missing (listed in the checkpoint's manifest)") from None
        if not stat.S_ISREG(mode):
            raise InputError(f"{path} is damaged: not a regular file (a symbolic link or a device)")
        size = os.lstat(path).st_size
        if size != entry["size"]:
            raise InputError(f"{path} is damaged: {size} bytes, the manifest says {entry['size']}")
        if checksums and file_sha256(path) != entry["sha256"]:
            raise InputError(f"{path} is damaged: its SHA-256 differs from the manifest's")
    return True
