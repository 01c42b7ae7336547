"""Read scalar summaries from TensorBoard event files into a table joined on `step`.

Layouts: an event file, a run directory, or a folder of runs (TRL / transformers write
`output_dir/runs/<date>_<host>/events.out.tfevents.*`). Folders that are pieces of one resumed
run (each starts after the previous one's last event, at a later step, logging the same tags)
are joined in wall-time order with a note; truly different runs need `--run NAME` (the run's
folder relative to the given one, or its last part). Every event file is first checked record by
record (TFRecord framing and CRC32C, tfrecord.py): a corrupt or truncated file is refused, saying
how many records were readable, unless `allow_partial` (then its readable part is used with a
note). Records are decoded by event_proto.py (no tensorboard package needed). Tags become
columns; as TensorBoard shows a resumed run, a tag logged again at or below its last step drops
its values from that step on (and a session START event drops every tag's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scalerl.errors import InputError
from scalerl.forecast.readers.event_proto import WireError, decode_event
from scalerl.forecast.readers.log_files import check_regular_file
from scalerl.forecast.readers.table import LogTable
from scalerl.forecast.readers.tfrecord import Records, read_records


@dataclass
class ScalarPiece:
    """The scalars of one event file or folder: {tag: {step: value}} in increasing steps, the tags
    holding non-scalar tensors, the earliest session START step, and the span of its events."""

    values_by_tag: dict[str, dict[int, float]] = field(default_factory=dict)
    dropped_tags: set[str] = field(default_factory=set)
    start_step: int | None = None
    first_wall_time: float = float("inf")
    last_wall_time: float = float("-inf")

    @property
    def first_step(self) -> int | None:
        """The lowest step any scalar was kept at (None when the piece holds none)."""
        firsts = [next(iter(by_step)) for by_step in self.values_by_tag.values() if by_step]
        return min(firsts) if firsts else None

    def extend(self, later: ScalarPiece) -> None:
        """Add a later piece as if its events followed these: a tag it logs again drops this
        piece's values from its first step on; its session START drops every tag's."""
        if later.start_step is not None:
            for by_step in self.values_by_tag.values():
                _drop_from(by_step, later.start_step)
        for tag, by_step in later.values_by_tag.items():
            mine = self.values_by_tag.setdefault(tag, {})
            if by_step:
                _drop_from(mine, next(iter(by_step)))
            mine.update(by_step)
        self.dropped_tags |= later.dropped_tags
        self.first_wall_time = min(self.first_wall_time, later.first_wall_time)
        self.last_wall_time = max(self.last_wall_time, later.last_wall_time)
        if self.start_step is None:
            self.start_step = later.start_step


def read_tensorboard_table(path: Path, run: str | None = None, allow_partial: bool = False) -> LogTable:
    """Scalar tags of one TensorBoard run as {"step": [...], tag: [...]} (None where not logged)."""
    notes: list[str] = []
    pieces = {
        directory: read_folder(files, path, allow_partial, notes) for directory, files in run_folders(path, run).items()
    }
    merged = join_pieces(pieces, path, notes)
    values_by_tag = {
        tag: by_step for tag, by_step in merged.values_by_tag.items() if tag not in merged.dropped_tags and by_step
    }
    if not values_by_tag:
        raise InputError(f"no scalar summaries in the TensorBoard events of {path}")
    return LogTable(join_on_step(values_by_tag), notes=notes)


def run_folders(path: Path, run: str | None = None) -> dict[Path, list[Path]]:
    """{folder: its event files in name (time) order}: the file itself, `run`'s folder, or every
    folder under `path` holding event files."""
    if path.is_file():
        return {path.parent: [path]}
    event_files = sorted((file for file in path.rglob("*tfevents*") if file.is_file()), key=event_file_order)
    folders: dict[Path, list[Path]] = {}
    for file in event_files:
        folders.setdefault(file.parent, []).append(file)
    if not folders:
        raise InputError(f"no TensorBoard event files (events.out.tfevents.*) under {path}")
    if run is not None:
        names = run_names(path, folders)
        chosen = [folder for folder, name in names.items() if run in (name, folder.name)]
        if len(chosen) != 1:
            raise InputError(f"no single TensorBoard run named '{run}' under {path}; runs: {', '.join(names.values())}")
        return {chosen[0]: folders[chosen[0]]}
    return dict(sorted(folders.items()))


def event_file_order(file: Path) -> tuple:
    """Sort key of an event file: the numbers of its name compared as numbers.

    Writers name files `events.out.tfevents.<unix seconds>.<host>.<pid>.<writer count><suffix>`;
    two files of one second (a fast restart) differ only in the count, and as text '10' sorts
    before '9'.
    """
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in file.name.split("."))


def run_names(path: Path, folders) -> dict[Path, str]:
    """Each folder's name relative to `path` ('.' for `path` itself)."""
    return {folder: str(folder.relative_to(path).as_posix()) or "." for folder in folders}


def join_pieces(pieces: dict[Path, ScalarPiece], path: Path, notes: list[str]) -> ScalarPiece:
    """One piece from folders that are pieces of one run, in wall-time order; InputError naming
    the runs when they are not (runs are never mixed)."""
    with_scalars = {folder: piece for folder, piece in pieces.items() if piece.values_by_tag}
    if len(with_scalars) <= 1:
        return next(iter(with_scalars.values()), next(iter(pieces.values())))
    ordered = sorted(with_scalars.items(), key=lambda item: (item[1].first_wall_time, str(item[0])))
    names = run_names(path, [folder for folder, _ in ordered])
    if not all(continues(earlier, later) for (_, earlier), (_, later) in zip(ordered, ordered[1:])):
        raise InputError(
            f"{path} holds several TensorBoard runs ({', '.join(sorted(names.values()))}): "
            "pass one of them or --run NAME"
        )
    merged = ScalarPiece()
    for _, piece in ordered:
        merged.extend(piece)
    notes.append(
        f"joined {len(ordered)} TensorBoard folders as one resumed run, in wall-time order: {', '.join(names.values())}"
    )
    return merged


def continues(earlier: ScalarPiece, later: ScalarPiece) -> bool:
    """Whether `later` is the same run resumed: it starts after `earlier`'s last event, at a later
    step than `earlier` started (a new run starts again from its first step), and logs tags in
    common with it."""
    return (
        later.first_wall_time >= earlier.last_wall_time
        and later.first_step > earlier.first_step
        and bool(set(later.values_by_tag) & set(earlier.values_by_tag))
    )


def read_folder(files: list[Path], source: Path, allow_partial: bool, notes: list[str]) -> ScalarPiece:
    """The scalars of one folder's event files, read in order as one stream of events."""
    piece = ScalarPiece()
    for file in files:
        check_regular_file(file)
        data = file.read_bytes()
        records = read_records(data)
        if records.problem is not None:
            notes.append(partial_file_note(file, records, allow_partial))
        add_scalar_events(data, records, piece, source)
    return piece


def join_on_step(values_by_tag: dict[str, dict[int, float]]) -> dict:
    """{"step": every step logged, tag: its values at those steps} as float arrays, NaN where a tag
    was not logged. A tag holding a NaN value stays a list of cells (None where not logged), so
    that NaN is an error when the tag is used, not a missing value."""
    tag_steps = {
        tag: np.fromiter(by_step, dtype=np.int64, count=len(by_step)) for tag, by_step in values_by_tag.items()
    }
    steps = np.unique(np.concatenate(list(tag_steps.values())))
    columns: dict = {"step": steps.astype(float)}
    for tag, by_step in values_by_tag.items():
        if tag == "step":
            continue  # the global step is the join key; a scalar named "step" would shadow it
        values = np.fromiter(by_step.values(), dtype=float, count=len(by_step))
        if np.isnan(values).any():
            columns[tag] = [by_step.get(int(step)) for step in steps.tolist()]
            continue
        column = np.full(steps.size, np.nan)
        column[np.searchsorted(steps, tag_steps[tag])] = values
        columns[tag] = column
    return columns


def partial_file_note(file: Path, records: Records, allow_partial: bool) -> str:
    """The note on a corrupt or truncated event file; InputError unless `allow_partial`."""
    message = f"TensorBoard event file {file} is {records.problem} after {len(records)} readable records"
    if not allow_partial:
        raise InputError(f"{message}; pass --allow-partial to fit the readable part")
    return f"{message}: fitting the readable part only (--allow-partial)"


def add_scalar_events(data: bytes, records: Records, piece: ScalarPiece, source: Path) -> None:
    """Decode each record as an Event and add its scalar summaries to `piece`.

    v1 `simple_value`s and v2 tensors holding one number; a tag with any other tensor is not a
    scalar curve (it goes to `dropped_tags`).
    """
    values_by_tag = piece.values_by_tag
    for start, end in zip(records.starts.tolist(), records.ends.tolist()):
        try:
            event = decode_event(data, start, end)
        except (WireError, IndexError, UnicodeDecodeError) as error:
            raise InputError(f"cannot read TensorBoard events in {source}: {str(error)[:200]}") from None
        step = event.step
        if event.session_start:
            if piece.start_step is None and not values_by_tag:
                piece.start_step = step
            for by_step in values_by_tag.values():
                _drop_from(by_step, step)
            continue
        if not event.values:
            continue
        piece.first_wall_time = min(piece.first_wall_time, event.wall_time)
        piece.last_wall_time = max(piece.last_wall_time, event.wall_time)
        for tag, number in event.values:
            if number is None:
                piece.dropped_tags.add(tag)
                continue
            by_step = values_by_tag.setdefault(tag, {})
            # Steps are added in increasing order (a lower one first drops those above it), so
            # the last key is the largest: a step at or below it was logged again after a restart.
            if by_step and step <= next(reversed(by_step)):
                _drop_from(by_step, step)
            by_step[step] = number


def _drop_from(by_step: dict[int, float], step: int) -> None:
    for logged in [s for s in by_step if s >= step]:
        del by_step[logged]
