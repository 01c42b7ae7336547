"""The positive-control benchmark (benchmarks/positive_controls.py): its arithmetic by hand, and its
curves copied for benchmarks.from_logs_verdicts to judge again."""

import json

import pytest

from benchmarks.positive_controls import (
    ceiling_check,
    constructed_delta_a,
    export_curves,
    read_rows,
    settled_by_difficulty,
    settled_level,
    task_bound,
    validation_hard_share,
)


def test_the_constructed_ceiling_difference_is_nine_tenths_of_the_hard_share_moved():
    assert task_bound(0.25) == pytest.approx(0.75 + 0.025)
    assert validation_hard_share(0.25, 10) == 0.2  # round(2.5) = 2 hard prompts of 10
    assert constructed_delta_a(0.25, 0.5, 512) == pytest.approx(-0.225)


def _pair(seed, verdict, direction, delta_a):
    return {"seed": seed, "verdict": verdict, "direction": direction, "delta_A": delta_a}


def test_ceiling_check_counts_pairs_with_the_right_verdict_sign_and_size():
    effect = {
        "effect": "moves the ceiling",
        "direction": "down",
        "pairs": [
            _pair(0, "moves the ceiling", "down", -0.23),
            _pair(1, "moves the ceiling", "down", -0.26),
            _pair(2, "moves the ceiling", "up", -0.22),
            _pair(3, "no measurable effect", None, -0.22),
            _pair(4, "moves the ceiling", "down", -0.20),
        ],
    }
    check = ceiling_check(effect, -0.225)
    assert check["pairs_within"] == 2 and check["pairs_needed"] == 4 and not check["passed"]
    effect["pairs"] = [_pair(k, "moves the ceiling", "down", -0.225 + 0.01 * (k - 2)) for k in range(5)]
    assert ceiling_check(effect, -0.225)["passed"]


def _write_run(path, rows):
    path.mkdir(parents=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_settled_levels_are_the_last_three_evaluations_per_difficulty_averaged_over_seeds(tmp_path):
    def rows(rates):
        out = []
        for step, (total, easy, hard) in enumerate(rates):
            out.append({"step": 2 * step, "loss": 0.1})  # a training row: no validation columns
            out.append(
                {"step": 2 * step + 1, "val_pass_rate": total, "val_pass_rate_easy": easy, "val_pass_rate_hard": hard}
            )
        return out

    _write_run(
        tmp_path / "hard_fraction-0.5" / "seed-0",
        rows([(0.3, 0.5, 0.1), (0.5, 0.9, 0.1), (0.55, 1.0, 0.1), (0.6, 1.0, 0.2)]),
    )
    _write_run(tmp_path / "hard_fraction-0.5" / "seed-1", rows([(0.5, 0.9, 0.1)] * 3))
    _write_run(tmp_path / "hard_fraction-0.25" / "seed-0", [{"step": 0, "val_pass_rate": 0.7}])  # an older run
    assert settled_level(
        read_rows(tmp_path / "hard_fraction-0.5" / "seed-0" / "metrics.jsonl"), "val_pass_rate"
    ) == pytest.approx((0.5 + 0.55 + 0.6) / 3)
    settled = settled_by_difficulty(tmp_path)
    assert settled["hard_fraction-0.5"] == pytest.approx(
        {
            "seeds": 2,
            "val_pass_rate": ((0.5 + 0.55 + 0.6) / 3 + 0.5) / 2,
            "val_pass_rate_easy": ((0.9 + 1.0 + 1.0) / 3 + 0.9) / 2,
            "val_pass_rate_hard": ((0.1 + 0.1 + 0.2) / 3 + 0.1) / 2,
        }
    )
    assert settled["hard_fraction-0.25"] == {
        "seeds": 1,
        "val_pass_rate": 0.7,
        "val_pass_rate_easy": None,
        "val_pass_rate_hard": None,
    }


def _run(folder, values):
    """A metrics.jsonl of training rows and evaluation rows (every other row) under `folder`."""
    folder.mkdir(parents=True)
    rows = []
    for step, value in enumerate(values):
        rows.append({"step": step, "flops": 1e9 * step, "loss": 0.1})
        rows.append({"step": step, "flops": 1e9 * step, "val_pass_rate": value})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(folder / "metrics.jsonl")


def test_every_run_is_copied_once_and_the_ceiling_base_is_the_efficiency_base(tmp_path):
    base = [_run(tmp_path / f"loo/scalerl/seed-{i}", [0.1 * i, 0.5]) for i in range(2)]
    slow = [_run(tmp_path / f"loo/lr/seed-{i}", [0.2, 0.3 + i]) for i in range(2)]
    hard = [_run(tmp_path / f"sweep/hard/seed-{i}", [0.1, 0.4]) for i in range(2)]
    result = {
        "efficiency_study": {
            "variants": [
                {"slug": "scalerl", "seeds": [{"metrics": path} for path in base]},
                {"slug": "lr-5e-05", "seeds": [{"metrics": path} for path in slow]},
            ]
        },
        "ceiling_study": {
            "variants": [
                {"slug": "hard_fraction-0.25", "seeds": [{"metrics": path} for path in base]},
                {"slug": "hard_fraction-0.5", "seeds": [{"metrics": path} for path in hard]},
            ]
        },
    }
    written = export_curves(result, tmp_path / "curves")
    assert [path.name for path in written] == [
        "ceiling__hard_fraction-0.5__seed-0.csv",
        "ceiling__hard_fraction-0.5__seed-1.csv",
        "efficiency__lr-5e-05__seed-0.csv",
        "efficiency__lr-5e-05__seed-1.csv",
        "efficiency__scalerl__seed-0.csv",
        "efficiency__scalerl__seed-1.csv",
    ]
    lines = (tmp_path / "curves" / "efficiency__lr-5e-05__seed-1.csv").read_text().splitlines()
    assert lines == ["step,flops,val_pass_rate", "0,0.0,0.2", "1,1000000000.0,1.3"]


def test_the_copied_curves_become_two_groups_judged_against_the_same_base_runs(tmp_path, monkeypatch):
    import benchmarks.from_logs_verdicts as verdicts

    folder = tmp_path / verdicts.CONTROLS
    folder.mkdir()
    for name in ("efficiency__scalerl", "efficiency__lr-5e-05", "ceiling__hard_fraction-0.5"):
        for seed in range(2):
            (folder / f"{name}__seed-{seed}.csv").write_text("step,flops,val_pass_rate\n0,0.0,0.1\n")
    monkeypatch.setattr(verdicts, "DATA_DIR", tmp_path)
    groups = verdicts.positive_control_groups()
    efficiency_base, efficiency = groups["positive controls, the efficiency mover (optim.lr), its curves judged again"]
    ceiling_base, ceiling = groups["positive controls, the ceiling mover (task.hard_fraction), its curves judged again"]
    assert efficiency_base == "scalerl" and ceiling_base == "hard_fraction-0.25"
    assert sorted(efficiency) == [
        (f"{verdicts.CONTROLS}/efficiency__lr-5e-05__seed-0", "lr-5e-05", "0"),
        (f"{verdicts.CONTROLS}/efficiency__lr-5e-05__seed-1", "lr-5e-05", "1"),
        (f"{verdicts.CONTROLS}/efficiency__scalerl__seed-0", "scalerl", "0"),
        (f"{verdicts.CONTROLS}/efficiency__scalerl__seed-1", "scalerl", "1"),
    ]
    assert sorted(ceiling) == [
        (f"{verdicts.CONTROLS}/ceiling__hard_fraction-0.5__seed-0", "hard_fraction-0.5", "0"),
        (f"{verdicts.CONTROLS}/ceiling__hard_fraction-0.5__seed-1", "hard_fraction-0.5", "1"),
        (f"{verdicts.CONTROLS}/efficiency__scalerl__seed-0", "hard_fraction-0.25", "0"),
        (f"{verdicts.CONTROLS}/efficiency__scalerl__seed-1", "hard_fraction-0.25", "1"),
    ]
    assert verdicts.curve_units()[f"{verdicts.CONTROLS}/efficiency__scalerl__seed-0"] == "flops"


def test_no_copied_curves_no_positive_control_groups(tmp_path, monkeypatch):
    import benchmarks.from_logs_verdicts as verdicts

    monkeypatch.setattr(verdicts, "DATA_DIR", tmp_path)
    assert verdicts.positive_control_groups() == {}
