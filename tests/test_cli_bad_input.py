"""Bad input to `scalerl fit / compare / plot`: one `error:` line on stderr, exit code 2, nothing
on stdout, never a traceback; the same for the console script's usage errors and for the error
helper every other command uses."""

import sys

import pytest
import typer
from cli_forecast_support import (
    FAST,
    GPU_HOURS,
    invoke,
    paper_run_csv,
    runner,
    strict_json,
    synthetic_rewards,
    write_csv,
)

from scalerl.cli.app import main
from scalerl.cli.errors import exits_on_user_error
from scalerl.errors import ConfigError


@pytest.fixture
def run_csv(tmp_path):
    return paper_run_csv(tmp_path)


# --- bad input -------------------------------------------------------------------------------------


def bad_input_cases(tmp_path):
    def csv(name, text):
        path = tmp_path / name
        path.write_text(text)
        return path

    good = write_csv(tmp_path / "good.csv", GPU_HOURS, synthetic_rewards(GPU_HOURS))
    return {
        "missing file": (["fit", tmp_path / "nope.csv"], "file not found"),
        "missing column": (["fit", good, "--y", "pass_at_1"], "available columns: gpu_hours, val_pass_rate"),
        "nan": (["fit", csv("nan.csv", "compute,reward\n0,0.1\n1,nan\n2,0.3\n3,0.4\n4,0.5\n")], "non-finite"),
        "inf": (["fit", csv("inf.csv", "compute,reward\n0,0.1\ninf,0.2\n2,0.3\n3,0.4\n4,0.5\n")], "non-finite"),
        "negative compute": (
            ["fit", csv("neg.csv", "compute,reward\n-1,0.1\n1,0.2\n2,0.3\n3,0.4\n")],
            "negative compute",
        ),
        "too few points": (["fit", csv("few.csv", "compute,reward\n0,0.1\n1,0.3\n2,0.4\n")], "too few points"),
        "reward out of range": (
            [
                "fit",
                csv("range.csv", "compute,reward\n0,0.1\n1,0.4\n2,1.6\n3,1.8\n4,1.9\n"),
                "--reward-range",
                "0",
                "1",
            ],
            "--reward-range",
        ),
        "corrupt jsonl": (["fit", csv("bad.jsonl", '{"compute": 1, "reward": 0.1}\n{"compute": \n')], "not valid JSON"),
        "empty file": (["fit", csv("empty.csv", "")], "empty"),
        "unknown format": (["fit", csv("run.xlsx", "compute,reward\n")], "unknown log format"),
        "both windows": (["fit", good, "--fit-until", "100", "--fit-fraction", "0.5"], "not both"),
        "bad fraction": (["fit", good, "--fit-fraction", "1.5"], "--fit-fraction"),
        "bad plot suffix": (["fit", good, "--plot", tmp_path / "fig.jpg"], "extension"),
        "bad predict-at": (["fit", good, "--predict-at", "abc"], "--predict-at"),
        "nan option": (["fit", good, "--target", "nan"], "--target must be a finite number"),
        "compare one run": (["compare", good], "at least two runs"),
        "plot missing file": (["plot", tmp_path / "nope.csv", "-o", tmp_path / "p.png"], "file not found"),
    }


CASE_NAMES = [
    "missing file",
    "missing column",
    "nan",
    "inf",
    "negative compute",
    "too few points",
    "reward out of range",
    "corrupt jsonl",
    "empty file",
    "unknown format",
    "both windows",
    "bad fraction",
    "bad plot suffix",
    "bad predict-at",
    "nan option",
    "compare one run",
    "plot missing file",
]


@pytest.mark.parametrize("case", CASE_NAMES)
@pytest.mark.parametrize("json_mode", [False, True])
def test_bad_input_gives_one_error_line_and_exit_code_2(tmp_path, case, json_mode):
    args, expected = bad_input_cases(tmp_path)[case]
    if json_mode and args[0] in ("fit", "compare"):
        args = [*args, "--json"]
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert expected in lines[0]


def test_error_helper_for_other_commands():
    demo = typer.Typer()

    @demo.command()
    @exits_on_user_error
    def train(lr: float = 1e-6):
        raise ConfigError(f"lr must be positive,\n got {lr}")

    @demo.command()
    @exits_on_user_error
    def other():
        open("/nonexistent/dir/config.json")

    result = runner.invoke(demo, ["train", "--lr", "-1"])
    assert result.exit_code == 2
    assert result.stderr == "error: lr must be positive, got -1.0\n"
    result = runner.invoke(demo, ["other"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: No such file or directory: /nonexistent/dir/config.json")


def run_main(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["scalerl", *map(str, args)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def test_console_script_usage_errors_are_one_line_too(monkeypatch, capsys, run_csv):
    for args, expected in [
        (["fit"], "Missing argument"),
        (["fit", run_csv, "--level", "abc"], "--level"),
        (["fitt"], "No such command"),
    ]:
        code, out, err = run_main(monkeypatch, capsys, *args)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and err.startswith("error: ") and expected in err, err
    code, out, err = run_main(monkeypatch, capsys, "fit", run_csv, "--json", *FAST)
    assert code == 0 and strict_json(out)["n_points"] == GPU_HOURS.size - 1
    code, out, err = run_main(monkeypatch, capsys, "fit", run_csv, "--fit-fraction", "2", "--json")
    assert code == 2 and out == "" and err.startswith("error: --fit-fraction")
    code, out, _ = run_main(monkeypatch, capsys, "fit", "--help")
    assert code == 0 and "--fit-fraction" in out
