"""Long logs are read linearly and fitted on at most MAX_POINTS binned points: the pandas fast path
of plain CSV files reads exactly what the csv module reads, JSON lines are split in chunks
without changing the line numbers, and long curves are binned with a note."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalerl.errors import InputError
from scalerl.forecast.readers import MAX_POINTS, bin_points, read_curve
from scalerl.forecast.readers.csv_format import FAST_PARSE_MIN_CHARS, parse_csv_columns, parse_plain_csv_fast
from scalerl.forecast.readers.jsonl import CHUNK_ROWS, numbered_lines
from scalerl.forecast.readers.table import column_to_floats

SOURCE = Path("log.csv")


def floats_or_error(columns, name):
    try:
        return [
            None if value != value else value for value in column_to_floats(columns[name], name, str(SOURCE)).tolist()
        ]
    except InputError as error:  # an infinite number is shown as read: `inf` either way, `1e400` by csv only
        return re.sub(r"non-finite value \([^)]*\)", "non-finite value", f"error: {error}")


cells = st.sampled_from(
    [
        "1",
        "2.5",
        " 3 ",
        "",
        "  ",
        "nan",
        "inf",
        "-1e400",
        "True",
        "x",
        "99999999999999999999999",
        "+4",
        ".5",
        "1e3",
        "0x1",
        "é",
        "NA",
    ]
)


@st.composite
def plain_csv_texts(draw):
    width = draw(st.integers(2, 4))
    header = draw(st.lists(st.sampled_from(["a", "b", " c ", "run", "d"]), min_size=width, max_size=width, unique=True))
    lines = [",".join(header)]
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["row", "row", "row", "blank", "short", "long", "spaces"]))
        row = [draw(cells) for _ in range(width)]
        lines.append(
            {
                "row": ",".join(row),
                "blank": "",
                "short": ",".join(row[:-1]),
                "long": ",".join(row + ["1"]),
                "spaces": "   ",
            }[kind]
        )
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    blank_lines_before = ending * draw(st.integers(0, 2))
    return blank_lines_before + ending.join(lines) + draw(st.sampled_from(["", ending]))


@given(text=plain_csv_texts())
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_fast_csv_path_reads_what_the_csv_module_reads(text):
    try:
        expected = parse_csv_columns(text, SOURCE)
    except InputError as error:
        with pytest.raises(InputError) as raised:
            parse_plain_csv_fast(text, SOURCE)
        assert str(raised.value) == str(error)
        return
    fast = parse_plain_csv_fast(text, SOURCE)
    assert fast is not None and list(fast) == list(expected)
    for name in expected:
        assert floats_or_error(fast, name) == floats_or_error(expected, name)


@pytest.mark.parametrize("text", ['a,b\n"1",2\n', "a,b\n1\x00,2\n", "a,b\r1,2\r", "a\n1\n", "a,a\n1,2\n"])
def test_files_the_fast_path_leaves_to_the_csv_module(text):
    assert parse_plain_csv_fast(text, SOURCE) is None


@given(text=st.text(st.sampled_from("ab\n\r\u2028\x0c{} "), max_size=60), chunk=st.integers(1, 8))
@settings(max_examples=300, deadline=None, derandomize=True)
def test_json_lines_in_chunks_are_numbered_as_splitlines_numbers_them(text, chunk):
    lines = text.splitlines()
    numbered = list(numbered_lines(text, chunk_chars=chunk))
    assert [line for _, line, _ in numbered] == lines
    assert [number for number, _, _ in numbered] == list(range(1, len(lines) + 1))
    assert [last for _, _, last in numbered] == [index == len(lines) - 1 for index in range(len(lines))]


@given(
    column=st.lists(
        st.one_of(
            cells,
            st.sampled_from(["1_000", "\uff11\uff12", None]),
            st.integers(-5, 5),
            st.floats(allow_nan=False, allow_infinity=False),
        ),
        max_size=8,
    )
)
@settings(max_examples=300, deadline=None, derandomize=True)
def test_short_and_long_columns_are_converted_alike(column):
    """A short column is converted cell by cell (no pandas import), a long one by pandas: both give
    the same numbers, or the same error naming the same row."""
    import scalerl.forecast.readers.table as table

    def converted(min_cells):
        saved, table.VECTORISED_MIN_CELLS = table.VECTORISED_MIN_CELLS, min_cells
        try:
            return floats_or_error({"a": list(column)}, "a")
        finally:
            table.VECTORISED_MIN_CELLS = saved

    assert converted(0) == converted(10**9)


def test_underscored_and_non_ascii_digits_are_not_numbers():
    for cell in ("1_000", "\uff11\uff12"):
        with pytest.raises(InputError, match="non-numeric value"):
            column_to_floats(["1", cell], "a", "log.csv")


def test_bin_points_known_answer():
    compute, reward = bin_points(np.arange(10.0), np.arange(10.0) * 2, 4)  # bins of 2, 3, 2, 3 points
    np.testing.assert_allclose(compute, [0.5, 3.0, 5.5, 8.0])
    np.testing.assert_allclose(reward, [1.0, 6.0, 11.0, 16.0])


def long_csv(path, n_rows, extra_line=None, at=None):
    lines = ["step,gpu_hours,val_pass_rate"] + [f"{i},{i * 0.5},{0.1 + 0.5 * i / n_rows}" for i in range(n_rows)]
    if extra_line is not None:
        lines.insert(at, extra_line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert path.stat().st_size > FAST_PARSE_MIN_CHARS
    return path


def test_a_long_csv_is_binned_to_max_points_with_a_note(tmp_path):
    n_rows = 20 * MAX_POINTS + 30_000
    curve = read_curve(long_csv(tmp_path / "long.csv", n_rows))
    assert len(curve) == MAX_POINTS
    edges = (np.arange(MAX_POINTS + 1) * n_rows) // MAX_POINTS
    first_bin = np.arange(edges[0], edges[1])
    assert curve.compute[0] == pytest.approx(np.mean(first_bin * 0.5))
    assert curve.reward[-1] == pytest.approx(np.mean(0.1 + 0.5 * np.arange(edges[-2], edges[-1]) / n_rows))
    assert any(f"{n_rows} points binned into {MAX_POINTS}" in note for note in curve.notes)


@pytest.mark.parametrize(
    "line, message",
    [
        ("7,8", "row 1002 has 2 fields, the header has 3"),
        ("7,8,inf", "non-finite value (inf) at row 1001"),
        ("7,8,high", "non-numeric value 'high' in column 'val_pass_rate' at row 1001"),
    ],
)
def test_a_bad_row_deep_in_a_long_csv_is_named(tmp_path, line, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_curve(long_csv(tmp_path / "long.csv", 60_000, extra_line=line, at=1001))


def test_numeric_run_column_of_a_long_csv_is_picked_as_typed(tmp_path):
    rows = [f"{seed},{i},{0.1 + 0.001 * i * seed}" for seed in (3, 4) for i in range(30_000)]
    path = tmp_path / "seeds.csv"
    path.write_text("seed,step,val_pass_rate\n" + "\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"2 runs in column 'seed' \(3, 4\)"):
        read_curve(path, group="seed")
    curve = read_curve(path, group="seed", run="4", x="step")
    assert curve.reward[0] == pytest.approx(np.mean(0.1 + 0.004 * np.arange(15)))


def test_json_lines_keys_first_seen_after_a_chunk_are_missing_before(tmp_path):
    records = [{"step": i, "loss": 1.0} for i in range(CHUNK_ROWS + 5)]
    records += [{"step": CHUNK_ROWS + 5 + i, "val_pass_rate": 0.1 * i} for i in range(4)]
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(json.dumps(record) for record in records) + "\n", encoding="utf-8")
    curve = read_curve(path)
    np.testing.assert_array_equal(curve.compute, CHUNK_ROWS + 5 + np.arange(4))
    np.testing.assert_allclose(curve.reward, [0.0, 0.1, 0.2, 0.3])


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_million_row_log_is_read_and_fitted(tmp_path, suffix):
    # The reproducer: a 10^6-row CSV made the fit's starting grid allocate about 11 GB
    # (MemoryError). Time and memory are measured by benchmarks/reader_scale.py, not asserted here.
    from typer.testing import CliRunner

    from scalerl.cli.app import app

    n_rows = 1_000_000
    compute = np.linspace(0.0, 16_000.0, n_rows)
    reward = 0.1 + 0.51 / (1.0 + (2542.0 / np.maximum(compute, 1e-9)) ** 1.92)
    path = tmp_path / f"big{suffix}"
    with path.open("w", encoding="utf-8") as handle:
        if suffix == ".csv":
            handle.write("gpu_hours,val_pass_rate\n")
            handle.writelines(f"{c!r},{r!r}\n" for c, r in zip(compute.tolist(), reward.tolist()))
        else:
            handle.writelines(
                f'{{"gpu_hours": {c!r}, "val_pass_rate": {r!r}}}\n' for c, r in zip(compute.tolist(), reward.tolist())
            )
    result = CliRunner().invoke(app, ["fit", str(path), "--json", "--n-draws", "20"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["n_points"] == MAX_POINTS - 1  # the first bin sets R0
    assert any(f"{n_rows} points binned into {MAX_POINTS}" in warning for warning in payload["warnings"])
    assert payload["params"]["A"] == pytest.approx(0.61, abs=0.02)
