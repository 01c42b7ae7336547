"""Fuzz of `scalerl fit` through its entry point (and of `scalerl train`'s config and task files, at
the end): generated log files (CSV, TSV, JSON lines, JSON
arrays, trainer_state.json, verl console logs, W&B chart exports, TensorBoard-named garbage,
random bytes) in generated encodings, with generated column names (rich markup, mathtext,
control characters) and generated options. Every case must end in a valid result (exit 0; with
--json exactly one JSON object on stdout) or in exactly one `error: ...` line on stderr with exit
code 2: never a traceback, another exit code, a stray line or a raw control character.

Over 1,000 cases in the default run (derandomized, so CI sees the same ones); most are refused
before any fit, and fits use the fewest posterior draws allowed.
"""

import contextlib
import io
import json
import sys
import warnings

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scalerl.cli.app import main

N_BOOTSTRAP = ["--n-bootstrap", "20"]  # the least the fit accepts: the fuzz is about input, not bands
FUZZ_SETTINGS = settings(max_examples=260, deadline=None, suppress_health_check=list(HealthCheck),
                         derandomize=True)

# --- column names and cells -----------------------------------------------------------------------

DEFAULT_NAMES = ["gpu_hours", "step", "_step", "Step", "global_step", "eval_reward", "eval/reward", "val_pass_rate",
                 "val-core/gsm8k/reward/mean@1", "perf/total_num_tokens", "eval_num_tokens", "reward", "loss"]
HOSTILE_NAMES = ["[/x]", "[red]", "[bold red]boom[/]", "$\\foo$", "$x$", "a\x1b[31mred", "tab\tname", "nl\rname",
                 "é ü", "名前", "", " ", "a,b", "run", "x - y", "\u202eevil", "\\", "%s", "{0}", "NaN"]
column_names = st.one_of(st.sampled_from(DEFAULT_NAMES), st.sampled_from(HOSTILE_NAMES),
                         st.text(max_size=8))
number_cells = st.one_of(
    st.floats(-1.0, 2.0, allow_nan=False).map(repr),
    st.integers(-3, 10**6).map(str),
    st.sampled_from(["", "nan", "inf", "-inf", "1e400", "1e-320", "-0", "abc", "True", "null", " 0.5 ",
                     "np.float64(0.3)", "tensor(0.2)", "1_0", "0x10", "5" * 30]),
)


@st.composite
def curve_rows(draw):
    """(x, y) pairs of a plausible rising run, then maybe resumed, appended twice or damaged."""
    n_rows = draw(st.sampled_from([8, 12, 6, 0, 1, 2, 3, 4, 5, 14]))  # Hypothesis starts from the first
    step = draw(st.sampled_from([1, 1, 10, 0.5, 1e-310, 1e20]))
    rows = [(i * step, round(0.1 + 0.5 * i / (i + 3), 4)) for i in range(n_rows)]
    shape = draw(st.sampled_from(["plain", "plain", "plain", "resumed", "appended", "flat", "damaged", "shuffled"]))
    if shape == "resumed" and n_rows > 4:
        rows += rows[n_rows // 2:]
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
    lines = [draw(st.sampled_from(["(TaskRunner pid=1) ", ""])) +
             f"step:{index} - val-core/{dataset}/reward/mean@1:{y} - perf/total_num_tokens:{x}"
             for index, (x, y) in enumerate(rows)]
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
log_files = st.one_of(table_logs(), table_logs(), trainer_state_logs(), verl_console_logs(), wandb_chart_logs(),
                      garbage_logs)

ENCODINGS = ["utf-8", "utf-8", "utf-8", "utf-8-sig", "utf-16", "latin-1", "cp1252"]


@st.composite
def file_bytes(draw, text):
    """`text` encoded, then maybe with a NUL byte, a cut tail or a flipped byte."""
    encoding = draw(st.sampled_from(ENCODINGS))
    data = text.encode(encoding, errors="replace")
    damage = draw(st.sampled_from(["none", "none", "none", "nul", "cut", "flip"]))
    if damage == "nul":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\x00" + data[at:]
    elif damage == "cut" and data:
        data = data[:draw(st.integers(0, len(data) - 1))]
    elif damage == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1:]
    event(f"encoding {encoding}, damage {damage}")
    return data


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
            option = draw(st.sampled_from(["--fit-fraction", "--r0", "--level", "--predict-at", "--target", "--min-x",
                                           "--fit-until"]))
            tokens += [option, draw(option_numbers)]
        elif kind == "range":
            low, high = draw(option_numbers), draw(option_numbers)
            tokens += draw(st.sampled_from([["--reward-range", low, high], ["--reward-range", f"{low},{high}"],
                                            [f"--reward-range={low},{high}"]]))
        elif kind == "flag":
            tokens.append(draw(st.sampled_from(["--power-law", "--allow-partial", "--fit-through-collapse", "--bogus"])))
        elif kind == "run":
            tokens += [draw(st.sampled_from(["--run", "--group"])), draw(st.sampled_from(["a", "b", "run", "seed", "[red]"]))]
        elif kind == "segment":
            tokens += ["--segment", draw(st.sampled_from(["1", "2", "3", "0", "-1", "x"]))]
        else:
            tokens.append(draw(st.sampled_from(["--cumulative", "--no-cumulative"])))
    if draw(st.booleans()):
        tokens.append("--json")
    return tokens


# --- running the command --------------------------------------------------------------------------


def run_scalerl(argv: list[str]) -> tuple[int, str, str]:
    """`scalerl ARGV` in process: (exit code, stdout, stderr); Python warnings count as stderr lines."""
    stdout, stderr = io.StringIO(), io.StringIO()
    saved_argv = sys.argv
    sys.argv = ["scalerl", *argv]
    exit_code = 0
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(stdout), \
                contextlib.redirect_stderr(stderr):
            warnings.simplefilter("always")
            try:
                main()
            except SystemExit as exit_signal:
                exit_code = exit_signal.code if isinstance(exit_signal.code, int) else 1
    finally:
        sys.argv = saved_argv
    warning_lines = "".join(f"{w.category.__name__}: {w.message}\n" for w in caught)
    return exit_code, stdout.getvalue(), stderr.getvalue() + warning_lines


def check_outcome(argv: list[str], exit_code: int, stdout: str, stderr: str) -> None:
    """A valid result or one `error:` line with exit code 2; nothing else."""
    shown = f"argv={argv!r}\nexit={exit_code}\nstdout={stdout[-2000:]!r}\nstderr={stderr[-2000:]!r}"
    assert "Traceback" not in stdout + stderr, shown
    assert "\x1b" not in stdout + stderr, shown  # user text reached the terminal unescaped
    event(f"exit code {exit_code}")
    if exit_code == 0:
        if "--json" in argv:
            assert stdout.count("\n") == 1 and stdout.endswith("\n"), shown
            payload = json.loads(stdout, parse_constant=lambda token: pytest.fail(f"non-standard JSON {token}\n{shown}"))
            assert {"params", "intervals", "n_points", "warnings"} <= set(payload), shown
            assert stderr == "", shown
        else:
            assert stdout.strip(), shown
            said = [line for line in stderr.splitlines() if line.strip()]
            assert all(line.startswith(("note: ", "figure written to ")) for line in said), shown
        return
    assert exit_code == 2, shown
    lines = [line for line in stderr.splitlines() if line.strip()]
    event(f"error: {' '.join(lines[0].split()[1:4]) if lines else ''}")
    assert len(lines) == 1 and lines[0].startswith("error: "), shown
    assert stdout == "", shown


def fuzz_case(directory, log, data, options) -> None:
    suffix, _, _ = log
    name = "events.out.tfevents.1.host" if suffix == ".tfevents" else f"run{suffix}"
    path = directory / name
    path.write_bytes(data)
    argv = ["fit", str(path), *options, *N_BOOTSTRAP]
    check_outcome(argv, *run_scalerl(argv))


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


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


# --- config and task files of `scalerl train` ------------------------------------------------------
# The trainer is replaced by a stub that ends the command with one `error:` line, so a case costs
# the parsing and validation only: every generated config or task file must end in that line or in
# another single `error:` line (never a traceback), whatever its format, nesting or numbers.

FILE_FUZZ_SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck),
                              derandomize=True)
CONFIG_KEYS = ["rl.loss", "rl", "optim", "sampling", "max_steps", "seed", "lr", "temperature", "rl.los", "max_new_tokens",
               "sampling.max_new_tokens", "task.name", "model.path", "learning_rate", "num_generations", "beta",
               "per_device_train_batch_size", "gradient_accumulation_steps", "loss_type", "report_to", "output_dir",
               "num_train_epochs", "epsilon", "epsilon_high", "bf16", "scale_rewards", "[red]x[/]", "", "a.b.c",
               "\x1b[31mred", "é", "1"]
config_values = st.recursive(
    st.one_of(st.integers(-3, 300), st.sampled_from([10**30, -(2**63), 2**63, 10**400 // 10**399, 0]),
              st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(), st.text(max_size=12),
              st.sampled_from(["cispo", "dapo", "grpo", "all", "none", "token", "1e-6", "x" * 300, "[/]"])),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(st.sampled_from(CONFIG_KEYS), children, max_size=3)),
    max_leaves=8)
HOSTILE_CONFIGS = [
    ("yaml", "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
             "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
             "g: [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"),
    ("yaml", "a: &a [*a]\n"), ("yaml", "rl: " + "[" * 3000 + "]" * 3000 + "\n"),
    ("json", '{"rl": ' + "[" * 100_000 + "]" * 100_000 + "}"), ("toml", "a = " + "[" * 3000 + "]" * 3000 + "\n"),
    ("json", '{"max_steps": ' + "9" * 5000 + "}"), ("yaml", "max_steps: " + "9" * 5000 + "\n"),
    ("toml", "seed = " + "9" * 5000 + "\n"), ("json", '{"optim": {"lr": NaN}}'), ("yaml", "optim.lr: .inf\n"),
    ("json", "[1, 2]"), ("yaml", ""), ("toml", "= 1"), ("yaml", "task.name: " + "x" * 5000 + "\n"),
]


def _toml_text(values) -> str:
    """Top-level scalars and one level of tables as TOML (values TOML cannot hold are left out)."""
    def literal(value):
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float, str)):
            return json.dumps(value).replace("NaN", "nan").replace("Infinity", "inf")
        return None
    lines, tables = [], []
    for key, value in values.items():
        if isinstance(value, dict):
            tables.append(f"[{json.dumps(key)}]")
            tables += [f"{json.dumps(k)} = {literal(v)}" for k, v in value.items() if literal(v) is not None]
        elif literal(value) is not None:
            lines.append(f"{json.dumps(key)} = {literal(value)}")
    return "\n".join(lines + tables) + "\n"


@st.composite
def config_files(draw):
    """(suffix, bytes) of a config file: generated keys and values as JSON, YAML or TOML, or a hostile one."""
    import yaml

    if draw(st.integers(0, 4)) == 0:
        kind, text = draw(st.sampled_from(HOSTILE_CONFIGS))
        event(f"config: hostile {kind}")
        return f".{kind}", text.encode()
    values = draw(st.dictionaries(st.sampled_from(CONFIG_KEYS), config_values, max_size=6))
    kind = draw(st.sampled_from(["json", "yaml", "yml", "toml"]))
    event(f"config: {kind}")
    if kind == "json":
        text = json.dumps(values)
    elif kind == "toml":
        text = _toml_text(values)
    else:
        text = yaml.safe_dump(values, allow_unicode=True)
    return f".{kind}", draw(file_bytes(text))


TASK_RECORD_VALUES = st.one_of(
    st.text(max_size=8), st.integers(-5, 5), st.none(), st.booleans(),
    st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant", ""]),
                                    "content": st.text(max_size=6)}), max_size=3),
    st.sampled_from([[{"role": "user"}], [1, 2], {"a": 1}, "x" * 140_000]))


@st.composite
def task_files(draw):
    """(suffix, bytes) of a task file: generated TRL/verl-like records as JSON lines or parquet, or hostile lines."""
    hostile = draw(st.sampled_from(["", "", "", "deep", "digits", "long", "bytes"]))
    if hostile:
        event(f"task: hostile {hostile}")
        line = {"deep": "[" * 100_000 + "]" * 100_000, "digits": '{"prompt": "1+1=", "answer": ' + "9" * 5000 + "}",
                "long": json.dumps({"prompt": "x" * 1_000_000, "answer": "1"}),
                "bytes": "\udcff{}"}[hostile]
        return ".jsonl", line.encode("utf-8", errors="surrogateescape") + b"\n"
    keys = st.sampled_from(["prompt", "messages", "answer", "completion", "split", "reward_model", "extra_info",
                            "data_source"])
    records = draw(st.lists(st.dictionaries(keys, TASK_RECORD_VALUES, max_size=4), min_size=0, max_size=4))
    if draw(st.booleans()):
        records.append({"prompt": [{"role": "user", "content": "1+1="}], "reward_model": {"ground_truth": "2"},
                        "extra_info": {"split": draw(st.sampled_from(["train", "test", "other"]))}})
    if draw(st.booleans()):
        import pandas as pd

        event("task: parquet")
        buffer = io.BytesIO()
        try:
            pd.DataFrame(records).to_parquet(buffer)
        except Exception:  # pyarrow refuses some mixed columns: then the file is that refusal's bytes
            return ".parquet", b"PAR1 mixed columns"
        return ".parquet", buffer.getvalue()
    event("task: jsonl")
    return ".jsonl", draw(file_bytes("".join(json.dumps(record) + "\n" for record in records)))


class _Stopped(Exception):
    pass


def run_train_stubbed(argv: list[str]) -> tuple[int, str, str]:
    """`scalerl ARGV` with the trainer replaced: it loads the task (as the trainer does first),
    then ends the command with the one line `error: stub: ...`."""
    from unittest import mock

    from scalerl.errors import ConfigError
    from scalerl.tasks.loading import load_task

    def stub_train(config, out, **_):
        load_task(config.task, render_chat=lambda messages: "".join(m["content"] for m in messages) or "x")
        raise ConfigError("stub: config and task accepted")

    def stub_ray(*_args, **_kwargs):
        raise ConfigError("stub: config accepted")

    with mock.patch("scalerl.train.trainer.train", stub_train), mock.patch("scalerl.cli.train.run_on_ray", stub_ray):
        return run_scalerl(argv)


OVERRIDE_TOKENS = ["rl.loss=cispo", "rl.los=x", "optim.lr=nan", "max_steps=" + "9" * 5000, "=", "+seed=1",
                   "sampling.max_new_tokens=32", "++optim.lr=1e-6", "x" * 500]


@given(config=config_files(), overrides=st.lists(st.sampled_from(OVERRIDE_TOKENS), max_size=2))
@FILE_FUZZ_SETTINGS
def test_fuzz_train_config_files(fuzz_dir, config, overrides):
    suffix, data = config
    path = fuzz_dir / f"config{suffix}"
    path.write_bytes(data)
    argv = ["train", "--out", str(fuzz_dir / "run"), "--config", str(path), *overrides]
    exit_code, stdout, stderr = run_train_stubbed(argv)
    assert exit_code == 2, (argv, stdout, stderr)
    check_outcome(argv, exit_code, stdout, stderr)
    assert len(stderr) < 2000, stderr  # a value is quoted in ~200 characters, never expanded


@given(task=task_files())
@FILE_FUZZ_SETTINGS
def test_fuzz_train_task_files(fuzz_dir, task):
    suffix, data = task
    path = fuzz_dir / f"task{suffix}"
    path.write_bytes(data)
    argv = ["train", "--out", str(fuzz_dir / "run"), "--task", str(path)]
    exit_code, stdout, stderr = run_train_stubbed(argv)
    assert exit_code == 2, (argv, stdout, stderr)
    check_outcome(argv, exit_code, stdout, stderr)
    assert len(stderr) < 2000, stderr


# --- damaged checkpoints through `scalerl export` -------------------------------------------------

CHECKPOINT_FILES = ["model.safetensors", "config.json", "tokenizer.json", "training_state/state.json",
                    "training_state/rng.safetensors", "training_state/optimizer.safetensors",
                    "training_state/manifest.json"]


@pytest.fixture(scope="module")
def checkpoint_template(tmp_path_factory):
    """A run folder holding one checkpoint of the built-in tiny model (copied per case)."""
    import numpy as np
    import torch

    from scalerl.models.policy import TinyModelSpec, build_tiny_model
    from scalerl.train.checkpoint import save_checkpoint
    from scalerl.train.config import TrainConfig
    from scalerl.train.train_step import build_optimizer, build_scheduler

    model, tokenizer = build_tiny_model(TinyModelSpec(num_layers=1, hidden_size=16, num_heads=2,
                                                      intermediate_size=32, max_positions=32), seed=0)
    optimizer = build_optimizer(model, TrainConfig().optim)
    scheduler = build_scheduler(optimizer, 2)
    run_dir = tmp_path_factory.mktemp("checkpoint_fuzz") / "run"
    save_checkpoint(run_dir, 3, model=model, optimizer=optimizer, scheduler=scheduler,
                    torch_generators={"rollout": torch.Generator().manual_seed(1)},
                    numpy_rng=np.random.default_rng(2), state={}, tokenizer=tokenizer)
    return run_dir


@st.composite
def checkpoint_damages(draw):
    """(file, how, where, value, restamp): one damage to one file of the checkpoint; `restamp`
    rewrites the manifest to match, so the content checks (not the checksums) must catch it."""
    return (draw(st.sampled_from(CHECKPOINT_FILES)),
            draw(st.sampled_from(["flip", "truncate", "empty", "garbage", "0xff", "symlink", "delete", "fifo"])),
            draw(st.floats(0.0, 1.0)), draw(st.integers(0, 255)), draw(st.booleans()))


def _damage_checkpoint(checkpoint, damage, outside):
    import os

    from scalerl.train.manifest import write_manifest

    name, how, where, value, restamp = damage
    path = checkpoint / name
    data = path.read_bytes()
    offset = min(int(where * len(data)), len(data) - 1)
    if how == "flip":
        path.write_bytes(data[:offset] + bytes([data[offset] ^ (value or 1)]) + data[offset + 1:])
    elif how == "truncate":
        path.write_bytes(data[:offset])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(bytes([value]) * 64)
    elif how == "0xff":
        path.write_bytes(data[:offset] + b"\xff" + data[offset + 1:])
    elif how == "symlink":
        path.unlink()
        path.symlink_to(outside)
    elif how == "delete":
        path.unlink()
    else:
        path.unlink()
        os.mkfifo(path)
    if restamp and how not in ("symlink", "fifo") and name != "training_state/manifest.json":
        write_manifest(checkpoint)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(damage=checkpoint_damages())
def test_fuzz_export_of_a_damaged_checkpoint(checkpoint_template, tmp_path_factory, damage):
    """Any damage to any file of a checkpoint: export writes the model or says one `error:` line,
    and a refused export leaves nothing behind."""
    import shutil

    work = tmp_path_factory.mktemp("case")
    run_dir = shutil.copytree(checkpoint_template, work / "run", symlinks=True)
    (work / "outside.txt").write_text("a file outside the run")
    _damage_checkpoint(run_dir / "checkpoints" / "step_00000003", damage, work / "outside.txt")
    argv = ["export", str(run_dir), str(work / "model")]
    exit_code, stdout, stderr = run_scalerl(argv)
    shown = f"damage={damage!r}\nexit={exit_code}\nstdout={stdout[-1000:]!r}\nstderr={stderr[-1000:]!r}"
    assert "Traceback" not in stdout + stderr, shown
    event(f"export exit code {exit_code}")
    if exit_code == 0:
        exported = {p.name for p in (work / "model").iterdir()}
        assert "outside.txt" not in exported and "training_state" not in exported, shown
        assert "a file outside the run" not in "".join(
            p.read_text(errors="replace") for p in (work / "model").iterdir()), shown
        return
    assert exit_code == 2, shown
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), shown
    assert not (work / "model").exists(), shown
