"""`--config FILE`, `scalerl config keys`, "did you mean" for unknown keys, chat-form tasks, and
the command line's own manners (flags, --reward-range, `error:` lines, closing hints)."""

import dataclasses
import json
import sys

import pytest
from cli_invocation import assert_one_line_error, invoke

from scalerl.cli.app import main
from scalerl.cli.fit_inputs import split_pair_values
from scalerl.cli.train import build_train_config, closing_hint, logging_assignments
from scalerl.errors import ConfigError
from scalerl.train.config.optimiser_config import OptimConfig
from scalerl.train.config.train_config import TrainConfig, all_field_paths, save_config


def test_config_file_from_a_saved_run_reproduces_its_config_and_set_applies_on_top(tmp_path):
    saved = TrainConfig().with_overrides(["rl.loss=dapo", "optim.lr=3e-5", "max_steps=77", "task.num_operands=3"])
    save_config(saved, tmp_path / "old")
    assert build_train_config(None, [], None, None, None, tmp_path / "old" / "config.json") == saved
    again = build_train_config(None, ["optim.lr=1e-3"], None, None, 5, tmp_path / "old" / "config.json")
    assert again == saved.with_overrides(["optim.lr=1e-3", "max_steps=5"])


def test_yaml_config_names_a_few_keys_over_the_preset(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("rl:\n  aggregation: token\noptim:\n  lr: 2.0e-5\nmax_steps: 12\n")
    config = build_train_config("grpo", ["seed=3"], None, None, None, path)
    expected = build_train_config(
        "grpo", ["rl.aggregation=token", "optim.lr=2e-5", "max_steps=12", "seed=3"], None, None, None
    )
    assert config == expected and config.rl.loss == "grpo"


@pytest.mark.parametrize(
    ("text", "suffix", "fragment"),
    [
        ("rl: [1, 2", ".yaml", "not valid YAML"),
        ('{"rl": {"los": "dapo"}}', ".json", "rl.loss"),
        ("[1, 2]", ".json", "expected an object"),
        ('{"max_steps": "ten"}', ".json", "max_steps"),
    ],
)
def test_bad_config_files_name_the_file_and_the_problem(tmp_path, text, suffix, fragment):
    path = tmp_path / f"bad{suffix}"
    path.write_text(text)
    result = invoke("train", "--out", tmp_path / "run", "--config", path)
    assert_one_line_error(result, str(path), fragment)
    assert not (tmp_path / "run").exists()


def test_missing_config_file_and_config_with_resume_are_errors(tmp_path):
    assert_one_line_error(
        invoke("train", "--out", tmp_path / "run", "--config", tmp_path / "no.json"), "config file not found", "no.json"
    )
    save_config(TrainConfig(), tmp_path / "run")
    assert_one_line_error(
        invoke("train", "--out", tmp_path / "run", "--resume", "--config", tmp_path / "run" / "config.json"),
        "--resume uses the saved config",
    )


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("learning_rat", "learning_rate"),
        ("num_generation", "num_generations"),
        ("rl.los", "rl.loss"),
        ("max_step", "max_steps"),
        ("temprature", "sampling.temperature"),
    ],
)
def test_unknown_keys_suggest_the_closest_ones_and_the_listing(tmp_path, key, suggestion):
    result = invoke("train", "--out", tmp_path / "run", "--set", f"{key}=1")
    assert_one_line_error(result, f"unknown config key '{key}'", "did you mean", suggestion, "scalerl config keys")


def test_every_settable_key_has_help_in_its_field_metadata():
    from scalerl.rl.registry import loss_parameters
    from scalerl.train.config.config_keys import field_help

    loss_keys = {f"rl.{spec.config_key}" for spec in loss_parameters()}  # meanings from their specs
    assert [path for path in all_field_paths() if path not in loss_keys and not field_help(path)] == []
    assert field_help("optim.lr") == dataclasses.fields(OptimConfig)[0].metadata["help"]


def test_config_keys_lists_every_key_with_type_default_and_meaning():
    from scalerl.train.config.config_keys import describe_keys

    assert [key.path for key in describe_keys() if not key.meaning] == []
    result = invoke("config", "keys")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == len(all_field_paths()) + 1
    lr_help = next(item for item in dataclasses.fields(OptimConfig) if item.name == "lr").metadata["help"]
    lr_line = next(line for line in lines if line.startswith("optim.lr "))
    assert lr_line.split()[:3] == ["optim.lr", "float", "0.0001"] and lr_line.endswith(lr_help)
    loss_line = next(line for line in lines if line.startswith("rl.loss "))
    assert "policy loss, one of cispo: " in loss_line and "; dapo: " in loss_line  # the registry's choices
    payload = json.loads(invoke("config", "keys", "--json").stdout)
    by_key = {item["key"]: item for item in payload}
    assert by_key["rl.npr"] == {
        "key": "rl.npr",
        "type": "bool",
        "default": True,
        "meaning": by_key["rl.npr"]["meaning"],
    }
    assert by_key["max_steps"]["default"] == 100


def test_train_flags_that_set_a_config_key_show_its_field_help():
    from typer.main import get_command

    from scalerl.cli.app import app
    from scalerl.train.config.config_keys import field_help

    flags = {param.name: param.help for param in get_command(app).commands["train"].params}
    assert flags["max_lag"] == f"pipeline.max_lag: {field_help('pipeline.max_lag')}; default 8."
    assert flags["model"].startswith(f"model.path: {field_help('model.path')}")


def test_report_to_and_logger_flags_become_config_keys():
    assert logging_assignments(False, False, None, None, None) == []
    assert logging_assignments(False, False, None, None, "wandb,tensorboard") == ["tensorboard=True", "wandb=True"]
    assert logging_assignments(False, False, None, None, "none") == ["tensorboard=False", "wandb=False"]
    assert logging_assignments(True, False, "proj", None, None) == [
        "tensorboard=true",
        "wandb=true",
        "wandb_project=proj",
    ]
    with pytest.raises(ConfigError, match="--report-to"):
        logging_assignments(False, False, None, None, "mlflow")
    config = TrainConfig().with_overrides(logging_assignments(False, True, None, "r1", None))
    assert config.wandb and config.wandb_run_name == "r1" and config.wandb_project == ""  # $WANDB_PROJECT or scalerl


# --- chat-form tasks -------------------------------------------------------------------------------


def _chat_task(path, extra_line=""):
    lines = [
        {
            "messages": [{"role": "system", "content": "Add."}, {"role": "user", "content": f"{a}+{a}"}],
            "answer": str(2 * a),
        }
        for a in range(1, 9)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + extra_line)
    return path


def test_chat_form_task_prompts_use_the_tokenizers_chat_template(tmp_path):
    from tiny_hf import save_tiny_hf_model

    from scalerl.models.chat import chat_renderer
    from scalerl.tasks.config import TaskConfig
    from scalerl.tasks.loading import load_task

    model_dir = save_tiny_hf_model("qwen2", tmp_path / "qwen2")
    task = load_task(
        TaskConfig(name=str(_chat_task(tmp_path / "chat.jsonl")), val_fraction=0.25),
        render_chat=chat_renderer(str(model_dir)),
    )
    prompts = {example.prompt: example.answer for example in task.train + task.validation}
    assert prompts["system: Add.\nuser: 3+3\nassistant: "] == "6"
    assert len(task.train) == 6 and len(task.validation) == 2


@pytest.mark.parametrize(
    ("extra", "model", "fragment"),
    [
        ("", "builtin", "no chat template"),
        ('{"messages": [{"role": "user"}], "answer": "1"}\n', "qwen2", "line 9: message 1"),
        ('{"messages": [], "answer": "1"}\n', "qwen2", "line 9: 'messages' must be a non-empty list"),
        ('{"prompt": "x", "messages": [{"role": "user", "content": "x"}], "answer": "1"}\n', "qwen2", "not both"),
    ],
)
def test_bad_chat_tasks_give_one_error_naming_the_line(tmp_path, extra, model, fragment):
    from tiny_hf import save_tiny_hf_model

    task = _chat_task(tmp_path / "chat.jsonl", extra)
    model_path = "builtin" if model == "builtin" else str(save_tiny_hf_model(model, tmp_path / model))
    result = invoke("train", "--out", tmp_path / "run", "--task", task, "--model", model_path)
    assert_one_line_error(result, "chat.jsonl, line", fragment)
    assert not (tmp_path / "run").exists()


# --- command-line manners --------------------------------------------------------------------------


def test_help_shows_flags_without_a_value_type():
    result = invoke("fit", "--help")
    assert result.exit_code == 0
    assert "<bool>" not in result.stdout and "--json" in result.stdout and "LOW HIGH" in result.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["--reward-range", "-1,1"],
        ["--reward-range=-1,1"],
        ["--reward-range", "-1 1"],
        ["--reward-range", "-1", "1"],
        ["--reward-range", "-1, 1"],
    ],
)
def test_reward_range_takes_a_comma_or_a_space(argv):
    assert split_pair_values(["fit", "x.csv", *argv, "--json"]) == [
        "fit",
        "x.csv",
        "--reward-range",
        "-1",
        "1",
        "--json",
    ]


def _run_main(monkeypatch, capsys, *argv):
    monkeypatch.setattr(sys, "argv", ["scalerl", *map(str, argv)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    return exit_info.value.code, capsys.readouterr()


def test_main_reads_a_comma_reward_range_and_usage_errors_start_with_lowercase_error(tmp_path, monkeypatch, capsys):
    curve = tmp_path / "c.csv"
    curve.write_text("step,reward\n1,-0.5\n2,0\n3,0.3\n4,0.5\n5,0.55\n6,0.6\n")
    code, captured = _run_main(monkeypatch, capsys, "fit", curve, "--reward-range", "-1,1", "--json")
    assert code == 0 and json.loads(captured.out)["params"]["R0"] == -0.5
    for argv in (["fit", curve, "--json", "true"], ["fit", "--bogus"], ["train"]):
        code, captured = _run_main(monkeypatch, capsys, *argv)
        assert code == 2 and captured.err.startswith("error: ") and len(captured.err.splitlines()) == 1


def _metrics(path, val_points):
    rows = []
    for step in range(0, 31):
        row = {"step": step, "flops": step * 1e12}
        if step % (30 // (val_points - 1)) == 0:
            row["val_pass_rate"] = 0.1 + 0.6 * step / (step + 10)
        rows.append(row)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_closing_hint_suggests_fit_only_when_the_fit_will_work(tmp_path):
    short, long = tmp_path / "short", tmp_path / ("a-rather-long-run-directory-name" * 3)
    _metrics(short / "metrics.jsonl", 2)
    _metrics(long / "metrics.jsonl", 7)
    hint = closing_hint(short)
    assert hint.startswith("no forecast yet (too few points") and "--resume --max-steps" in hint
    hint = closing_hint(long)
    assert hint == f"fit it: scalerl fit {long / 'metrics.jsonl'} --x flops --y val_pass_rate"
    result = invoke(*hint.removeprefix("fit it: scalerl ").split(), "--json")
    assert result.exit_code == 0, result.output
