"""`scalerl ablate --leave-one-out / --recipes` and its alias `scalerl study`: the plan, the paired
seeds, skip/resume decisions, the shared warm start recorded per run, the report through the CLI,
and one tiny end-to-end study."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from scalerl.cli.app import app
from scalerl.errors import ConfigError, InputError
from scalerl.forecast.curves import sigmoid_reward
from scalerl.study.ablate_plan import plan_leave_one_out, plan_recipes
from scalerl.study.run_curves import WARM_START_RECORD, paper_axis, seed_mean_curve
from scalerl.study.study_runs import (
    assignment_slug,
    read_plan,
    rl_seed,
    run_status,
    run_study,
    variant_config,
    variant_run_dirs,
    write_plan,
)
from scalerl.train.config.presets import LEAVE_ONE_OUT, preset_config
from scalerl.train.config.train_config import save_config
from scalerl.train.records.metrics_log import append_row


def plan_study(preset="scalerl", *, leave_one_out=False, recipes=(), only=(), common_overrides=(), seeds=1):
    """The old `plan_study` call shape on the one planner."""
    if recipes:
        return plan_recipes(preset, recipes, common_overrides=common_overrides, seeds=seeds, only=only)
    return plan_leave_one_out(preset, common_overrides=common_overrides, seeds=seeds, only=only)


runner = CliRunner()

# --------------------------------------------------------------------------------------- the plan


def test_leave_one_out_plan_is_the_base_then_each_ablation_with_its_one_override():
    plan = plan_study("scalerl", leave_one_out=True)
    base, *ablations = plan.variants
    assert base.is_base and base.slug == "scalerl" and base.overrides == () and base.knob is None
    assert [v.overrides for v in ablations] == [(a,) for a in LEAVE_ONE_OUT.values()]
    assert [v.name for v in ablations] == list(LEAVE_ONE_OUT)
    assert [v.slug for v in ablations][:3] == ["loss-dapo", "loss-gspo", "aggregation-sample"]
    assert "fp32_head-false" in [v.slug for v in ablations]
    assert len({v.slug for v in plan.variants}) == len(plan.variants)
    loss_dapo = variant_config(plan, ablations[0], 0)
    assert loss_dapo == preset_config("scalerl", ["rl.loss=dapo"])
    assert loss_dapo.rl.loss == "dapo" and loss_dapo.rl.aggregation == "prompt"  # exactly one knob flipped


def test_common_overrides_and_paired_seeds_apply_to_every_variant():
    plan = plan_study(leave_one_out=True, common_overrides=["max_steps=7", "seed=3"], seeds=2)
    assert plan.study_seed == 3 and plan.rl_seeds == [3, 4] == [rl_seed(3, 0), rl_seed(3, 1)]
    configs = [variant_config(plan, v, 1) for v in plan.variants]
    assert all(c.max_steps == 7 and c.seed == 4 for c in configs)
    assert {variant_config(plan, v, 0).seed for v in plan.variants} == {3}
    assert {variant_config(plan, v, 0).model.init_seed for v in plan.variants} == {0}  # one warm start
    dirs = variant_run_dirs("out", plan, plan.variants[1])
    assert [str(d) for d in dirs] == ["out/loss-dapo/seed-0", "out/loss-dapo/seed-1"]


def test_only_filters_by_slug_or_name_and_keeps_the_base():
    plan = plan_study(leave_one_out=True, only=["loss-dapo", "No FP32 LM head"])
    assert [v.slug for v in plan.variants] == ["scalerl", "loss-dapo", "fp32_head-false"]
    assert [v.slug for v in plan_study(leave_one_out=True, only=["npr-false,loss-gspo"]).variants] == [
        "scalerl",
        "loss-gspo",
        "npr-false",
    ]
    with pytest.raises(ConfigError, match="--only: unknown variant 'nope'.*loss-dapo"):
        plan_study(leave_one_out=True, only=["nope"])


def test_recipes_plan_and_plan_errors():
    plan = plan_study("scalerl", recipes=["grpo", "scalerl", "dapo", "grpo"])
    assert [v.slug for v in plan.variants] == ["scalerl", "grpo", "dapo"]
    assert variant_config(plan, plan.variants[1], 0) == preset_config("grpo")
    with pytest.raises(ConfigError, match="unknown preset 'ppo'"):
        plan_study(recipes=["ppo"])
    with pytest.raises(ConfigError, match="at least one preset other than the base"):
        plan_recipes("scalerl", ["scalerl"])
    with pytest.raises(ConfigError, match="sets seed, which the study sets itself"):
        plan_leave_one_out("scalerl", ["seed=4"])
    with pytest.raises(ConfigError, match="sets model.init_seed"):
        plan_leave_one_out("scalerl", ["model.init_seed=1"])
    with pytest.raises(ConfigError, match="unknown config key 'max_step'"):
        plan_study(leave_one_out=True, common_overrides=["max_step=3"])


def test_an_ablation_the_base_preset_already_has_is_left_out_with_a_note():
    plan = plan_study("grpo", leave_one_out=True)
    slugs = [v.slug for v in plan.variants]
    assert slugs[0] == "grpo" and "npr-false" not in slugs and "fp32_head-false" not in slugs
    assert "loss-dapo" in slugs
    assert any("npr=false" in note for note in plan.notes)
    same_loss = plan_study(leave_one_out=True, common_overrides=["rl.loss=dapo"])
    assert "loss-dapo" not in [v.slug for v in same_loss.variants]
    assert not any("dtype is float32" in note for note in plan_study("grpo", recipes=["dapo"]).notes)


def test_a_fp32_head_ablation_in_float32_is_flagged_as_repeating_the_base():
    plan = plan_study(leave_one_out=True, only=["fp32_head-false"])
    assert any(note.startswith("fp32_head-false: dtype is float32") for note in plan.notes)
    plan = plan_study(leave_one_out=True, only=["fp32_head-false"], common_overrides=["dtype=bfloat16"])
    assert not plan.notes


def test_assignment_slug_and_plan_round_trip(tmp_path):
    assert assignment_slug("sampling.length_control=penalty") == "length_control-penalty"
    assert assignment_slug("optim.lr=1e-3") == "lr-1e-3"
    plan = plan_study(leave_one_out=True, only=["loss-dapo"], common_overrides=["max_steps=5"], seeds=2)
    write_plan(plan, tmp_path)
    assert read_plan(tmp_path) == plan
    with pytest.raises(InputError, match="study_plan.json is missing"):
        read_plan(tmp_path / "elsewhere")


# ----------------------------------------------------------------------------- skip / resume logic


def _write_run(run_dir, config, last_step, pool_size=10):
    save_config(config, run_dir)
    for step in range(last_step + 1):
        append_row(run_dir / "metrics.jsonl", {"step": step, "flops": float(step), "pool_size": pool_size})


def test_run_status_finished_partial_absent(tmp_path):
    config = preset_config("scalerl", ["max_steps=4"])
    assert run_status(tmp_path / "absent", config) == "absent"
    _write_run(tmp_path / "partial", config, last_step=2)
    assert run_status(tmp_path / "partial", config) == "partial"
    _write_run(tmp_path / "finished", config, last_step=4)
    assert run_status(tmp_path / "finished", config) == "finished"
    # a longer study resumes the finished run; a pool emptied early counts as finished
    assert run_status(tmp_path / "finished", config.with_overrides(["max_steps=6"])) == "partial"
    _write_run(tmp_path / "emptied", config, last_step=2, pool_size=0)
    assert run_status(tmp_path / "emptied", config) == "finished"
    save_config(config, tmp_path / "crashed_before_any_row")
    assert run_status(tmp_path / "crashed_before_any_row", config) == "partial"
    with pytest.raises(ConfigError, match="different config \\(rl\\)"):
        run_status(tmp_path / "partial", config.with_overrides(["rl.loss=dapo"]))


def test_run_study_skips_finished_resumes_partial_starts_absent(tmp_path):
    plan = plan_study(leave_one_out=True, only=["loss-dapo", "npr-false"], common_overrides=["max_steps=3"])
    base, dapo, npr = plan.variants
    _write_run(tmp_path / base.slug, variant_config(plan, base, 0), last_step=3)
    _write_run(tmp_path / dapo.slug, variant_config(plan, dapo, 0), last_step=1)
    calls = []

    def fake_train(config, run_dir, *, resume, show_progress, on_row):
        calls.append((run_dir.name, resume, config.rl.loss, config.rl.npr))
        on_row({"step": 3, "train_reward": 0.1, "val_pass_rate": 0.2})

    jobs = run_study(plan, tmp_path, show_progress=False, train_fn=fake_train)
    assert [job.status for job in jobs] == ["finished", "partial", "absent"]
    assert calls == [("loss-dapo", True, "dapo", True), ("npr-false", False, "cispo", False)]
    assert read_plan(tmp_path) == plan


# ------------------------------------------------------------------ the shared warm start, recorded


def test_run_study_records_one_warm_start_per_configuration_in_every_run(tmp_path):
    plan = plan_study(leave_one_out=True, only=["loss-dapo"], common_overrides=["max_steps=2"], seeds=2)
    asked = []

    def fake_warm_start(config):
        asked.append(config.seed)
        return {"key": "k1", "weights_sha256": "d" * 64, "steps_run": 5, "pass_rate": 0.1, "reached_band": True}

    run_study(plan, tmp_path, show_progress=False, train_fn=lambda *a, **k: None, warm_start_fn=fake_warm_start)
    assert asked == [0]  # one configuration (the RL seed and loss do not count), prepared once
    records = [
        json.loads((d / WARM_START_RECORD).read_text())
        for v in plan.variants
        for d in variant_run_dirs(tmp_path, plan, v)
    ]
    assert len(records) == 4 and {r["weights_sha256"] for r in records} == {"d" * 64}


# ------------------------------------------------------------------ report through the CLI (alias)

BASE = {"a": 0.6, "b": 1.5, "c_mid": 1e13, "r0": 0.1}
FLOPS = np.concatenate([[0.0], np.geomspace(1e12, 3e14, 24)])


def _write_curve(run_dir, rewards):
    run_dir.mkdir(parents=True, exist_ok=True)
    for step, (flops, reward) in enumerate(zip(FLOPS, rewards)):
        append_row(run_dir / "metrics.jsonl", {"step": step * 10, "flops": float(flops), "train_reward": 0.0})
        append_row(
            run_dir / "metrics.jsonl", {"step": step * 10, "flops": float(flops), "val_pass_rate": float(reward)}
        )


def _sigmoid_rewards(seed, **changes):
    params = {**BASE, **changes}
    noise = np.random.default_rng(seed).normal(0.0, 0.004, FLOPS.size)
    noise[0] = 0.0
    return sigmoid_reward(FLOPS, params["a"], params["b"], params["c_mid"], params["r0"]) + noise


@pytest.mark.slow  # ~8-20 s: trains or runs a study
def test_study_is_an_alias_of_ablate_with_one_report(tmp_path):
    plan = plan_study(leave_one_out=True, only=["fp32_head-false", "npr-false"])
    write_plan(plan, tmp_path)
    _write_curve(tmp_path / "scalerl", _sigmoid_rewards(0))
    _write_curve(tmp_path / "fp32_head-false", _sigmoid_rewards(0, a=0.7))
    flat = 0.1 + np.random.default_rng(3).normal(0.0, 0.004, FLOPS.size)
    flat[0] = 0.1
    _write_curve(tmp_path / "npr-false", flat)
    result = runner.invoke(app, ["study", "--out", str(tmp_path), "--report-only"])
    assert result.exit_code == 0, result.output
    assert "alias of `scalerl ablate`" in result.output
    assert "moves the" in result.output and "fit failed" in result.output
    saved = json.loads((tmp_path / "ablation.json").read_text())
    by_slug = {v["slug"]: v for v in saved["variants"]}
    assert by_slug["fp32_head-false"]["effect"]["label"] == "moves the ceiling (up)"
    assert by_slug["npr-false"]["effect"]["effect"] == "undecided"
    assert [v["slug"] for v in saved["variants"]] == ["scalerl", "npr-false", "fp32_head-false"]
    assert saved["margin"] == {"value": 0.02, "source": "paper default"}
    assert saved["design"]["rl_seeds"] == [0]
    assert not (tmp_path / "study.json").exists()
    ablate = runner.invoke(app, ["ablate", "--out", str(tmp_path), "--report-only"])
    assert ablate.exit_code == 0 and "is an alias" not in ablate.output
    assert json.loads((tmp_path / "ablation.json").read_text())["variants"] == saved["variants"]


def test_seed_mean_curve_averages_the_ith_evaluations_and_cuts_to_the_shortest_seed(tmp_path):
    for seed, (rewards, flops) in enumerate([([0.1, 0.3, 0.5], [0, 10, 20]), ([0.2, 0.5], [0, 12])]):
        for step, (reward, compute) in enumerate(zip(rewards, flops)):
            append_row(tmp_path / f"{seed}.jsonl", {"step": step, "flops": compute, "val_pass_rate": reward})
    compute, reward = seed_mean_curve([tmp_path / "0.jsonl", tmp_path / "1.jsonl"], "flops", "val_pass_rate")
    assert compute.tolist() == [0.0, 11.0] and reward.tolist() == pytest.approx([0.15, 0.4])


def test_paper_axis_and_report_errors(tmp_path):
    assert paper_axis("rl.loss=dapo") == "A" and paper_axis("model.fp32_head=false") == "A"
    assert paper_axis("rl.advantage_norm=none") == "B" and paper_axis("sampling.length_control=penalty") is None
    assert paper_axis(None) is None
    result = runner.invoke(app, ["study", "--out", str(tmp_path / "none"), "--report-only"])
    assert result.exit_code == 2 and "study_plan.json is missing" in result.output
    result = runner.invoke(app, ["study", "--out", str(tmp_path), "--leave-one-out", "--only", "nope"])
    assert result.exit_code == 2 and "--only: unknown variant 'nope'" in result.output


# ----------------------------------------------------------------------------- tiny end-to-end study

RUN_SCHEDULE = ("eval_every=1", "checkpoint_every=1")


@pytest.mark.slow
def test_tiny_end_to_end_study_trains_two_variants_then_skips_them(tiny_study_options, tmp_path):
    command = [
        "study",
        "--out",
        str(tmp_path),
        "--leave-one-out",
        "--only",
        "loss-dapo",
        "--max-steps",
        "2",
        "--no-progress",
        *tiny_study_options(*RUN_SCHEDULE),
    ]
    result = runner.invoke(app, command)
    assert result.exit_code == 0, result.output
    for slug in ("scalerl", "loss-dapo"):
        rows = [json.loads(line) for line in (tmp_path / slug / "metrics.jsonl").read_text().splitlines()]
        assert [row["step"] for row in rows] == [0, 1, 2]
        assert (tmp_path / slug / "config.json").is_file() and (tmp_path / slug / "checkpoints").is_dir()
    assert json.loads((tmp_path / "loss-dapo" / "config.json").read_text())["rl"]["loss"] == "dapo"
    saved = json.loads((tmp_path / "ablation.json").read_text())
    assert [v["slug"] for v in saved["variants"]] == ["scalerl", "loss-dapo"]
    assert all(len(v["seeds"]) == 1 for v in saved["variants"])
    before = (tmp_path / "scalerl" / "metrics.jsonl").read_bytes()
    again = runner.invoke(app, command)  # finished variants are skipped, not retrained
    assert again.exit_code == 0, again.output
    assert (tmp_path / "scalerl" / "metrics.jsonl").read_bytes() == before


@pytest.mark.slow
def test_two_studies_share_the_warm_start_checkpoint_by_digest(tmp_path):
    from scalerl.study.ablate_plan import plan_sweep
    from scalerl.study.shared_start import shared_warm_start

    tiny = [
        "model.hidden_size=32",
        "model.num_layers=1",
        "model.num_heads=2",
        "model.warmstart_steps=2",
        "model.warmstart_probe_every=50",
        "num_train_prompts=40",
        "num_val_prompts=8",
        "eval_prompts=8",
        "max_new_tokens=16",
        "thinking_budget_min=8",
        "thinking_budget_max=12",
        "penalty_cache_tokens=4",
        f"model.warmstart_cache_dir={tmp_path / 'cache'}",
        "max_steps=1",
    ]
    loo = plan_leave_one_out("scalerl", ["loss=dapo", "fp32_head=false"], common_overrides=tiny, seeds=2)
    sweep = plan_sweep("scalerl", "batch_prompts=4,8", common_overrides=tiny)
    for plan, out in ((loo, tmp_path / "loo"), (sweep, tmp_path / "sweep")):
        run_study(plan, out, show_progress=False, train_fn=lambda *a, **k: None, warm_start_fn=shared_warm_start)
    records = [json.loads(path.read_text()) for path in tmp_path.glob("[ls]*/**/" + WARM_START_RECORD)]
    assert len(records) == 3 * 2 + 2  # every run of both studies
    assert len({r["weights_sha256"] for r in records}) == 1 and len({r["key"] for r in records}) == 1
    assert len([p for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")]) == 1
