"""`scalerl ablate --from-logs`: the study's paired verdict on logs listed in a manifest, on
synthetic seeds drawn around known curves (seed s of every variant shares seed s's luck, as paired
runs do), and one `error:` line for each bad manifest."""

import json
import zlib

import numpy as np
import pytest
from typer.testing import CliRunner

from scalerl.cli.app import app
from scalerl.forecast.curves import sigmoid_reward
from scalerl.study.from_logs import build_from_logs_report, compute_axis
from scalerl.study.log_manifest import read_manifest, wandb_rows
from scalerl.study.paired import CEILING, EFFICIENCY, NO_EFFECT, UNDECIDED
from scalerl.study.run_curves import LogSource, read_source

runner = CliRunner()
COMPUTE = np.concatenate([[0.0], np.geomspace(1e3, 3e5, 24)])
BASE = {"a": 0.6, "b": 1.5, "c_mid": 1e4, "r0": 0.1}
SEED_LUCK_A = {"1": -0.03, "2": 0.0, "3": 0.04}  # seed s's ceiling luck, shared by every variant's seed s


def seed_rewards(variant: str, seed: str, noise: float, **changes) -> np.ndarray:
    """Seed s's curve: the variant's A plus seed s's luck, seed s's evaluation noise (shared by
    every variant) and a little noise of the variant's own."""
    params = {**BASE, **changes}
    rewards = sigmoid_reward(COMPUTE, params["a"] + SEED_LUCK_A[seed], params["b"], params["c_mid"], params["r0"])
    shared = np.random.default_rng([int(seed)]).normal(0.0, noise, COMPUTE.size)
    own = np.random.default_rng([zlib.crc32(variant.encode()), int(seed)]).normal(0.0, noise / 3, COMPUTE.size)
    rewards = rewards + shared + own
    rewards[0] = params["r0"]
    return rewards


def write_log(path, rewards, x_column="compute"):
    lines = [f"step,{x_column},reward"] + [
        f"{step},{c:.6g},{r:.6f}" for step, (c, r) in enumerate(zip(COMPUTE, rewards))
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_study(root, specs, seeds=("1", "2", "3"), noise=0.004, x_columns=None):
    """One CSV per (variant, seed) and manifest.csv listing them (paths relative to the manifest)."""
    root.mkdir(parents=True, exist_ok=True)
    rows = ["path,variant,seed"]
    for variant, changes in specs.items():
        for seed in seeds:
            name = f"{variant}_s{seed}.csv"
            x_column = (x_columns or {}).get(variant, "compute")
            write_log(root / name, seed_rewards(variant, seed, noise, **changes), x_column)
            rows.append(f"{name},{variant},{seed}")
    (root / "manifest.csv").write_text("\n".join(rows) + "\n")
    return root / "manifest.csv"


def verdict_of(report, variant):
    return next(item.verdict for item in report.variants if item.run.slug == variant)


@pytest.fixture(scope="module")
def known_report(tmp_path_factory):
    specs = {"base": {}, "b-only": {"b": 3.0}, "a-up": {"a": 0.65}, "a-close": {"a": 0.61}}
    manifest = write_study(tmp_path_factory.mktemp("known"), specs, noise=0.002)
    return build_from_logs_report(read_manifest(manifest), "base", margin=0.02)


@pytest.mark.slow
def test_equal_a_different_b_is_efficiency_only(known_report):
    verdict = verdict_of(known_report, "b-only")
    assert (verdict.verdict, verdict.direction) == (EFFICIENCY, "up")
    assert verdict.delta_a.source == "paired t" and verdict.delta_a.n == 3
    assert -0.02 <= verdict.delta_a.lo and verdict.delta_a.hi <= 0.02


@pytest.mark.slow
def test_a_apart_by_0_05_moves_the_ceiling(known_report):
    verdict = verdict_of(known_report, "a-up")
    assert (verdict.verdict, verdict.direction) == (CEILING, "up")
    assert verdict.delta_a.mean == pytest.approx(0.05, abs=0.01) and verdict.delta_a.lo > 0.02
    assert (verdict.agreement.agreeing, verdict.agreement.pairs) == (3, 3)


@pytest.mark.slow
def test_a_apart_by_0_01_with_tight_intervals_is_no_measurable_effect(known_report):
    verdict = verdict_of(known_report, "a-close")
    assert verdict.verdict == NO_EFFECT, verdict.reason
    assert verdict.delta_a.mean == pytest.approx(0.01, abs=0.005)
    assert -0.02 <= verdict.delta_a.lo and verdict.delta_a.hi <= 0.02
    # the shared-A refit shifts B by a bias below the refits' own B noise: not an efficiency effect
    assert "within the refits' own B noise" in verdict.reason
    assert (verdict.agreement.agreeing, verdict.agreement.pairs) == (3, 3)


def test_a_mean_db_within_the_refit_noise_is_no_effect_even_when_its_interval_excludes_0():
    from scalerl.study.paired import PairedInterval, efficiency_call

    tight = PairedInterval(0.07, 0.06, 0.08, 0.004, 3, "paired t")
    assert efficiency_call(tight) == "up"
    assert efficiency_call(tight, noise=0.085) == "none"
    assert efficiency_call(PairedInterval(1.5, 1.4, 1.6, 0.05, 3, "paired t"), noise=0.1) == "up"


def test_welch_interval_matches_the_formula():
    from scipy import stats

    from scalerl.study.paired import welch_interval

    v, b = np.array([0.70, 0.72, 0.75]), np.array([0.60, 0.61, 0.65, 0.62])
    se2 = v.var(ddof=1) / 3 + b.var(ddof=1) / 4
    dof = se2**2 / ((v.var(ddof=1) / 3) ** 2 / 2 + (b.var(ddof=1) / 4) ** 2 / 3)
    half = stats.t.ppf(0.95, dof) * np.sqrt(se2)
    interval = welch_interval(v, b, 0.9)
    assert interval.mean == pytest.approx(v.mean() - b.mean())
    assert (interval.lo, interval.hi) == pytest.approx((interval.mean - half, interval.mean + half))
    assert interval.source == "Welch" and np.isnan(welch_interval([0.7], b).lo)


@pytest.mark.slow
def test_seed_labels_pair_the_seeds_whatever_the_manifest_order(tmp_path):
    manifest = write_study(tmp_path, {"base": {}, "a-up": {"a": 0.65}}, noise=0.002)
    lines = manifest.read_text().splitlines()
    manifest.write_text("\n".join([lines[0], *reversed(lines[1:])]) + "\n")  # a-up's seeds first, 3, 2, 1
    verdict = verdict_of(build_from_logs_report(read_manifest(manifest), "base"), "a-up")
    assert verdict.delta_a.sd < 0.01  # paired by label: the seed luck (0.07 apart) cancels


@pytest.mark.slow
def test_still_rising_runs_are_undecided(tmp_path):
    rising = {"c_mid": 3e5}  # the last evaluation is the half-way point: still rising
    manifest = write_study(tmp_path, {"base": rising, "faster": {**rising, "b": 2.0}})
    verdict = verdict_of(build_from_logs_report(read_manifest(manifest), "base"), "faster")
    assert verdict.verdict == UNDECIDED and "bent over" in verdict.reason


@pytest.mark.slow
def test_unpaired_seeds_use_welch_and_say_so(tmp_path):
    root = tmp_path
    manifest = write_study(root, {"base": {}}, seeds=("1", "2", "3"), noise=0.002)
    extra = []
    for seed in ("1", "2", "3"):  # the variant's seeds are other runs: labels 7, 8, 9
        write_log(root / f"a-up_other{seed}.csv", seed_rewards("a-up", seed, 0.002, a=0.75))
        extra.append(f"a-up_other{seed}.csv,a-up,{int(seed) + 6}")
    manifest.write_text(manifest.read_text() + "\n".join(extra) + "\n")
    verdict = verdict_of(build_from_logs_report(read_manifest(manifest), "base"), "a-up")
    assert verdict.delta_a.source == "Welch" and verdict.reason.startswith("unpaired")
    assert verdict.pairs == () and (verdict.verdict, verdict.direction) == (CEILING, "up")
    assert verdict.delta_a.mean == pytest.approx(0.15, abs=0.02)


@pytest.mark.slow
def test_cli_prints_the_table_and_writes_the_report_files(tmp_path):
    manifest = write_study(tmp_path / "logs", {"base": {}, "a-up": {"a": 0.65}}, noise=0.002)
    out = tmp_path / "out"
    result = runner.invoke(app, ["ablate", "--from-logs", str(manifest), "--base", "base", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "moves the ceiling (up)" in result.output and "paired by seed label" in result.output
    payload = json.loads((out / "ablation.json").read_text())
    assert payload["kind"] == "from-logs"
    assert [seed["label"] for seed in payload["variants"][1]["seeds"]] == ["1", "2", "3"]
    assert (out / "ablation.md").is_file()


def test_yaml_manifest_with_selectors(tmp_path):
    (tmp_path / "runs.yaml").write_text(
        "runs:\n  - {path: a.csv, variant: base, seed: 1, run: r1, segment: 2}\n"
        "  - {path: b.csv, variant: base, seed: 2}\n"
    )
    rows = read_manifest(tmp_path / "runs.yaml")
    assert (rows[0].source.run, rows[0].source.segment, rows[0].seed) == ("r1", 2, "1")
    assert rows[1].source.path == tmp_path / "b.csv"


@pytest.mark.slow
def test_a_wandb_export_is_split_into_variants_and_seeds_by_the_pattern(tmp_path):
    runs = {
        f"{variant}-seed{seed}": seed_rewards(variant, seed, 0.002, **changes)
        for variant, changes in (("base", {}), ("bigA", {"a": 0.65}))
        for seed in ("1", "2", "3")
    }
    header = ["Step"] + [f"{name} - eval/reward" for name in runs]
    lines = [",".join(header)] + [
        ",".join([f"{c:.6g}", *(f"{r[i]:.6f}" for r in runs.values())]) for i, c in enumerate(COMPUTE)
    ]
    export = tmp_path / "export.csv"
    export.write_text("\n".join(lines) + "\n")
    rows = wandb_rows(export, r"(?P<variant>\w+)-seed(?P<seed>\d+)")
    assert sorted((row.variant, row.seed) for row in rows)[:2] == [("base", "1"), ("base", "2")]
    verdict = verdict_of(build_from_logs_report(rows, "base", x="Step"), "bigA")
    assert (verdict.verdict, verdict.direction) == (CEILING, "up")


def test_compute_axis_of_a_column_name():
    assert [compute_axis(name) for name in ("gpu_hours", "flops", "num_tokens", "global_step", "compute")] == [
        "GPU-hours",
        "FLOPs",
        "tokens",
        "steps",
        "compute",
    ]


def _error_line(result):
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    return lines[0]


def _ablate(manifest, tmp_path, *extra):
    return runner.invoke(
        app, ["ablate", "--from-logs", str(manifest), "--base", "base", "--out", str(tmp_path / "out"), *extra]
    )


def test_a_missing_file_is_one_error_line(tmp_path):
    manifest = write_study(tmp_path, {"base": {}, "v": {}}, seeds=("1", "2"))
    (tmp_path / "v_s2.csv").unlink()
    assert "v_s2.csv does not exist" in _error_line(_ablate(manifest, tmp_path))


def test_a_duplicated_variant_and_seed_is_one_error_line(tmp_path):
    manifest = write_study(tmp_path, {"base": {}, "v": {}}, seeds=("1", "2"))
    manifest.write_text(manifest.read_text() + "v_s1.csv,v,2\n")
    assert "variant 'v' seed '2' is given twice" in _error_line(_ablate(manifest, tmp_path))


def test_a_variant_with_one_seed_is_one_error_line(tmp_path):
    manifest = write_study(tmp_path, {"base": {}}, seeds=("1", "2"))
    write_log(tmp_path / "v.csv", seed_rewards("v", "1", 0.004))
    manifest.write_text(manifest.read_text() + "v.csv,v,1\n")
    assert "variant 'v' has one seed" in _error_line(_ablate(manifest, tmp_path))


def test_mixed_compute_axes_are_one_error_line_unless_x_names_a_common_column(tmp_path):
    manifest = write_study(tmp_path, {"base": {}, "v": {}}, seeds=("1", "2"), x_columns={"v": "num_tokens"})
    line = _error_line(_ablate(manifest, tmp_path))
    assert "compute axes differ between runs" in line and "tokens" in line and "--x" in line


@pytest.mark.slow
def test_x_naming_a_common_column_accepts_mixed_axes(tmp_path):
    manifest = write_study(tmp_path, {"base": {}, "v": {}}, seeds=("1", "2"), x_columns={"v": "num_tokens"})
    result = _ablate(manifest, tmp_path, "--x", "step")  # steps: a column every log has
    assert result.exit_code == 0, result.output


def test_declared_units_that_differ_are_refused_even_with_x(tmp_path):
    manifest = write_study(tmp_path, {"base": {}, "v": {}}, seeds=("1", "2"))
    lines = manifest.read_text().splitlines()
    units = ["unit"] + ["GPU-hours" if ",base," in line else "samples" for line in lines[1:]]
    manifest.write_text("\n".join(f"{line},{unit}" for line, unit in zip(lines, units)) + "\n")
    assert "compute units differ between runs" in _error_line(_ablate(manifest, tmp_path, "--x", "compute"))


def test_from_logs_needs_a_base(tmp_path):
    manifest = write_study(tmp_path, {"base": {}, "v": {}}, seeds=("1", "2"))
    result = runner.invoke(app, ["ablate", "--from-logs", str(manifest), "--out", str(tmp_path / "out")])
    assert "--base" in _error_line(result)


def test_logs_in_percent_get_the_pass_rates_verdicts_with_the_margin_in_points(tmp_path):
    """The same paired study logged as percentages: the range is inferred open (u = the largest
    reward) or given as 0-100, the paper's margin is 0.02 of it, and each knob keeps its verdict."""
    specs = {"base": {}, "a-up": {"a": 0.65}, "a-close": {"a": 0.61}}
    manifest = write_study(tmp_path, specs, noise=0.002)
    for row in manifest.read_text().splitlines()[1:]:
        path = tmp_path / row.split(",")[0]
        lines = path.read_text().splitlines()
        path.write_text(
            "\n".join(
                [lines[0]] + [f"{s},{c},{100 * float(r):.4f}" for s, c, r in (line.split(",") for line in lines[1:])]
            )
            + "\n"
        )
    given = build_from_logs_report(read_manifest(manifest), "base", reward_range=(0.0, 100.0))
    assert given.margin == pytest.approx(2.0) and given.margin_source == "paper default"
    assert (verdict_of(given, "a-up").verdict, verdict_of(given, "a-up").direction) == (CEILING, "up")
    assert verdict_of(given, "a-up").delta_a.mean == pytest.approx(5.0, abs=1.0)
    assert verdict_of(given, "a-close").verdict == NO_EFFECT
    inferred = build_from_logs_report(read_manifest(manifest), "base")
    assert all(
        seed.fit is not None and seed.fit.reward_range is None for item in inferred.variants for seed in item.seeds
    )
    assert (verdict_of(inferred, "a-up").verdict, verdict_of(inferred, "a-up").direction) == (CEILING, "up")


def test_a_log_source_with_a_fit_window_reads_the_first_part(tmp_path):
    path = write_log(tmp_path / "run.csv", seed_rewards("base", "1", 0.002))
    whole = read_source(LogSource(path), None, None)
    half = read_source(LogSource(path, fit_fraction=0.5), None, None)
    early = read_source(LogSource(path, fit_until=1e4), None, None)
    assert len(whole) == COMPUTE.size
    np.testing.assert_array_equal(half.compute, whole.compute[whole.compute <= 0.5 * whole.compute.max()])
    np.testing.assert_array_equal(early.compute, whole.compute[whole.compute <= 1e4])
    np.testing.assert_array_equal(half.reward, whole.reward[: len(half)])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fit-fraction", "0"], "--fit-fraction must be in (0, 1]"),
        (["--fit-until", "1e4", "--fit-fraction", "0.5"], "not both"),
    ],
)
def test_from_logs_refuses_a_bad_fit_window_in_one_line(tmp_path, args, message):
    manifest = write_study(tmp_path / "logs", {"base": {}, "a-up": {"a": 0.65}}, seeds=("1", "2"))
    result = runner.invoke(
        app, ["ablate", "--from-logs", str(manifest), "--base", "base", "--out", str(tmp_path / "out"), *args]
    )
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "out").exists()


def test_a_fit_window_without_from_logs_is_refused(tmp_path):
    result = runner.invoke(app, ["ablate", "--out", str(tmp_path / "out"), "--report-only", "--fit-fraction", "0.5"])
    assert result.exit_code == 2 and "go with --from-logs" in result.output, result.output


@pytest.mark.slow
def test_from_logs_judges_every_seed_on_the_first_part(tmp_path):
    manifest = write_study(tmp_path / "logs", {"base": {}, "a-up": {"a": 0.65}}, noise=0.002)
    report = build_from_logs_report(read_manifest(manifest), "base", fit_fraction=0.5)
    fitted = [seed.fit.n_points for variant in report.variants for seed in variant.seeds if seed.fit is not None]
    assert fitted and set(fitted) == {int(np.sum(COMPUTE <= 0.5 * COMPUTE.max())) - 1}  # R0's point is the fit's R0
