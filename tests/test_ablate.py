"""`scalerl ablate`: knob names and their errors, leave-one-out and sweep plans, resuming (finished
runs skipped), the report's outputs through the CLI, and tiny real runs (slow)."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from scalerl.cli.app import app
from scalerl.errors import ConfigError
from scalerl.forecast.curves import sigmoid_reward
from scalerl.models.sizes import MODEL_SIZES, model_size_assignments
from scalerl.study.ablate_plan import parse_sweep, plan_leave_one_out, plan_sweep
from scalerl.study.knobs import knob_assignments, resolve_knob, split_knob
from scalerl.study.study_runs import read_plan, run_study, variant_config, variant_run_dirs, write_plan
from scalerl.train.config.presets import LEAVE_ONE_OUT, preset_config
from scalerl.train.config.train_config import save_config
from scalerl.train.records.metrics_log import append_row

runner = CliRunner()
DEFAULT = preset_config("scalerl")

# ------------------------------------------------------------------------------------ knob names


def test_short_knob_names_map_to_config_fields_and_dotted_paths_pass_through():
    assert resolve_knob("loss") == "rl.loss" and resolve_knob("adv_norm") == "rl.advantage_norm"
    assert resolve_knob("zero_var_filter") == "rl.zero_variance_filter"
    assert resolve_knob("no_positive_resampling") == "rl.npr" and resolve_knob("fp32_head") == "model.fp32_head"
    assert resolve_knob("batch_prompts") == "sampling.prompts_per_step"
    assert resolve_knob("rl.cispo_eps_max") == "rl.cispo_eps_max"
    assert knob_assignments("aggregation", "sample", DEFAULT) == ("rl.aggregation=sample",)
    assert knob_assignments("fp32_head", "false", DEFAULT) == ("model.fp32_head=false",)


def test_unknown_knob_bad_value_and_bad_syntax_are_one_clear_error():
    with pytest.raises(ConfigError, match="unknown knob 'los': use one of loss, aggregation, adv_norm.*model_size"):
        resolve_knob("los")
    with pytest.raises(ConfigError, match="unknown knob 'advantage_norm'"):  # a leaf name is not a knob name
        resolve_knob("advantage_norm")
    with pytest.raises(ConfigError, match="rl.loss: 'ppo' is not one of cispo"):
        knob_assignments("loss", "ppo", DEFAULT)
    with pytest.raises(ConfigError, match="expected a boolean"):
        knob_assignments("fp32_head", "maybe", DEFAULT)
    with pytest.raises(ConfigError, match="expected knob=value, got 'loss'"):
        split_knob("loss")


def test_compound_knobs_set_every_field_they_need():
    assert model_size_assignments("m") == ("model.hidden_size=192", "model.num_layers=3", "model.num_heads=6")
    assert all(hidden % heads == 0 for hidden, _, heads in MODEL_SIZES.values())
    with pytest.raises(ConfigError, match="unknown model size 'huge'.*xs, s, m"):
        model_size_assignments("huge")
    # default: max_new_tokens 64, thinking budget 40..48, penalty cache 16 -> scaled by 96/64
    assert knob_assignments("gen_length", "96", DEFAULT) == (
        "sampling.max_new_tokens=96",
        "sampling.thinking_budget_min=60",
        "sampling.thinking_budget_max=72",
        "sampling.penalty_cache_tokens=24",
    )
    # default batch 32 x 16 = 512 sequences
    assert knob_assignments("generations_fixed_batch", "8", DEFAULT) == (
        "sampling.generations_per_prompt=8",
        "sampling.prompts_per_step=64",
    )
    with pytest.raises(ConfigError, match="must divide the total batch of 512"):
        knob_assignments("generations_fixed_batch", "3", DEFAULT)
    with pytest.raises(ConfigError, match="gen_length=0: expected a positive integer"):
        knob_assignments("gen_length", "0", DEFAULT)


# ------------------------------------------------------------------------------------------ plans


def test_leave_one_out_plan_from_knobs_and_the_whole_table():
    plan = plan_leave_one_out("scalerl", ["loss=dapo", "adv_norm=none", "no_positive_resampling=false"], seeds=3)
    assert plan.kind == "leave-one-out" and plan.seeds == 3
    assert [v.slug for v in plan.variants] == ["scalerl", "loss-dapo", "advantage_norm-none", "npr-false"]
    assert [v.knob for v in plan.variants[1:]] == ["rl.loss=dapo", "rl.advantage_norm=none", "rl.npr=false"]
    assert plan.variants[1].name == "loss: DAPO instead of CISPO"  # the table's name when it is a table entry
    assert variant_config(plan, plan.variants[3], 2) == preset_config("scalerl", ["rl.npr=false", "seed=2"])
    whole = plan_leave_one_out("scalerl", [])
    assert [v.knob for v in whole.variants[1:]] == list(LEAVE_ONE_OUT.values()) and whole.kind == "leave-one-out"


def test_leave_one_out_refuses_a_knob_the_base_has_and_a_repeated_knob():
    with pytest.raises(ConfigError, match="already has it"):
        plan_leave_one_out("scalerl", ["loss=cispo"])
    with pytest.raises(ConfigError, match="given twice"):
        plan_leave_one_out("scalerl", ["loss=dapo", "rl.loss=dapo"])
    with pytest.raises(ConfigError, match="unknown preset"):
        plan_leave_one_out("nope", ["loss=dapo"])


def test_sweep_planning_one_variant_per_value_first_is_the_reference():
    plan = plan_sweep("scalerl", "batch_prompts=8,16,32", common_overrides=["max_steps=5"], seeds=2)
    assert plan.kind == "sweep" and plan.sweep_knob == "batch_prompts"
    assert [v.slug for v in plan.variants] == ["batch_prompts-8", "batch_prompts-16", "batch_prompts-32"]
    assert [v.is_base for v in plan.variants] == [True, False, False]
    configs = [variant_config(plan, v, 1) for v in plan.variants]
    assert [c.sampling.prompts_per_step for c in configs] == [8, 16, 32]
    assert all(c.max_steps == 5 and c.seed == 1 for c in configs)
    sizes = plan_sweep("scalerl", "model_size=xs,m")
    assert [variant_config(sizes, v, 0).model.hidden_size for v in sizes.variants] == [64, 192]
    assert parse_sweep("gen_length=48, 96") == ("gen_length", ["48", "96"])


def test_sweep_errors():
    with pytest.raises(ConfigError, match="at least two values"):
        parse_sweep("batch_prompts=8")
    with pytest.raises(ConfigError, match="repeated"):
        parse_sweep("batch_prompts=8,8")
    with pytest.raises(ConfigError, match="unknown knob 'batch'"):
        parse_sweep("batch=8,16")
    with pytest.raises(ConfigError, match="same config as an earlier value"):
        plan_sweep("scalerl", "batch_prompts=8,16", common_overrides=["prompts_per_step=4"])


def test_plan_round_trips_with_its_kind(tmp_path):
    plan = plan_sweep("scalerl", "generations=4,8", seeds=2)
    write_plan(plan, tmp_path)
    assert read_plan(tmp_path) == plan


# -------------------------------------------------------------------------------------- resuming


def _finished_run(run_dir, config):
    save_config(config, run_dir)
    for step in range(config.max_steps + 1):
        append_row(run_dir / "metrics.jsonl", {"step": step, "flops": float(step), "pool_size": 10})


def test_resuming_an_ablation_skips_finished_runs_and_resumes_partial_ones(tmp_path):
    plan = plan_leave_one_out("scalerl", ["loss=dapo"], common_overrides=["max_steps=3"], seeds=2)
    base, dapo = plan.variants
    _finished_run(variant_run_dirs(tmp_path, plan, base)[0], variant_config(plan, base, 0))
    _finished_run(variant_run_dirs(tmp_path, plan, base)[1], variant_config(plan, base, 1))
    partial = variant_config(plan, dapo, 0)
    save_config(partial, variant_run_dirs(tmp_path, plan, dapo)[0])
    calls = []

    def fake_train(config, run_dir, *, resume, show_progress, on_row):
        calls.append((run_dir.relative_to(tmp_path).as_posix(), resume, config.seed, config.rl.loss))

    jobs = run_study(plan, tmp_path, show_progress=False, train_fn=fake_train)
    assert [job.status for job in jobs] == ["finished", "finished", "partial", "absent"]
    assert calls == [("loss-dapo/seed-0", True, 0, "dapo"), ("loss-dapo/seed-1", False, 1, "dapo")]


# ------------------------------------------------------------------------------ CLI and outputs

FLOPS = np.concatenate([[0.0], np.geomspace(1e12, 3e14, 20)])


def _write_curve(run_dir, seed, a, b):
    run_dir.mkdir(parents=True, exist_ok=True)
    rewards = sigmoid_reward(FLOPS, a, b, 1e13, 0.1) + np.r_[0.0, np.random.default_rng(seed).normal(0, 0.004, 20)]
    for step, (flops, reward) in enumerate(zip(FLOPS, rewards)):
        append_row(run_dir / "metrics.jsonl", {"step": step, "flops": float(flops), "val_pass_rate": float(reward)})


@pytest.mark.slow  # ~8-20 s: trains or runs a study
def test_sweep_report_only_prints_the_table_and_writes_json_markdown_and_figure(tmp_path):
    plan = plan_sweep("scalerl", "batch_prompts=8,32", seeds=2)
    write_plan(plan, tmp_path)
    for index, (variant, a) in enumerate(zip(plan.variants, (0.5, 0.6))):
        for k, run_dir in enumerate(variant_run_dirs(tmp_path, plan, variant)):
            _write_curve(run_dir, 10 * index + k, a, 1.5)
    result = runner.invoke(app, ["ablate", "--out", str(tmp_path), "--report-only"])
    assert result.exit_code == 0, result.output
    assert "sweep of batch_prompts" in result.output and "moves the" in result.output
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert saved["kind"] == "sweep" and saved["margin"] == {"value": 0.02, "source": "paper default"}
    assert saved["design"]["rl_seeds"] == [0, 1]
    big = saved["variants"][1]
    assert big["slug"] == "batch_prompts-32" and big["effect"]["label"] == "moves the ceiling (up)"
    assert big["effect"]["paired_delta_A"]["n"] == 2
    assert big["params"]["A"]["mean"] == pytest.approx(0.6, abs=0.01) and big["params"]["A"]["n"] == 2
    assert "larger batch: slower start" in big["paper"]
    assert len(big["seeds"]) == 2 and all(seed["params"] for seed in big["seeds"])
    assert (tmp_path / "sweep.md").read_text().startswith("# Sweep: val_pass_rate vs flops")
    assert (tmp_path / "sweep.png").stat().st_size > 10_000
    given = runner.invoke(app, ["ablate", "--out", str(tmp_path), "--report-only", "--margin", "0.5"])
    assert given.exit_code == 0 and "margin on A 0.5 (given)" in given.output.replace("\n", "")


def test_cli_errors_are_one_line(tmp_path):
    cases = [
        (["--leave-one-out", "los=dapo"], "unknown knob 'los'"),
        (["loss=dapo"], "choose one: --leave-one-out"),
        (["--leave-one-out", "--sweep", "batch_prompts=8,16"], "choose one"),
        (["--sweep", "batch_prompts=8,16", "loss=dapo"], "go with --leave-one-out"),
        (["--report-only"], "study_plan.json is missing"),
        (["--leave-one-out", "--margin", "-0.1"], "--margin must be >= 0"),
        (["--leave-one-out", "--reward-range", "0", "100"], "--reward-range goes with --from-logs"),
        (["--leave-one-out", "loss=dapo", "--parallel", "--cpus-per-run", "0"], "--cpus-per-run must be > 0"),
    ]
    for arguments, message in cases:
        result = runner.invoke(app, ["ablate", "--out", str(tmp_path / "x"), *arguments])
        assert result.exit_code == 2, (arguments, result.output)
        assert message in result.output and "Traceback" not in result.output


# --------------------------------------------------------------------------- tiny real runs (slow)

RUN_SCHEDULE = ("eval_every=1", "checkpoint_every=1")


@pytest.mark.slow
def test_tiny_ablation_trains_then_skips_finished_runs(tiny_study_options, tmp_path):
    command = [
        "ablate",
        "--out",
        str(tmp_path),
        "--leave-one-out",
        "loss=dapo",
        "--seeds",
        "2",
        "--max-steps",
        "2",
        "--no-progress",
        *tiny_study_options(*RUN_SCHEDULE),
    ]
    result = runner.invoke(app, command)
    assert result.exit_code == 0, result.output
    for run in ("scalerl/seed-0", "scalerl/seed-1", "loss-dapo/seed-0", "loss-dapo/seed-1"):
        rows = [json.loads(line) for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
        assert [row["step"] for row in rows] == [0, 1, 2]
    assert json.loads((tmp_path / "loss-dapo/seed-1/config.json").read_text())["seed"] == 1
    saved = json.loads((tmp_path / "ablation.json").read_text())
    assert [v["slug"] for v in saved["variants"]] == ["scalerl", "loss-dapo"]
    before = (tmp_path / "scalerl/seed-0/metrics.jsonl").read_bytes()
    again = runner.invoke(app, command)
    assert again.exit_code == 0, again.output
    assert (tmp_path / "scalerl/seed-0/metrics.jsonl").read_bytes() == before


@pytest.mark.slow
def test_parallel_ablation_on_ray_trains_each_run_once(tiny_study_options, tmp_path):
    command = [
        "ablate",
        "--out",
        str(tmp_path),
        "--sweep",
        "lr=1e-4,2e-4",
        "--max-steps",
        "2",
        "--parallel",
        "--ray-cpus",
        "2",
        "--no-progress",
        *tiny_study_options(*RUN_SCHEDULE),
    ]
    result = runner.invoke(app, command)
    assert result.exit_code == 0, result.output
    assert "2 runs to train on Ray (0 finished, skipped)" in result.output
    for run in ("lr-1e-4", "lr-2e-4"):
        rows = [json.loads(line) for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
        assert [row["step"] for row in rows] == [0, 1, 2]
    again = runner.invoke(app, command)
    assert again.exit_code == 0 and "0 runs to train on Ray (2 finished, skipped)" in again.output


@pytest.mark.slow
def test_a_failed_ray_run_is_named_in_one_error_and_the_others_finish(tmp_path):
    from scalerl.distributed.study_ray import RunsFailedError, run_jobs_on_ray
    from scalerl.study.study_runs import RayOptions, plan_jobs

    plan = plan_leave_one_out("scalerl", ["loss=dapo"], common_overrides=["max_steps=1"])
    jobs = plan_jobs(plan, tmp_path)

    def train_or_fail(config, run_dir, *, resume, show_progress, on_row):
        if config.rl.loss == "dapo":
            raise RuntimeError("out of memory")
        (run_dir / "done").parent.mkdir(parents=True, exist_ok=True)
        (run_dir / "done").write_text("ok")

    lines = []
    with pytest.raises(RunsFailedError, match=r"1 run\(s\) failed: loss-dapo \(.*out of memory.*run the same command"):
        run_jobs_on_ray(
            jobs, ["scalerl", "loss-dapo"], RayOptions(1.0, "", 2), log=lines.append, train_fn=train_or_fail
        )
    assert (tmp_path / "scalerl" / "done").read_text() == "ok"
    assert "run loss-dapo failed" in lines and any(line.startswith("run scalerl finished") for line in lines)
