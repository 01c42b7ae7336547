"""Renderers of figures the docs used to type by hand (benchmarks/render/): known inputs, known text."""

from benchmarks.render import pipeline_scale, readings, study_checks, tables


def _robustness(parallel, runs):
    return {
        "settings": {"parallel": parallel},
        "runs": [{"threads": threads, "seconds": seconds, "exit_code": code} for threads, seconds, code in runs],
    }


def test_demo_time_reads_the_two_thread_demos_that_ran_alone():
    text = tables.demo_time(
        _robustness(2, [(2, 60.0, 0)]),  # two at a time: not the time of one demo
        _robustness(1, [(2, 480.0, 0), (1, 900.0, 0), (2, 720.0, 0), (2, 9999.0, 1)]),
        _robustness(1, [(2, 600.0, 0)]),
    )
    assert text == (
        "`make demo` takes 8-12 minutes on two CPU cores (median 10 over 3 demos run one at a time "
        "on two threads; install excluded)."
    )


def _controls(lr_saved, ceiling_pairs, base_as=(0.78, 0.79)):
    pair = {"verdict": "moves the ceiling", "direction": "down"}
    interval = {"mean": -0.013, "lo": -0.021, "hi": -0.005, "source": "paired t"}
    return {
        "settings": {"steps": 200},
        "controls": {
            "ceiling_mover": {
                "verdict": "moves the ceiling (down)",
                "pairs": 3,
                "pairs_within": 2,
                "tolerance": 0.03,
                "expected_delta_A": -0.225,
                "bound_base": 0.775,
                "passed": True,
                "settled_by_difficulty": {
                    "base": {"val_pass_rate_easy": 1.0, "val_pass_rate_hard": 0.12},
                    "variant": {"val_pass_rate_easy": 0.97, "val_pass_rate_hard": 0.11},
                },
            },
            "efficiency_mover": {
                "verdict": "undecided",
                "ceiling_pairs": ceiling_pairs,
                "passed": True,
                "reason": "it crosses the margin",
            },
        },
        "ceiling_study": {
            "variants": [
                {"is_base": True, "seeds": [{"params": {"A": a}} for a in base_as]},
                {
                    "is_base": False,
                    "effect": {
                        "effect": "moves the ceiling",
                        "direction": "down",
                        "pairs": [pair, pair, {"verdict": "undecided", "direction": None}],
                    },
                },
            ]
        },
        "efficiency_study": {
            "variants": [
                {"is_base": True},
                {
                    "is_base": False,
                    "effect": {"paired_delta_A": interval, "paired_compute_saved_to_half_gain": {"mean": lr_saved}},
                },
            ]
        },
    }


def test_ceiling_reading_counts_pairs_and_places_the_fitted_ceiling_against_the_bound():
    text = study_checks.positive_controls_ceiling_reading(_controls(-0.1, 0))
    assert text.startswith(
        'Both checks pass. The ceiling mover is called "moves the ceiling (down)" in 2 of 3 '
        "pairs, and 2 of them fall within 0.03 of the constructed -0.225."
    )
    assert "settle at 1.00 on easy prompts and guess hard ones at 0.12" in text
    assert "at 0.97 on easy prompts and 0.11 on hard ones" in text
    assert text.endswith("the base's fitted ceiling, 0.785, sits over its 0.775 bound.")
    assert study_checks.positive_controls_ceiling_reading(_controls(-0.1, 0, (0.76, 0.77))).endswith(
        "0.765, sits under its 0.775 bound."
    )


def test_efficiency_reading_says_the_pace_and_the_ceiling_pairs():
    assert study_checks.positive_controls_efficiency_reading(_controls(-0.164, 0)) == (
        'The learning-rate control is called "undecided": at 200 steps its paired dA is -0.013 [-0.021, -0.005] '
        "(it crosses the margin). The compute to half the gain says it is slower (-0.164 decades). "
        "No pair calls it a ceiling mover."
    )
    assert study_checks.positive_controls_efficiency_reading(_controls(0.2, 1)).endswith(
        "it is faster (+0.200 decades). 1 pair(s) call it a ceiling mover."
    )


def test_publication_at_scale_reads_the_largest_model():
    rows = [
        {
            "parameters": 1_000_000,
            "bytes_per_version": 2_000_000,
            "snapshot_ms": 1.0,
            "put_ms": 1.0,
            "network_ms_per_copy_10gbit": 1.6,
        },
        {
            "parameters": 2_000_000_000,
            "bytes_per_version": 4_000_000_000,
            "snapshot_ms": 3900.0,
            "put_ms": 2300.0,
            "network_ms_per_copy_10gbit": 3200.0,
        },
    ]
    text = tables.publication_at_scale({"publication": rows})
    assert "at ~2 B parameters expect" in text and "put of 4.0 GB per version" in text
    assert "3.9 s + 2.3 s on this CPU" in text and "(3.2 s at 10 Gbit/s, 0.32 s at 100 Gbit/s)" in text


def test_study_run_cost_is_device_hours_per_run():
    results = {"settings": {"parallel_runs": 2, "steps": 200}, "run_device_hours": {"runs": 15, "total": 2.75}}
    assert study_checks.study_run_cost(results) == (
        "On 2 CPU cores, 2 runs of 200 steps of the built-in model side by side take about 11 minutes "
        "(the positive controls: 2.8 device-hours over 15 runs)."
    )


def test_demo_band_misses_counts_the_demos_holding_under_half():
    robustness = {"runs": [{"seed": s, "threads": 2} for s in range(4)]}
    held = [(13, 13), (6, 13), (7, 14), (0, 15)]  # 6 of 13 is under half, 7 of 14 is not
    self_forecast = {
        "runs": [{"run": f"demo__seed{s}-threads2", "inside": i, "held_out": n} for s, (i, n) in enumerate(held)]
    }
    assert readings.demo_band_misses(robustness, self_forecast) == (
        "2 of the 4 demos hold fewer than half of their later evaluations in the first-half band (the table above)."
    )


def _rejudged(today: dict[str, tuple[str, str | None]], recorded: dict[str, str]):
    verdicts = {
        "groups": {
            study_checks.TINY_GROUP: {
                "variants": [{"variant": "base", "is_base": True, "verdict": None, "reason": None}]
                + [{"variant": s, "is_base": False, "verdict": v, "reason": r} for s, (v, r) in today.items()]
            }
        }
    }
    ablation = {
        "leave_one_out": {
            "variants": [{"slug": "base", "is_base": True}]
            + [
                {"slug": s, "knob": f"rl.{s}", "is_base": False, "effect": {"label": label}}
                for s, label in recorded.items()
            ]
        }
    }
    return readings.tiny_study_rejudged(verdicts, ablation)


def test_tiny_study_rejudged_names_the_knobs_whose_verdict_changed():
    none = "no measurable effect at margin 0.02"
    text = _rejudged({"b": ("undecided", "it crosses"), "a": (none, None)}, {"a": none, "b": none})
    assert text.endswith(
        "call 1 of the 2 knobs differently: `rl.b` **undecided** (it crosses). "
        "No knob is called a ceiling or an efficiency mover either way."
    )
    same = _rejudged({"a": (none, None)}, {"a": none})
    assert "give the same verdict on all 1 knobs." in same
    moved = _rejudged({"a": ("moves the ceiling (down)", None)}, {"a": none})
    assert moved.endswith("call 1 of the 1 knobs differently: `rl.a` **moves the ceiling (down)**.")


def test_variant_start_is_the_range_of_its_seeds_r0():
    def results(starts):
        seeds = [{"params": {"R0": r0}} for r0 in starts]
        return {"ceiling_study": {"variants": [{"is_base": True, "seeds": []}, {"is_base": False, "seeds": seeds}]}}

    assert study_checks.positive_controls_variant_start(results([0.2988, 0.2852, 0.2949])) == (
        "The run above starts the variant at a pass rate of 0.285-0.299 over its 3 seeds."
    )
    assert study_checks.positive_controls_variant_start(results([0.3, 0.3])).endswith("rate of 0.300 over its 2 seeds.")


def test_transport_cell_says_whether_the_overhead_target_is_met():
    def results(excess_share):
        overhead = {
            "step_ms": 150 * (1 + excess_share),
            "bound_ms": 150.0,
            "excess_share": excess_share,
            "trainer_gap_ms": 2.0,
            "publish_ms": 1.0,
            "bookkeeping_ms_off_critical_path": 1.5,
        }
        cpu = dict.fromkeys(["tuples_send", "packed_send", "tuples_receive", "packed_receive", "packed_forward"], 1.0)
        return {
            "batch": {"prompts": 2, "generations": 2, "sequences": 4, "completion_tokens": 10},
            "packed_bytes": 1e6,
            "repeats": 3,
            "handoff_ms": {"tuples": 1.0, "packed": 1.0},
            "cpu_ms": cpu,
            "default_batch": {"overhead": overhead},
        }

    assert "154.0 ms per step against a 150 ms bound, 2.7 % over it (target < 5 %: met);" in (
        pipeline_scale.transport_table(results(0.0267))
    )
    assert "6.0 % over it (target < 5 %: missed);" in pipeline_scale.transport_table(results(0.06))
