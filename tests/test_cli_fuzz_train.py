"""Fuzz of `scalerl train`'s config and task files through its entry point: generated keys and
values as JSON, YAML or TOML, generated TRL/verl-like task records as JSON lines or parquet, and
hostile files (deep nesting, huge numbers, long lines, bad bytes). Every case must end in exactly
one `error: ...` line on stderr with exit code 2, never a traceback.
"""

import io
import json

from cli_fuzz_support import check_outcome, file_bytes, run_scalerl
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

# --- config and task files of `scalerl train` ------------------------------------------------------
# The trainer is replaced by a stub that ends the command with one `error:` line, so a case costs
# the parsing and validation only: every generated config or task file must end in that line or in
# another single `error:` line (never a traceback), whatever its format, nesting or numbers.

FILE_FUZZ_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)
CONFIG_KEYS = [
    "rl.loss",
    "rl",
    "optim",
    "sampling",
    "max_steps",
    "seed",
    "lr",
    "temperature",
    "rl.los",
    "max_new_tokens",
    "sampling.max_new_tokens",
    "task.name",
    "model.path",
    "learning_rate",
    "num_generations",
    "beta",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "loss_type",
    "report_to",
    "output_dir",
    "num_train_epochs",
    "epsilon",
    "epsilon_high",
    "bf16",
    "scale_rewards",
    "[red]x[/]",
    "",
    "a.b.c",
    "\x1b[31mred",
    "é",
    "1",
]
config_values = st.recursive(
    st.one_of(
        st.integers(-3, 300),
        st.sampled_from([10**30, -(2**63), 2**63, 10**400 // 10**399, 0]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.none(),
        st.text(max_size=12),
        st.sampled_from(["cispo", "dapo", "grpo", "all", "none", "token", "1e-6", "x" * 300, "[/]"]),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.sampled_from(CONFIG_KEYS), children, max_size=3)
    ),
    max_leaves=8,
)
HOSTILE_CONFIGS = [
    (
        "yaml",
        "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
        "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
        "g: [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n",
    ),
    ("yaml", "a: &a [*a]\n"),
    ("yaml", "rl: " + "[" * 3000 + "]" * 3000 + "\n"),
    ("json", '{"rl": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    ("toml", "a = " + "[" * 3000 + "]" * 3000 + "\n"),
    ("json", '{"max_steps": ' + "9" * 5000 + "}"),
    ("yaml", "max_steps: " + "9" * 5000 + "\n"),
    ("toml", "seed = " + "9" * 5000 + "\n"),
    ("json", '{"optim": {"lr": NaN}}'),
    ("yaml", "optim.lr: .inf\n"),
    ("json", "[1, 2]"),
    ("yaml", ""),
    ("toml", "= 1"),
    ("yaml", "task.name: " + "x" * 5000 + "\n"),
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
    st.text(max_size=8),
    st.integers(-5, 5),
    st.none(),
    st.booleans(),
    st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "system", "assistant", ""]), "content": st.text(max_size=6)}
        ),
        max_size=3,
    ),
    st.sampled_from([[{"role": "user"}], [1, 2], {"a": 1}, "x" * 140_000]),
)


@st.composite
def task_files(draw):
    """(suffix, bytes) of a task file: generated TRL/verl-like records as JSON lines or parquet, or hostile lines."""
    hostile = draw(st.sampled_from(["", "", "", "deep", "digits", "long", "bytes"]))
    if hostile:
        event(f"task: hostile {hostile}")
        line = {
            "deep": "[" * 100_000 + "]" * 100_000,
            "digits": '{"prompt": "1+1=", "answer": ' + "9" * 5000 + "}",
            "long": json.dumps({"prompt": "x" * 1_000_000, "answer": "1"}),
            "bytes": "\udcff{}",
        }[hostile]
        return ".jsonl", line.encode("utf-8", errors="surrogateescape") + b"\n"
    keys = st.sampled_from(
        ["prompt", "messages", "answer", "completion", "split", "reward_model", "extra_info", "data_source"]
    )
    records = draw(st.lists(st.dictionaries(keys, TASK_RECORD_VALUES, max_size=4), min_size=0, max_size=4))
    if draw(st.booleans()):
        records.append(
            {
                "prompt": [{"role": "user", "content": "1+1="}],
                "reward_model": {"ground_truth": "2"},
                "extra_info": {"split": draw(st.sampled_from(["train", "test", "other"]))},
            }
        )
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


OVERRIDE_TOKENS = [
    "rl.loss=cispo",
    "rl.los=x",
    "optim.lr=nan",
    "max_steps=" + "9" * 5000,
    "=",
    "+seed=1",
    "sampling.max_new_tokens=32",
    "++optim.lr=1e-6",
    "x" * 500,
]


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
