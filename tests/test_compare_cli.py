"""`scalerl compare` for early decisions: the ceiling groups of three or more runs stated as the JSON
has them, run labels (--label, NAME=PATH), the fit window (--fit-fraction / --fit-until), a warning
when the runs' axes differ, long names shortened in text (full in JSON)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from cli_invocation import assert_one_line_error, invoke

from scalerl.report.console import decision_sentence, run_labels, shared_affixes, short_name

FAST = ("--n-draws", "40")


def write_run(path, a, b, *, c_mid=300.0, seed=0, x="gpu_hours", scale=1.0):
    """A ScaleRL sigmoid R = 0.1 + (A - 0.1) / (1 + (C_mid / C)^B) at 30 computes, noise sd 0.004
    (`scale`: compute and C_mid times this, the same run in another unit)."""
    compute, c_mid = scale * np.geomspace(10, 3000, 30), scale * c_mid
    rng = np.random.default_rng(seed)
    reward = 0.1 + (a - 0.1) / (1 + (c_mid / compute) ** b) + rng.normal(0, 0.004, compute.size)
    path.write_text(f"{x},val_pass_rate\n0,0.1\n" + "".join(f"{c:.4f},{r:.5f}\n" for c, r in zip(compute, reward)))
    return path


def payload(clusters, ceilings, decided_by="efficiency"):
    runs = {
        name: {"params": {"A": a, "B": 1.0, "C_mid": 1.0}, "fixed_ceiling": {"A": 0.835}}
        for name, a in ceilings.items()
    }
    ranking = [name for cluster in clusters for name in cluster]
    return {
        "winner": ranking[0],
        "decided_by": decided_by,
        "ceiling_undecided": False,
        "margin": 0.02,
        "level": 0.8,
        "clusters": clusters,
        "ranking": ranking,
        "runs": runs,
        "more_compute": None,
    }


def test_decision_names_both_ceiling_groups_of_four_runs():
    sentence = decision_sentence(payload([["a", "b"], ["c", "d"]], {"a": 0.84, "b": 0.83, "c": 0.80, "d": 0.79}))
    assert sentence.startswith("ceiling groups: {a, b} (A 0.84-0.83) > {c, d} (A 0.8-0.79); ")
    assert "the top group's ceilings within 0.02" in sentence and "(ceilings within" not in sentence


def test_two_runs_state_no_groups_and_one_group_is_all_within_the_margin():
    assert "ceiling groups" not in decision_sentence(payload([["a", "b"]], {"a": 0.84, "b": 0.83}))
    one_group = decision_sentence(payload([["a", "b", "c"]], {"a": 0.84, "b": 0.83, "c": 0.83}))
    assert "{a, b, c} (A 0.84-0.83)" in one_group and "(ceilings within 0.02" in one_group


def test_short_name_keeps_start_and_end():
    assert short_name("run_a") == "run_a"
    cut = short_name("grpo_qwen3_1.7b_gsm8k_lr1e-6_kl0.001_seed_3")
    assert len(cut) == 32 and cut.startswith("grpo_qwen3_1.7b_gsm8") and cut.endswith("seed_3") and "…" in cut


def test_run_labels_drop_what_every_name_shares_at_a_separator():
    names = ["verl-asyncreward__q7b_fsdp_base", "verl-asyncreward__q3b_fsdp_base", "verl-asyncreward__gsm8k_async"]
    assert shared_affixes(names) == ("verl-asyncreward__", "")
    assert list(run_labels(names).values()) == ["q7b_fsdp_base", "q3b_fsdp_base", "gsm8k_async"]
    # A shared suffix goes too; a shared start that ends inside a word is cut back to the separator.
    assert run_labels(["grpo_lr1e-6_seed1", "grpo_lr3e-6_seed1"]) == {
        "grpo_lr1e-6_seed1": "lr1e-6",
        "grpo_lr3e-6_seed1": "lr3e-6",
    }
    assert shared_affixes(["run_alpha", "run_alps"]) == ("run_", "")
    # One run, equal names, or a label left empty: nothing is dropped.
    assert run_labels(["only_run"]) == {"only_run": "only_run"}
    assert shared_affixes(["a_b", "a_b_c"]) == ("a_", "")
    assert run_labels(["x_1", "x_1"]) == {"x_1": "x_1"}
    # Labels still too long are cut as short_name cuts them.
    long = ["exp__" + "a" * 40 + "_1", "exp__" + "b" * 40 + "_1"]
    assert all(len(label) == 32 and "…" in label for label in run_labels(long).values())


def test_compare_shows_names_without_their_shared_prefix(tmp_path):
    first = write_run(tmp_path / "sweep__lr_1e-6.csv", 0.6, 1.5)
    second = write_run(tmp_path / "sweep__lr_3e-6.csv", 0.4, 1.5, seed=1)
    text = invoke("compare", first, second, *FAST).stdout
    assert "names without the shared 'sweep__lr_'" in text
    assert "ranking: 1e-6 > 3e-6" in text
    result = invoke("compare", first, second, "--json", *FAST)
    assert set(json.loads(result.stdout)["runs"]) == {"sweep__lr_1e-6", "sweep__lr_3e-6"}


def test_compare_of_four_runs_names_both_ceiling_groups(tmp_path):
    paths = [
        write_run(tmp_path / f"{name}.csv", a, b, seed=seed)
        for seed, (name, a, b) in enumerate([("a", 0.84, 1.8), ("b", 0.83, 1.2), ("c", 0.80, 1.8), ("d", 0.79, 1.2)])
    ]
    result = invoke("compare", *paths, "--json", *FAST)
    assert result.exit_code == 0, result.output
    clusters = json.loads(result.stdout)["clusters"]
    assert sorted(map(sorted, clusters)) == [["a", "b"], ["c", "d"]]
    text = invoke("compare", *paths, *FAST).stdout
    assert re.search(r"ceiling groups: \{a, b\} \(A 0\.8\d*-0\.8\d*\) > \{c, d\} \(A 0\.[78]\d*-0\.7\d*\); ", text), (
        text
    )
    assert "(ceilings within" not in text


def test_labels_name_runs_and_long_ones_are_cut_in_text_only(tmp_path):
    first, second = write_run(tmp_path / "r1.csv", 0.6, 1.5), write_run(tmp_path / "r2.csv", 0.4, 1.5, seed=1)
    long_name = "grpo_qwen3_1.7b_gsm8k_lr1e-6_kl0.001_seed_3"
    result = invoke("compare", first, second, "--label", long_name, "--label", "base", "--json", *FAST)
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)["runs"]) == {long_name, "base"}
    text = invoke("compare", first, second, "--label", long_name, "--label", "base", *FAST).stdout
    assert short_name(long_name) in text and long_name not in text
    named = invoke("compare", f"new={first}", f"old={second}", "--json", *FAST)
    assert named.exit_code == 0, named.output
    assert json.loads(named.stdout)["ranking"] == ["new", "old"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--label", "one"], "--label given 1 time(s) for 2 runs"),
        (["--label", "same", "--label", "same"], "used twice"),
        (["--fit-fraction", "1.5"], "--fit-fraction must be in (0, 1]"),
        (["--fit-fraction", "0.5", "--fit-until", "100"], "not both"),
    ],
)
def test_bad_labels_and_windows_are_one_line_errors(tmp_path, args, message):
    first, second = write_run(tmp_path / "r1.csv", 0.6, 1.5), write_run(tmp_path / "r2.csv", 0.4, 1.5, seed=1)
    assert_one_line_error(invoke("compare", first, second, *args, *FAST), message)


@pytest.mark.parametrize(("option", "value", "kept"), [("--fit-fraction", "0.5", 27), ("--fit-until", "300", 19)])
def test_fit_window_fits_each_run_on_its_first_part(tmp_path, option, value, kept):
    first, second = write_run(tmp_path / "r1.csv", 0.6, 1.5), write_run(tmp_path / "r2.csv", 0.4, 1.5, seed=1)
    result = invoke("compare", first, second, option, value, "--json", *FAST)
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    compute = np.r_[0.0, np.geomspace(10, 3000, 30)]
    limit = 0.5 * 3000 if option == "--fit-fraction" else 300.0
    assert int(np.sum(compute <= limit)) == kept
    assert {run["n_points"] for run in answer["runs"].values()} == {kept - 1}  # R0's point is the fit's R0
    assert any(f"fitted on its first {kept} of 31 points" in warning for warning in answer["warnings"])


def test_differing_x_columns_are_warned(tmp_path):
    first = write_run(tmp_path / "r1.csv", 0.6, 1.5)
    second = write_run(tmp_path / "r2.csv", 0.4, 1.5, seed=1, x="tokens")
    result = invoke("compare", first, second, "--json", *FAST)
    assert result.exit_code == 0, result.output
    assert any("x columns differ (r1: gpu_hours, r2: tokens)" in w for w in json.loads(result.stdout)["warnings"])


def test_compute_ranges_decades_apart_are_warned_as_two_units(tmp_path):
    """Same column name, but one run logged GPU-hours (up to 3e3) and the other samples (from 1e6):
    their compute ranges lie 2.5 decades apart; two runs that overlap are not warned."""
    first = write_run(tmp_path / "r1.csv", 0.6, 1.5)
    second = write_run(tmp_path / "r2.csv", 0.4, 1.5, seed=1, scale=1e5)
    apart = json.loads(invoke("compare", first, second, "--json", *FAST).stdout)["warnings"]
    assert any(
        w.startswith("the runs' compute ranges lie 2.5 decades apart (r1: 10..3e+03, r2: 1e+06..3e+08)") for w in apart
    )
    near = write_run(tmp_path / "r3.csv", 0.4, 1.5, seed=1, scale=10.0)
    overlapping = json.loads(invoke("compare", first, near, "--json", *FAST).stdout)["warnings"]
    assert not any("compute ranges" in w for w in overlapping)
    # the figure of both says so too
    plotted = invoke("plot", first, second, "-o", tmp_path / "both.svg", *FAST)
    assert plotted.exit_code == 0 and "compute ranges lie 2.5 decades apart" in " ".join(plotted.stderr.split())


def test_report_fits_the_first_part_names_runs_and_overlays_them(tmp_path):
    long_name = "grpo_qwen3_1.7b_gsm8k_lr1e-6_kl0.001_seed_3"
    first, second = write_run(tmp_path / "r1.csv", 0.6, 1.5), write_run(tmp_path / "r2.csv", 0.4, 1.5, seed=1)
    page = tmp_path / "report.html"
    result = invoke("report", f"{long_name}={first}", second, "-o", page, "--fit-fraction", "0.5", *FAST)
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert 'alt="every run on one axes"' in html
    assert f'<span title="{long_name}">{short_name(long_name)}</span>' in html and ">r2<" in html
    assert "fitted on its first 27 of 31 points" in html
    assert html.count("<td>26</td>") == 2  # points fitted: the window's 27 but R0's own point
    assert_one_line_error(invoke("report", first, second, "-o", page, "--label", "one", *FAST), "--label")


def test_plot_takes_labels_and_fit_until(tmp_path):
    first, second = write_run(tmp_path / "r1.csv", 0.6, 1.5), write_run(tmp_path / "r2.csv", 0.4, 1.5, seed=1)
    figure = tmp_path / "both.svg"
    result = invoke("plot", f"new={first}", f"old={second}", "-o", figure, "--fit-until", "300", *FAST)
    assert result.exit_code == 0, result.output
    text = figure.read_text()
    assert "new: A=" in text and "old: A=" in text


def test_long_names_fold_in_the_table_and_no_number_is_cut(tmp_path):
    """Long names are shortened and fold onto further lines of their cell where the piped table is too
    narrow; the rank has its own column and every estimate and interval stays whole (no ellipsis in a
    number)."""
    runs = [write_run(tmp_path / f"r{i}.csv", a, 1.5, seed=i) for i, a in enumerate((0.7, 0.6, 0.5))]
    labels = [f"{stem}_grpo_qwen3_1.7b_gsm8k_lr1e-6_kl0.001_clip0.2_seed{i}" for i, stem in enumerate(("a", "bb", "c"))]
    args = [arg for label in labels for arg in ("--label", label)]
    text = invoke("compare", *runs, *args, *FAST).stdout
    rows = [line.split("│")[1:-1] for line in text.splitlines() if line.startswith("│")]
    ranked = [row for row in rows if row[0].strip()]
    assert [row[0].strip() for row in ranked] == ["1", "2", "3"]
    assert all(re.fullmatch(r"[\d.]+ \[[\d.]+, [\d.]+\]", row[2].strip()) for row in ranked), text
    assert not any("…" in cell for row in rows for cell in row[2:]), text
