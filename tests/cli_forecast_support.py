"""Synthetic logs with known parameters and the CLI runner shared by the `scalerl fit / compare /
plot` tests (test_cli_forecast.py, test_cli_bad_input.py)."""

import json

import numpy as np
from typer.testing import CliRunner

from scalerl.cli.app import app
from scalerl.forecast.curves import sigmoid_reward

# ScaleRL 8B dense (paper table): C_mid 2542 GPU-hours, B 1.92, A 0.610; R0 0.1.
TRUE = {"A": 0.61, "B": 1.92, "C_mid": 2542.0, "R0": 0.1}
GPU_HOURS = np.array([0, 250, 500, 750, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 6500, 8000, 10000, 13000, 16000.0])
FAST = ["--n-draws", "60"]

runner = CliRunner()


def synthetic_rewards(compute, noise_sd=0.004, seed=0, a=TRUE["A"], b=TRUE["B"], c_mid=TRUE["C_mid"]):
    clean = sigmoid_reward(compute, a, b, c_mid, TRUE["R0"])
    noise = np.random.default_rng(seed).normal(0.0, noise_sd, np.size(compute))
    noise[np.asarray(compute) == 0] = 0.0
    return clean + noise


def write_csv(path, compute, reward, x_name="gpu_hours", y_name="val_pass_rate"):
    rows = [f"{x_name},{y_name}"] + [f"{float(c)!r},{float(r)!r}" for c, r in zip(compute, reward)]
    path.write_text("\n".join(rows) + "\n")
    return path


def paper_run_csv(tmp_path):
    """run.csv: the paper's 8B curve (TRUE) at GPU_HOURS, noise sd 0.004."""
    return write_csv(tmp_path / "run.csv", GPU_HOURS, synthetic_rewards(GPU_HOURS))


def strict_json(text):
    def reject(token):
        raise AssertionError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=reject)


def invoke(*args):
    return runner.invoke(app, [str(arg) for arg in args])
