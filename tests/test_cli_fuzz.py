"""Fuzz of `scalerl fit` through its entry point: generated log files (CSV, TSV, JSON lines, JSON
arrays, trainer_state.json, verl console logs, W&B chart exports, TensorBoard-named garbage,
random bytes) in generated encodings, with generated column names (rich markup, mathtext,
control characters) and generated options. Every case must end in a valid result (exit 0; with
--json exactly one JSON object on stdout) or in exactly one `error: ...` line on stderr with exit
code 2: never a traceback, another exit code, a stray line or a raw control character.

Over 1,000 cases in the default run (derandomized, so CI sees the same ones); most are refused
before any fit, and fits use the fewest posterior draws allowed. The config and task files of
`scalerl train` are fuzzed in test_cli_fuzz_train.py, damaged checkpoints in test_cli_fuzz_export.py.
"""

import json

from cli_fuzz_support import check_outcome, file_bytes, run_scalerl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

N_BOOTSTRAP = ["--n-draws", "20"]  # the least the fit accepts: the fuzz is about input, not bands
FUZZ_SETTINGS = settings(max_examples=260, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

# --- column names and cells -----------------------------------------------------------------------

DEFAULT_NAMES = [
    "gpu_hours",
    "step",
    "_step",
    "Step",
    "global_step",
    "eval_reward",
    "eval/reward",
    "val_pass_rate",
    "val-core/gsm8k/reward/mean@1",
    "perf/total_num_tokens",
    "eval_num_tokens",
    "reward",
    "loss",
]
HOSTILE_NAMES = [
    "[/x]",
    "[red]",
    "[bold red]boom[/]",
    "$\\foo$",
    "$x$",
    "a\x1b[31mred",
    "tab\tname",
    "nl\rname",
    "é ü",
    "名前",
    "",
    " ",
    "a,b",
    "run",
    "x - y",
    "\u202eevil",
    "\\",
    "%s",
    "{0}",
    "NaN",
]
column_names = st.one_of(st.sampled_from(DEFAULT_NAMES), st.sampled_from(HOSTILE_NAMES), st.text(max_size=8))
number_cells = st.one_of(
    st.floats(-1.0, 2.0, allow_nan=False).map(repr),
    st.integers(-3, 10**6).map(str),
    st.sampled_from(
        [
            "",
            "nan",
            "inf",
            "-inf",
            "1e400",
            "1e-320",
            "-0",
            "abc",
            "True",
            "null",
            " 0.5 ",
            "np.float64(0.3)",
            "tensor(0.2)",
            "1_0",
            "0x10",
            "5" * 30,
        ]
    ),
)


@st.composite
def curve_rows(draw):
    """(x, y) pairs of a plausible rising run, then maybe resumed, appended twice or damaged."""
    n_rows = draw(st.sampled_from([8, 12, 6, 0, 1, 2, 3, 4, 5, 14]))  # Hypothesis starts from the first
    step = draw(st.sampled_from([1, 1, 10, 0.5, 1e-310, 1e20]))
    rows = [(i * step, round(0.1 + 0.5 * i / (i + 3), 4)) for i in range(n_rows)]
    shape = draw(st.sampled_from(["plain", "plain", "plain", "resumed", "appended", "flat", "damaged", "shuffled"]))
    if shape == "resumed" and n_rows > 4:
        rows += rows[n_rows // 2 :]
    elif shape == "appended" and n_rows > 1:
        rows += [(x, y * 0.8) for x, y in rows]
    elif shape == "flat":
        rows = [(x, 0.3) for x, _ in rows]
    elif shape == "shuffled":
        rows = draw(st.permutations(rows))
    cells = [[repr(x), repr(y)] for x, y in rows]
    if shape == "damaged" and cells:
        for _ in range(draw(st.integers(1, 3))):
            row, column = draw(st.integers(0, len(cells) - 1)), draw(st.integers(0, 1))
            cells[row][column] = draw(number_cells)
    return cells


# --- log files ------------------------------------------------------------------------------------


@st.composite
def table_logs(draw):
    """A CSV / TSV / JSON-lines / JSON-array log with x, y, maybe a run column and an extra column."""
    x_name, y_name = draw(column_names), draw(column_names)
    if y_name.strip() == x_name.strip():
        y_name += " (y)"
    cells = draw(curve_rows())
    header, rows = [x_name, y_name], [list(row) for row in cells]
    if draw(st.booleans()):
        run_name = draw(st.sampled_from(["run", "series", "seed"]))
        labels = draw(st.lists(st.sampled_from(["a", "b", "[red]", "1", ""]), min_size=1, max_size=2))
        header.append(run_name)
        rows = [row + [labels[i % len(labels)]] for i, row in enumerate(rows)]
    if draw(st.booleans()):
        header.append(draw(column_names))
        rows = [row + [draw(number_cells)] for row in rows]
    suffix = draw(st.sampled_from([".csv", ".csv", ".tsv", ".jsonl", ".json", ".jsonl", ".csv", ".txt"]))
    if suffix in (".jsonl", ".json"):
        records = [dict(zip(header, (json_cell(cell) for cell in row))) for row in rows]
        if suffix == ".json" and draw(st.booleans()):
            text = json.dumps(records)
        else:
            text = "\n".join(json.dumps(record) for record in records)
    else:
        delimiter = "\t" if suffix == ".tsv" else ","
        text = "\n".join(delimiter.join(row) for row in [header, *rows])
    return suffix, text, header


def json_cell(cell: str):
    """A CSV cell as JSON would hold it: a number when it reads as one, else the text."""
    try:
        return json.loads(cell)
    except ValueError:
        return cell


@st.composite
def trainer_state_logs(draw):
    rows = draw(curve_rows())
    history = []
    for index, (x_cell, y_cell) in enumerate(rows):
        history.append({"loss": 0.5, "num_tokens": json_cell(x_cell), "step": index, "epoch": index / 4})
        history.append({"eval_reward": json_cell(y_cell), "eval_num_tokens": json_cell(x_cell), "step": index})
    document = {"global_step": len(rows), "log_history": draw(st.sampled_from([history, history, [], [1], {}]))}
    return ".json", json.dumps(document, indent=draw(st.sampled_from([None, 2]))), ["eval_num_tokens", "eval_reward"]


@st.composite
def verl_console_logs(draw):
    rows = draw(curve_rows())
    dataset = draw(st.sampled_from(["gsm8k", "math", "[red]"]))
    lines = [
        draw(st.sampled_from(["(TaskRunner pid=1) ", ""]))
        + f"step:{index} - val-core/{dataset}/reward/mean@1:{y} - perf/total_num_tokens:{x}"
        for index, (x, y) in enumerate(rows)
    ]
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), "Training Progress: 10%|#  | 1/10")
    names = ["perf/total_num_tokens", f"val-core/{dataset}/reward/mean@1"]
    return draw(st.sampled_from([".log", ".txt", ""])), "\n".join(lines), names


@st.composite
def wandb_chart_logs(draw):
    rows = draw(curve_rows())
    runs = draw(st.lists(st.sampled_from(["run-a", "run-b", "[red]"]), min_size=1, max_size=2, unique=True))
    header = ["Step"] + [f"{run} - eval/reward{suffix}" for run in runs for suffix in ("", "__MIN", "__MAX")]
    lines = [",".join(header)] + [",".join([x] + [y] * (len(header) - 1)) for x, y in rows]
    return ".csv", "\n".join(lines), ["Step", "eval/reward"]


garbage_logs = st.tuples(
    st.sampled_from([".csv", ".jsonl", ".json", ".log", ".tfevents", ""]),
    st.one_of(st.text(max_size=80), st.sampled_from(["[" * 3000, "{}", "[]", "null", '{"log_history": null}', "\n\n"])),
    st.just([]),
)
log_files = st.one_of(
    table_logs(), table_logs(), trainer_state_logs(), verl_console_logs(), wandb_chart_logs(), garbage_logs
)


# --- options --------------------------------------------------------------------------------------

option_numbers = st.one_of(
    st.sampled_from(["0", "0.5", "1", "0.8", "0.95", "2", "-1", "1e200", "1e-320", "nan", "inf", "abc", "", "3,4"]),
    st.floats(-10.0, 1e6, allow_nan=False).map(repr),
)


@st.composite
def fit_options(draw, names):
    """A list of command-line tokens: column choices (often the file's own), numbers, flags."""
    some_name = st.sampled_from(names) if names else column_names
    tokens: list[str] = []
    if names and draw(st.integers(0, 5)) < 5:  # mostly the file's own columns, so many cases reach the fit
        tokens += ["--x", names[0], "--y", names[1]] if len(names) > 1 else ["--y", names[0]]
    for _ in range(draw(st.sampled_from([1, 0, 1, 2, 3]))):
        kind = draw(st.sampled_from(["--x", "--y", "number", "range", "flag", "run", "segment", "cumulative"]))
        if kind in ("--x", "--y"):
            tokens += [kind, draw(st.one_of(some_name, column_names))]
        elif kind == "number":
            option = draw(
                st.sampled_from(
                    ["--fit-fraction", "--r0", "--level", "--predict-at", "--target", "--min-x", "--fit-until"]
                )
            )
            tokens += [option, draw(option_numbers)]
        elif kind == "range":
            low, high = draw(option_numbers), draw(option_numbers)
            tokens += draw(
                st.sampled_from(
                    [
                        ["--reward-range", low, high],
                        ["--reward-range", f"{low},{high}"],
                        [f"--reward-range={low},{high}"],
                    ]
                )
            )
        elif kind == "flag":
            tokens.append(
                draw(st.sampled_from(["--power-law", "--allow-partial", "--fit-through-collapse", "--bogus"]))
            )
        elif kind == "run":
            tokens += [
                draw(st.sampled_from(["--run", "--group"])),
                draw(st.sampled_from(["a", "b", "run", "seed", "[red]"])),
            ]
        elif kind == "segment":
            tokens += ["--segment", draw(st.sampled_from(["1", "2", "3", "0", "-1", "x"]))]
        else:
            tokens.append(draw(st.sampled_from(["--cumulative", "--no-cumulative"])))
    if draw(st.booleans()):
        tokens.append("--json")
    return tokens


# --- running the command --------------------------------------------------------------------------


def fuzz_case(directory, log, data, options) -> None:
    suffix, _, _ = log
    name = "events.out.tfevents.1.host" if suffix == ".tfevents" else f"run{suffix}"
    path = directory / name
    path.write_bytes(data)
    argv = ["fit", str(path), *options, *N_BOOTSTRAP]
    check_outcome(argv, *run_scalerl(argv))


@st.composite
def fuzz_inputs(draw, logs):
    log = draw(logs)
    return log, draw(file_bytes(log[1])), draw(fit_options(log[2]))


# Four tests of FUZZ_SETTINGS.max_examples cases each (1,040 in all), one per family of inputs, so a
# failure names its family and each stays a few minutes at most on a loaded machine.


@given(case=fuzz_inputs(st.one_of(table_logs(), garbage_logs)))
@FUZZ_SETTINGS
def test_fuzz_tables_and_garbage(fuzz_dir, case):
    fuzz_case(fuzz_dir, *case)


@given(case=fuzz_inputs(table_logs()))
@FUZZ_SETTINGS
def test_fuzz_tables_with_options(fuzz_dir, case):
    fuzz_case(fuzz_dir, *case)


@given(case=fuzz_inputs(st.one_of(trainer_state_logs(), verl_console_logs())))
@FUZZ_SETTINGS
def test_fuzz_trainer_state_and_verl_logs(fuzz_dir, case):
    fuzz_case(fuzz_dir, *case)


@given(case=fuzz_inputs(log_files))
@FUZZ_SETTINGS
def test_fuzz_every_format(fuzz_dir, case):
    fuzz_case(fuzz_dir, *case)
