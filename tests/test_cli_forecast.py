"""`scalerl fit / compare / plot` end to end on synthetic logs with known parameters."""

import json
import subprocess
import sys

import numpy as np
import pytest
from cli_forecast_support import (
    FAST,
    GPU_HOURS,
    TRUE,
    invoke,
    paper_run_csv,
    strict_json,
    synthetic_rewards,
    write_csv,
)

from scalerl.cli.fit_inputs import fit_window_limit, parse_compute_values, run_labels
from scalerl.cli.fit_views import extrapolation_target
from scalerl.errors import InputError
from scalerl.forecast.curves import sigmoid_compute_for_reward, sigmoid_reward


@pytest.fixture
def run_csv(tmp_path):
    return paper_run_csv(tmp_path)


# --- fit -----------------------------------------------------------------------------------------


def test_fit_json_recovers_known_parameters(run_csv):
    result = invoke("fit", run_csv, "--json", "--predict-at", "5000", "--predict-at", "40000", "--target", "0.5", *FAST)
    assert result.exit_code == 0, result.output
    assert result.stdout.count("\n") == 1  # exactly one JSON object, nothing else
    payload = strict_json(result.stdout)
    assert set(payload) == {
        "schema_version",
        "verdict",
        "params",
        "intervals",
        "level",
        "ceiling_identified",
        "ceiling_at_bound",
        "predictions",
        "compute_to_target",
        "compute_near_ceiling",
        "collapse_compute",
        "noise_sd",
        "reward_range",
        "n_points",
        "warnings",
        "source",
        "x_column",
        "y_column",
    }
    assert payload["verdict"]["kind"] == "plateaued" and payload["collapse_compute"] is None
    assert (payload["x_column"], payload["y_column"], payload["reward_range"]) == (
        "gpu_hours",
        "val_pass_rate",
        [0.0, 1.0],
    )
    params = payload["params"]
    assert params["R0"] == pytest.approx(TRUE["R0"])
    assert params["A"] == pytest.approx(TRUE["A"], abs=0.02)
    assert params["B"] == pytest.approx(TRUE["B"], rel=0.15)
    assert params["C_mid"] == pytest.approx(TRUE["C_mid"], rel=0.1)
    for name in ("A", "B", "C_mid"):
        lo, hi = payload["intervals"][name]
        assert lo <= params[name] <= hi
    assert payload["level"] == 0.8
    assert payload["n_points"] == GPU_HOURS.size - 1  # the C = 0 point sets R0, it is not fitted
    assert payload["ceiling_identified"] is True
    assert [row["x"] for row in payload["predictions"]] == [5000.0, 40000.0]
    at_40k = payload["predictions"][1]
    true_40k = float(sigmoid_reward(40000.0, TRUE["A"], TRUE["B"], TRUE["C_mid"], TRUE["R0"]))
    assert at_40k["lo"] <= at_40k["reward"] <= at_40k["hi"]
    assert at_40k["reward"] == pytest.approx(true_40k, abs=0.02)
    true_compute = float(sigmoid_compute_for_reward(0.5, TRUE["A"], TRUE["B"], TRUE["C_mid"], TRUE["R0"]))
    needed = payload["compute_to_target"]
    assert needed["value"] == pytest.approx(true_compute, rel=0.1) and needed["lo"] <= needed["value"] <= needed["hi"]


def test_fit_seed_reproduces_its_answer_and_moves_only_the_sampled_edges(run_csv, tmp_path):
    """--seed picks the posterior sampler's seed: the same seed gives the same JSON, the default is
    seed 0, another seed moves the posterior medians and the interval edges a little; compare and
    plot take it too; a negative seed is refused."""

    def fit_json(*extra):
        result = invoke("fit", run_csv, "--json", *extra, *FAST)
        assert result.exit_code == 0, result.output
        return strict_json(result.stdout)

    seed_3 = fit_json("--seed", 3)
    assert fit_json("--seed", 3) == seed_3
    assert fit_json() == fit_json("--seed", 0)
    seed_4 = fit_json("--seed", 4)
    assert seed_4["params"]["A"] == pytest.approx(seed_3["params"]["A"], abs=0.005)
    assert seed_4["intervals"]["A"] != seed_3["intervals"]["A"]
    assert np.allclose(seed_4["intervals"]["A"], seed_3["intervals"]["A"], atol=0.01)
    other = write_csv(tmp_path / "other.csv", GPU_HOURS, synthetic_rewards(GPU_HOURS, seed=1))
    assert invoke("compare", run_csv, other, "--json", "--seed", 2, *FAST).exit_code == 0
    assert invoke("plot", run_csv, "-o", tmp_path / "fit.png", "--seed", 2, *FAST).exit_code == 0
    assert invoke("fit", run_csv, "--seed", -1).exit_code != 0


def test_fit_fraction_half_uses_only_the_first_half(tmp_path, run_csv):
    half = invoke("fit", run_csv, "--json", "--fit-fraction", "0.5", *FAST)
    assert half.exit_code == 0, half.output
    payload = strict_json(half.stdout)
    expected = int(np.sum((GPU_HOURS > 0) & (GPU_HOURS <= 0.5 * GPU_HOURS.max())))
    assert payload["n_points"] == expected == 12
    # the same window as an absolute limit gives the very same fit
    until = invoke("fit", run_csv, "--json", "--fit-until", "8000", *FAST)
    assert strict_json(until.stdout)["params"] == payload["params"]
    # and a file truncated at the limit too: the held-out points play no part in the fit
    keep = GPU_HOURS <= 8000
    truncated = write_csv(tmp_path / "half.csv", GPU_HOURS[keep], synthetic_rewards(GPU_HOURS)[keep])
    assert strict_json(invoke("fit", truncated, "--json", *FAST).stdout)["params"] == payload["params"]


def test_fit_human_summary(run_csv):
    result = invoke("fit", run_csv, "--predict-at", "20000", "--target", "0.9", *FAST)
    assert result.exit_code == 0, result.output
    for text in ("A", "C_mid", "80% interval", "verdict: plateaued", "20000", "not reachable"):
        assert text in result.stdout


def test_fit_human_output_opens_with_a_headline_and_prints_a_readable_power_law_table(run_csv):
    result = invoke("fit", run_csv, "--predict-at", "20000", "--target", "0.9", "--power-law", *FAST)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1].startswith("plateaued: ceiling A ") and "final reward at the budget 2e+04: " in lines[1]
    assert "target 0.9 not reachable" in lines[1]
    rows = {line.split("│")[1].strip(): line.split("│")[2:4] for line in lines if line.count("│") == 4}
    assert {"ceiling A", "exponent B", "scale", "reward at x = 20000"} <= set(rows)
    law_a = [float(v) for v in rows["ceiling A"][0].replace("[", " ").replace("]", " ").replace(",", " ").split()]
    assert all(0.0 <= v <= 1.0 for v in law_a)  # the power law's A interval stays inside the reward range


def test_fit_says_still_rising_the_same_way_in_json_and_text(tmp_path):
    early = GPU_HOURS[GPU_HOURS <= 1500]
    path = write_csv(tmp_path / "early.csv", early, synthetic_rewards(early, noise_sd=0.002))
    payload = strict_json(invoke("fit", path, "--json", *FAST).stdout)
    assert payload["ceiling_identified"] is False and payload["verdict"]["kind"] == "still_rising"
    human = invoke("fit", path, *FAST)
    assert "verdict: still_rising" in human.stdout
    assert human.stdout.splitlines()[1].startswith(payload["verdict"]["text"])


def test_fit_options_r0_min_x_loss_and_power_law(run_csv):
    result = invoke(
        "fit",
        run_csv,
        "--json",
        "--r0",
        "0.05",
        "--min-x",
        "600",
        "--loss",
        "soft_l1",
        "--power-law",
        "--predict-at",
        "20000",
        *FAST,
    )
    assert result.exit_code == 0, result.output
    payload = strict_json(result.stdout)
    assert payload["params"]["R0"] == 0.05
    assert payload["n_points"] == int(np.sum(GPU_HOURS >= 600))
    law = payload["power_law"]
    assert set(law["params"]) == {"A", "D", "B"}
    assert law["n_points"] == payload["n_points"]
    assert [row["x"] for row in law["predictions"]] == [20000.0]


def test_fit_plus_minus_one_rewards_with_a_reward_range(tmp_path):
    # mean reward of +1/-1 rewards: R0 = -0.6, A = 0.4 lies in [-1, 1], not in the default [0, 1];
    # B = 3 levels the run off within its span (a flat end is read where it sits)
    compute = GPU_HOURS
    reward = sigmoid_reward(compute, 0.4, 3.0, 800.0, -0.6)
    path = write_csv(tmp_path / "pm.csv", compute, reward, x_name="step", y_name="reward")
    inferred = strict_json(invoke("fit", path, "--json", *FAST).stdout)  # outside [0, 1]: the range is left open
    assert any("outside [0, 1]: the reward range is inferred as open" in w for w in inferred["warnings"])
    assert inferred["params"]["A"] == pytest.approx(0.4, abs=1e-3)
    payload = strict_json(invoke("fit", path, "--json", "--reward-range", "-1", "1", *FAST).stdout)
    assert payload["params"]["A"] == pytest.approx(0.4, abs=1e-3)
    assert payload["params"]["C_mid"] == pytest.approx(800.0, rel=1e-2)
    refused = invoke("fit", path, "--json", "--reward-range", "0", "1", *FAST)  # explicit bounds are checked
    assert refused.exit_code == 2 and "outside the reward range [0, 1]" in refused.stderr


def test_fit_reads_jsonl_metrics_with_sparse_eval_rows(tmp_path):
    rewards = synthetic_rewards(GPU_HOURS)
    lines = []
    for step, (flops, reward) in enumerate(zip(GPU_HOURS * 1e15, rewards)):
        lines.append(json.dumps({"step": 2 * step, "flops": flops, "loss": 1.0}))
        lines.append(json.dumps({"step": 2 * step + 1, "flops": flops, "val_pass_rate": reward}))
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join(lines) + "\n")
    payload = strict_json(invoke("fit", path, "--x", "flops", "--y", "val_pass_rate", "--json", *FAST).stdout)
    assert payload["params"]["C_mid"] == pytest.approx(TRUE["C_mid"] * 1e15, rel=0.1)  # scale-free units
    assert payload["params"]["A"] == pytest.approx(TRUE["A"], abs=0.02)


def test_fit_reads_a_tensorboard_run(tmp_path):
    from tensorboard.summary import Writer

    writer = Writer(str(tmp_path / "tb"))
    for gpu_hours, reward in zip(GPU_HOURS, synthetic_rewards(GPU_HOURS)):
        writer.add_scalar("val/pass_rate", float(reward), int(gpu_hours))
    writer.close()
    result = invoke("fit", tmp_path / "tb", "--x", "step", "--json", *FAST)
    assert result.exit_code == 0, result.output
    assert strict_json(result.stdout)["params"]["A"] == pytest.approx(TRUE["A"], abs=0.02)


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_fit_writes_a_plot(run_csv, tmp_path, suffix):
    figure = tmp_path / f"fit{suffix}"
    result = invoke("fit", run_csv, "--fit-fraction", "0.5", "--predict-at", "30000", "--plot", figure, "--json", *FAST)
    assert result.exit_code == 0, result.output
    strict_json(result.stdout)  # the figure message does not pollute the JSON
    data = figure.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") if suffix == ".png" else b"<svg" in data[:2000]


# --- compare ---------------------------------------------------------------------------------------


def test_compare_decides_by_ceiling_when_a_differs_by_more_than_the_margin(tmp_path):
    high = write_csv(tmp_path / "high.csv", GPU_HOURS, synthetic_rewards(GPU_HOURS, seed=1, a=0.70))
    low = write_csv(tmp_path / "low.csv", GPU_HOURS, synthetic_rewards(GPU_HOURS, seed=2, a=0.60))
    result = invoke("compare", low, high, "--json", *FAST)
    assert result.exit_code == 0, result.output
    payload = strict_json(result.stdout)
    assert payload["decided_by"] == "ceiling"
    assert payload["ranking"] == ["high", "low"] and payload["winner"] == "high"
    assert payload["runs"]["high"]["params"]["A"] == pytest.approx(0.70, abs=0.02)
    assert payload["runs"]["high"]["fixed_ceiling"] is None
    human = invoke("compare", low, high, *FAST)
    assert "decided by: ceiling" in human.stdout
    first_row = next(line for line in human.stdout.splitlines() if line.startswith("│ 1 │"))
    assert first_row.split("│")[2].strip() == "high"


def test_compare_decides_by_efficiency_within_the_margin(tmp_path):
    # Equal true ceilings; these noise draws leave 80 % intervals of A that overlap ([0.603, 0.612]
    # and [0.606, 0.622]). Seeds 3 and 4 pulled them apart, to [0.604, 0.610] and [0.612, 0.630],
    # once the noise floor stopped widening runs this quiet (noise 0.004).
    fast = write_csv(tmp_path / "fast.csv", GPU_HOURS, synthetic_rewards(GPU_HOURS, seed=5, b=2.6))
    slow = write_csv(tmp_path / "slow.csv", GPU_HOURS, synthetic_rewards(GPU_HOURS, seed=6, b=1.4))
    figure = tmp_path / "compare.png"
    result = invoke("compare", slow, fast, "--json", "--plot", figure, *FAST)
    assert result.exit_code == 0, result.output
    payload = strict_json(result.stdout)
    assert payload["decided_by"] == "efficiency"
    assert payload["ranking"] == ["fast", "slow"]
    shared = {name: payload["runs"][name]["fixed_ceiling"] for name in ("fast", "slow")}
    assert shared["fast"]["A"] == shared["slow"]["A"]
    assert shared["fast"]["B"] > shared["slow"]["B"]
    assert figure.read_bytes().startswith(b"\x89PNG")
    # a margin of 0 puts nearly equal ceilings in separate clusters, but their intervals overlap:
    # the ceiling is undecided and efficiency at a shared A decides
    strict = strict_json(invoke("compare", slow, fast, "--json", "--margin", "0", *FAST).stdout)
    assert strict["ceiling_undecided"] and strict["decided_by"] == "efficiency"
    assert strict["winner"] == "fast" and "ceiling undecided" in strict["headline"]


# --- plot ------------------------------------------------------------------------------------------


def test_plot_command_one_and_several_runs(tmp_path, run_csv):
    other = write_csv(tmp_path / "other.csv", GPU_HOURS, synthetic_rewards(GPU_HOURS, seed=1, a=0.55))
    single = tmp_path / "single.png"
    result = invoke("plot", run_csv, "-o", single, "--fit-fraction", "0.5", "--target-x", "50000")
    assert result.exit_code == 0, result.output
    assert single.read_bytes().startswith(b"\x89PNG")
    several = tmp_path / "both.svg"
    result = invoke("plot", run_csv, other, "-o", several)
    assert result.exit_code == 0, result.output
    text = several.read_text()
    assert "<svg" in text and "run" in text and "other" in text


# --- helpers and packaging -------------------------------------------------------------------------


def test_fit_window_limit_known_answers():
    compute = np.array([0.0, 10.0, 40.0])
    assert fit_window_limit(compute, None, None) is None
    assert fit_window_limit(compute, None, 0.5) == 20.0
    assert fit_window_limit(compute, 15.0, None) == 15.0
    with pytest.raises(InputError, match="not both"):
        fit_window_limit(compute, 15.0, 0.5)


def test_extrapolation_target_known_answers():
    assert extrapolation_target([], None, 100.0) is None
    assert extrapolation_target([50.0, 300.0], 200.0, 100.0) == 300.0
    assert extrapolation_target([50.0], 5000.0, 100.0) == 5000.0
    assert extrapolation_target([50.0], 1e9, 100.0) == 50.0  # a far-off target would hide the data


def test_parse_compute_values_and_run_labels(tmp_path):
    assert parse_compute_values(["1e4,2e4", "5"], "--predict-at") == [1e4, 2e4, 5.0]
    with pytest.raises(InputError):
        parse_compute_values(["-3"], "--predict-at")
    paths = [tmp_path / "a" / "metrics.jsonl", tmp_path / "b" / "metrics.jsonl", tmp_path / "c.csv"]
    assert run_labels(paths) == ["a/metrics", "b/metrics", "c"]


def test_cli_imports_without_torch():
    code = "import sys, scalerl.cli.app; assert 'torch' not in sys.modules, 'torch imported'; print('ok')"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert completed.stdout.strip() == "ok", completed.stderr
