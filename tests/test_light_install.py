"""The forecaster without the extras: with torch, transformers, safetensors, tensorboard and
protobuf hidden from the interpreter, `scalerl fit` reads a CSV and a TensorBoard folder, and the
training commands end with one `error:` naming the extra (exit 2) while `config keys` lists the keys; the core dependencies are the
forecaster's only; FitResult's repr is one short line. (The real fresh-venv install is measured
by `python -m benchmarks.install_size`.)"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib

from scalerl.forecast.fitting import fit_sigmoid

REPO = Path(__file__).resolve().parents[1]
HIDDEN = ("torch", "transformers", "safetensors", "tokenizers", "tensorboard", "google", "tbparse", "yaml", "ray")
RUNNER = f"""
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HIDDEN!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Hide())
sys.argv = ["scalerl", *sys.argv[1:]]
from scalerl.cli.app import main
main()
"""


def scalerl_without_extras(*args, cwd):
    return subprocess.run(
        [sys.executable, "-c", RUNNER, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    pytest.importorskip("tensorboard")
    from tensorboard.summary import Writer

    folder = tmp_path_factory.mktemp("logs")
    steps = np.arange(0, 30)
    rewards = 0.1 + 0.5 / (1 + (6.0 / np.maximum(steps, 1e-9)) ** 2)
    (folder / "run.csv").write_text("step,val_pass_rate\n" + "".join(f"{s},{r:.6f}\n" for s, r in zip(steps, rewards)))
    writer = Writer(str(folder / "tb"))
    for step, reward in zip(steps.tolist(), rewards.tolist()):
        writer.add_scalar("eval/reward", reward, step)
    writer.close()
    return folder


@pytest.mark.slow  # a fresh interpreter and a fit each: ~10-30 s on two shared cores
@pytest.mark.parametrize("log", ["run.csv", "tb"])
def test_fit_works_without_the_extras(logs, log):
    done = scalerl_without_extras("fit", logs / log, "--json", "--n-draws", "20", cwd=logs)
    assert done.returncode == 0, done.stderr
    assert '"A"' in done.stdout


def test_config_keys_works_without_the_extras(logs):
    done = scalerl_without_extras("config", "keys", cwd=logs)
    assert done.returncode == 0, done.stderr
    assert "optim.lr" in done.stdout and "task.train_files" in done.stdout


@pytest.mark.parametrize("command", [["train", "--out", "run", "--max-steps", "1"], ["demo"]])
def test_training_commands_name_the_extra(logs, command):
    done = scalerl_without_extras(*command, cwd=logs)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: this command needs "), done.stderr
    assert lines[0].endswith('pip install "scalerl[train]"')


def test_core_dependencies_are_the_forecasters():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = {requirement.split(">")[0].split("=")[0].strip() for requirement in project["dependencies"]}
    assert core == {"numpy", "scipy", "pandas", "matplotlib", "emcee", "typer", "rich", "pydantic"}
    extras = project["optional-dependencies"]
    assert any(req.startswith("tensorboard") for req in extras["tensorboard"])
    assert any(req.startswith("tbparse") for req in extras["dev"])


def test_fit_result_repr_is_one_short_line():
    compute = np.arange(1.0, 30.0)
    result = fit_sigmoid(compute, 0.1 + 0.5 / (1 + (8.0 / compute) ** 1.5), n_draws=20)
    text = repr(result)
    assert "\n" not in text and len(text) < 240
    assert text.startswith(f"FitResult(A={result.a:.4g}±") and f"n_points={result.n_points}" in text
