"""Bounded parsing of user config and task files: a YAML alias bomb, 10^5-deep nesting, a
5000-digit integer and a huge value each end in one short error, never a RecursionError,
MemoryError or a message that embeds the value."""

import pytest
from cli_invocation import assert_one_line_error, invoke

from scalerl.parsing_limits import check_values, load_json, load_toml, load_yaml, shown

LAUGHS = ["a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]"] + [
    f"{name}: &{name} [{','.join([f'*{previous}'] * 9)}]" for previous, name in zip("abcdefgh", "bcdefghi")
]
ALIAS_BOMB = "\n".join(LAUGHS) + "\n"  # 9**9 values once expanded


def test_the_alias_bomb_is_refused_before_any_expansion():
    assert len(ALIAS_BOMB.encode()) < 500
    with pytest.raises(ValueError, match="expands to more than 100000 values"):
        load_yaml(ALIAS_BOMB)
    with pytest.raises(ValueError, match="recursive alias"):
        load_yaml("a: &a [*a]\n")
    assert load_yaml("base: &b {lr: 1}\nrun: *b\n") == {"base": {"lr": 1}, "run": {"lr": 1}}  # a few aliases are fine


@pytest.mark.parametrize(
    "load, text",
    [
        (load_json, "[" * 100_000 + "]" * 100_000),
        (load_yaml, "[" * 100_000 + "]" * 100_000),
        (load_toml, "a = " + "[" * 100_000 + "]" * 100_000),
        (load_json, "[" * 66 + "]" * 66),
    ],
)
def test_deep_nesting_is_one_value_error(load, text):
    with pytest.raises(ValueError, match="nested deeper than 64 levels"):
        load(text)


@pytest.mark.parametrize(
    "load, text, fragment",
    [
        (load_json, '{"a": ' + "9" * 5000 + "}", "integer of 5000 digits"),
        (load_yaml, "a: " + "9" * 5000, "integer of thousands of digits"),
        (load_toml, "a = " + "9" * 5000, "integer of thousands of digits"),
        (load_json, '{"a": 9223372036854775808}', "out of range"),
        (load_json, '{"a": 1e400}', "non-finite"),
        (load_json, '{"a": NaN}', "NaN"),
        (load_yaml, "a: .nan", "non-finite"),
    ],
)
def test_numbers_are_range_checked(load, text, fragment):
    with pytest.raises(ValueError, match=fragment):
        load(text)


def test_check_values_passes_plain_documents_and_shown_cuts_values():
    document = {"rl": {"loss": "cispo"}, "steps": [1, 2.5, True, None]}
    assert check_values(document) is document
    assert shown("x" * 1000) == repr("x" * 1000)[:200] + "... (1002 characters)"
    assert shown(10**3000) == "<an integer of 9966 bits>"
    assert len(shown([list(range(100))] * 100)) <= 220


@pytest.mark.parametrize(
    "suffix, text, fragment",
    [
        (".yaml", ALIAS_BOMB, "expands to more than 100000 values"),
        (".json", '{"rl": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 64 levels"),
        (".json", '{"max_steps": ' + "9" * 5000 + "}", "integer of 5000 digits"),
        (".yaml", "task.name: " + "x" * 100_000 + "\n", "task.name"),
        (".yaml", "optim.lr: " + "1" * 400 + "\n", "holds an integer out of range"),
    ],
)
def test_hostile_config_files_are_one_short_error_line(tmp_path, suffix, text, fragment):
    path = tmp_path / f"hostile{suffix}"
    path.write_text(text)
    result = invoke("train", "--out", tmp_path / "run", "--config", path)
    if "task.name" in fragment:  # a valid config whose task is no file: refused when the task loads
        assert result.exit_code == 2 and len(result.stderr) < 600, result.stderr[:600]
        return
    assert_one_line_error(result, str(path), fragment)
    assert len(result.stderr) < 600
    assert not (tmp_path / "run").exists()
