"""Which reader reads a path: by what the file holds first, then by its suffix."""

from __future__ import annotations

import codecs
import re
from pathlib import Path

from scalerl.errors import InputError
from scalerl.forecast.readers.csv_format import read_csv_table
from scalerl.forecast.readers.jsonl import load_json, read_json_table
from scalerl.forecast.readers.log_files import check_regular_file
from scalerl.forecast.readers.table import LogTable
from scalerl.forecast.readers.trainer_state import is_trainer_state, read_trainer_state
from scalerl.forecast.readers.verl_console import looks_like_verl_console, read_verl_console

CSV_SUFFIXES = (".csv", ".tsv")
JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")
METRICS_FILE = "metrics.jsonl"  # what `scalerl train` writes in its run folder
TRAINER_STATE_FILE = "trainer_state.json"  # in every transformers / TRL checkpoint folder
CHECKPOINT_NAME = re.compile(r"checkpoint-(\d+)")


def read_table(path: Path, *, run: str | None = None, allow_partial: bool = False) -> LogTable:
    """Dispatch on the log format and return the table of `path`.

    Formats: TensorBoard event files / folders, trainer_state.json, JSON lines or arrays
    (metrics.jsonl, verl's file logger), CSV / TSV (W&B history and chart exports), verl's
    console log (any text file with `step:N - key:value` lines). A folder is read by what it
    holds (`log_in_folder`); a path that is not a regular file or folder is refused unopened.
    """
    if not path.exists():
        raise InputError(f"file not found: {path}")
    if path.is_dir():
        log, note = log_in_folder(path)
        if log is None:
            return read_tensorboard_table(path, run=run, allow_partial=allow_partial)
        table = read_table(log, run=run, allow_partial=allow_partial)
        table.notes.insert(0, note)
        return table
    check_regular_file(path)
    if is_tensorboard_file(path):
        return read_tensorboard_table(path, run=run, allow_partial=allow_partial)
    suffix = path.suffix.lower()
    text, encoding_note = read_text(path)
    if not text.strip():
        raise InputError(f"{path} is empty")
    table = _read_text_table(text, path, suffix)
    if encoding_note:
        table.notes.insert(0, encoding_note)
    return table


def log_in_folder(folder: Path) -> tuple[Path | None, str]:
    """The log a folder stands for, by what it holds, and a note saying which file was read:
    a scalerl run folder -> its metrics.jsonl; a TRL / transformers checkpoint folder -> its
    trainer_state.json; a TRL output folder of checkpoints -> the newest checkpoint's
    trainer_state.json (the highest step: it holds the whole log history). None: TensorBoard.
    """
    metrics = folder / METRICS_FILE
    if metrics.is_file():
        return metrics, f"read {metrics} (a scalerl run folder)"
    state = folder / TRAINER_STATE_FILE
    if state.is_file():
        return state, f"read {state} (a checkpoint folder)"
    checkpoints = [
        (int(match.group(1)), child)
        for child in folder.iterdir()
        if (match := CHECKPOINT_NAME.fullmatch(child.name)) and (child / TRAINER_STATE_FILE).is_file()
    ]
    if checkpoints:
        step, newest = max(checkpoints)
        more = f" of {len(checkpoints)} checkpoints" if len(checkpoints) > 1 else ""
        return newest / TRAINER_STATE_FILE, f"read {newest / TRAINER_STATE_FILE} (the newest{more}, step {step})"
    return None, ""


def read_tensorboard_table(path: Path, *, run: str | None, allow_partial: bool) -> LogTable:
    """The TensorBoard reader, imported when a log is TensorBoard."""
    from scalerl.forecast.readers.tensorboard import read_tensorboard_table as read_events

    return read_events(path, run=run, allow_partial=allow_partial)


def _read_text_table(text: str, path: Path, suffix: str) -> LogTable:
    """The table of a decoded text log, by its suffix, then by what it holds."""
    if suffix in CSV_SUFFIXES:
        return read_csv_table(text, path, delimiter="\t" if suffix == ".tsv" else ",")
    if suffix == ".json" and text.lstrip().startswith("{") and "\n{" not in text.strip():
        document = load_json(text, path)
        if is_trainer_state(document):
            return read_trainer_state(document, path)
    if suffix in JSON_SUFFIXES:
        return read_json_table(text, path)
    if looks_like_verl_console(text):
        return read_verl_console(text, path)
    raise InputError(
        f"unknown log format for {path}: expected .csv, .jsonl, trainer_state.json, a verl console log "
        "(`step:N - key:value` lines), a TensorBoard event file (events.out.tfevents.*) or a directory of them"
    )


def is_tensorboard_file(path: Path) -> bool:
    """TensorBoard names its event files `events.out.tfevents.<time>.<host>...`."""
    return "tfevents" in path.name


SNIFF_BYTES = 1 << 16  # the start of a file read first: a binary file is refused from it


def read_text(path: Path) -> tuple[str, str | None]:
    """(the file as text, a note when it was not UTF-8); InputError for binary or unreadable files.
    Its first SNIFF_BYTES are read first: a NUL byte there without a UTF-16 BOM (a sparse or
    binary file) is refused before the rest is read."""
    try:
        with open(path, "rb") as handle:
            start = handle.read(SNIFF_BYTES)
            nul = start.find(b"\x00")
            if nul >= 0 and not start.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
                raise InputError(f"{path} is not a UTF-8 or UTF-16 text file (a NUL byte at byte {nul})")
            data = start + handle.read()
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from None
    return decode_text(data, path)


def decode_text(data: bytes, path: Path) -> tuple[str, str | None]:
    """Text of a log file and a note on its encoding when it is not UTF-8.

    UTF-8 (a BOM is dropped); UTF-16 with its BOM (Excel's "Unicode text", PowerShell's `>`);
    otherwise, when it holds no NUL byte, Latin-1 (old Windows exports), said in the note, since
    any bytes decode so. A file with NUL bytes and no UTF-16 BOM is binary: InputError.
    """
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16"), None
        except UnicodeDecodeError as error:
            raise InputError(f"{path} starts as UTF-16 but is not valid UTF-16 (byte {error.start})") from None
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as error:
        first_bad = error.start
    if b"\x00" in data:
        raise InputError(f"{path} is not a UTF-8 or UTF-16 text file (byte {first_bad})")
    return data.decode("latin-1"), f"{path} is not UTF-8 (byte {first_bad}): read as Latin-1"
