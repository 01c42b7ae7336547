"""The positive-control benchmark's arithmetic (benchmarks/positive_controls.py), by hand."""

import json

import pytest

from benchmarks.positive_controls import (
    ceiling_check,
    constructed_delta_a,
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
