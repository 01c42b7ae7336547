"""The manifest of `scalerl ablate --from-logs`: which log is which seed of which variant.

A CSV (header row) or YAML (a list of mappings, or {runs: [...]}) with one entry per seed:

    path, variant, seed          required: a log any forecast reader takes (metrics.jsonl, CSV,
                                 W&B export, trainer_state.json, TensorBoard folder, verl console
                                 log), relative to the manifest's folder; the variant; the seed label
    run, segment, group, unit    optional: the run of a long-format file or TensorBoard folder, the
                                 1-based segment of appended runs, the column naming runs, and the
                                 compute unit the log's x axis is in (e.g. GPU-hours, samples)

Or one W&B export holding several runs and a regular expression with named groups `variant` and
`seed` matched against each run name (`wandb_rows`). Checks (`check_rows`): every file exists, no
(variant, seed) twice, the base is a variant, at least one other variant, two seeds per variant
(one seed gives no interval). Torch-free.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from scalerl.errors import InputError
from scalerl.study.run_curves import LogSource

REQUIRED = ("path", "variant", "seed")
OPTIONAL = ("run", "segment", "group", "unit")
YAML_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class ManifestRow:
    """One seed's log: where (source, with its selectors), whose (variant, seed), its declared
    compute unit (None: not declared) and where it was declared (`origin`, for error messages)."""

    source: LogSource
    variant: str
    seed: str
    unit: str | None
    origin: str


def _text(value) -> str | None:
    """A cell as stripped text; empty cells and None are None (a seed 3.0 read by YAML is '3')."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    return text or None


def row_from_record(record: dict, folder: Path, origin: str) -> ManifestRow:
    """One manifest entry: required keys present and non-empty, segment a positive integer, the
    path resolved against the manifest's folder."""
    if not isinstance(record, dict):
        raise InputError(f"{origin}: expected a mapping with {', '.join(REQUIRED)}, got {type(record).__name__}")
    values = {key: _text(record.get(key)) for key in (*REQUIRED, *OPTIONAL)}
    missing = [key for key in REQUIRED if values[key] is None]
    if missing:
        raise InputError(f"{origin}: no {' or '.join(missing)} (each entry needs {', '.join(REQUIRED)})")
    segment = None
    if values["segment"] is not None:
        if not values["segment"].isdigit() or int(values["segment"]) < 1:
            raise InputError(f"{origin}: segment must be a positive integer, got {values['segment']!r}")
        segment = int(values["segment"])
    path = Path(values["path"]).expanduser()
    source = LogSource(path if path.is_absolute() else folder / path, values["run"], segment, values["group"])
    return ManifestRow(source, values["variant"], values["seed"], values["unit"], origin)


def read_manifest(path: str | Path) -> list[ManifestRow]:
    """The rows of a CSV or YAML (.yaml / .yml) manifest, in file order; InputError on any bad entry."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"manifest {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"manifest {path}: not readable as UTF-8 text ({error})") from None
    if path.suffix.lower() in YAML_SUFFIXES:
        records = _yaml_records(text, path)
        origins = [f"{path} entry {index + 1}" for index in range(len(records))]
    else:
        reader = csv.DictReader(text.splitlines())
        header = [name.strip() for name in reader.fieldnames or []]
        missing = [key for key in REQUIRED if key not in header]
        if missing:
            raise InputError(
                f"manifest {path}: no column {', '.join(missing)} in its header "
                f"(columns: {', '.join(REQUIRED)}, optional {', '.join(OPTIONAL)})"
            )
        records = [{(key or "").strip(): value for key, value in record.items()} for record in reader]
        origins = [f"{path} line {index + 2}" for index in range(len(records))]
    if not records:
        raise InputError(f"manifest {path} lists no runs")
    return [row_from_record(record, path.parent, origin) for record, origin in zip(records, origins)]


def _yaml_records(text: str, path: Path) -> list:
    import yaml

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise InputError(f"manifest {path}: not valid YAML ({str(error).splitlines()[0]})") from None
    if isinstance(document, dict) and "runs" in document:
        document = document["runs"]
    if not isinstance(document, list):
        raise InputError(f"manifest {path}: expected a list of entries (path, variant, seed) or runs: [...]")
    return document


def wandb_rows(path: str | Path, pattern: str, unit: str | None = None) -> list[ManifestRow]:
    """One row per run of a W&B export (or any long-format log with a run column) whose name matches
    `pattern` (re.search) with named groups `variant` and `seed`; runs that do not match are left out."""
    from scalerl.forecast.readers import read_table
    from scalerl.forecast.readers.series import label_text
    from scalerl.forecast.readers.table import cells

    path = Path(path)
    try:
        regex = re.compile(pattern)
    except re.error as error:
        raise InputError(f"--pattern {pattern!r}: not a regular expression ({error})") from None
    if not {"variant", "seed"} <= set(regex.groupindex):
        raise InputError(f"--pattern {pattern!r}: needs the named groups (?P<variant>...) and (?P<seed>...)")
    if not path.exists():
        raise InputError(f"{path} does not exist")
    table = read_table(path)
    if table.run_column is None:
        raise InputError(
            f"{path} holds one run (no run column); --pattern needs a W&B export of several runs (or write a manifest)"
        )
    names = list(
        dict.fromkeys(label_text(label) for label in cells(table.columns[table.run_column]) if label is not None)
    )
    rows = []
    for name in names:
        match = regex.search(name)
        if match and match["variant"] and match["seed"]:
            rows.append(
                ManifestRow(LogSource(path, run=name), match["variant"], match["seed"], unit, f"{path} run {name!r}")
            )
    if not rows:
        raise InputError(
            f"--pattern {pattern!r} matches none of the {len(names)} runs of {path} ({', '.join(names[:10])})"
        )
    return rows


def check_rows(rows: list[ManifestRow], base: str) -> None:
    """InputError (one line) for a missing log, a (variant, seed) given twice, an unknown base, no
    other variant, or a variant with fewer than two seeds."""
    for row in rows:
        if not row.source.path.exists():
            raise InputError(f"{row.origin}: {row.source.path} does not exist")
    repeated = [key for key, count in Counter((row.variant, row.seed) for row in rows).items() if count > 1]
    if repeated:
        variant, seed = repeated[0]
        where = [row.origin for row in rows if (row.variant, row.seed) == (variant, seed)]
        raise InputError(f"variant {variant!r} seed {seed!r} is given twice ({'; '.join(where)})")
    seeds = Counter(row.variant for row in rows)
    if base not in seeds:
        raise InputError(f"base variant {base!r} is not in the manifest (variants: {', '.join(seeds)})")
    if len(seeds) < 2:
        raise InputError(f"the manifest has only the base variant {base!r}: list at least one variant to compare")
    single = [variant for variant, count in seeds.items() if count < 2]
    if single:
        raise InputError(
            f"variant {single[0]!r} has one seed: the verdict needs at least two seeds per variant "
            "(a spread to compare the difference with)"
        )
