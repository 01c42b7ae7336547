"""benchmarks/sweep_equal_compute.py: the equal-compute reading of a batch sweep, by hand."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "sweep_equal_compute.py"


def load_script():
    spec = importlib.util.spec_from_file_location("sweep_equal_compute", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_curve(path: Path, compute, values) -> None:
    rows = ["step,flops,val_pass_rate"] + [f"{10 * i},{c},{v}" for i, (c, v) in enumerate(zip(compute, values))]
    path.write_text("\n".join(rows) + "\n")


def test_levels_are_the_tail_mean_and_the_interpolated_reference():
    script = load_script()
    # Reference y = c / 10 on [0, 10]; the small run's last two points at c = 3 and 5 with y = 0.6, 0.8.
    mine, theirs = script.equal_compute_levels([0, 1, 3, 5], [0.1, 0.2, 0.6, 0.8], [0, 10], [0.0, 1.0], last=2)
    assert mine == pytest.approx(0.7)
    assert theirs == pytest.approx((0.3 + 0.5) / 2)


def test_reference_that_stops_early_is_refused():
    script = load_script()
    with pytest.raises(ValueError, match="reference stops"):
        script.equal_compute_levels([0, 20], [0.1, 0.2], [0, 10], [0.0, 1.0], last=1)


def test_paired_gain_over_seeds_and_its_t_interval(tmp_path):
    script = load_script()
    compute = np.linspace(0, 4, 5)
    for seed, shift in enumerate((0.05, 0.10, 0.15)):
        write_curve(tmp_path / f"study__scalerl__seed-{seed}.csv", np.linspace(0, 16, 5), np.linspace(0.2, 0.6, 5))
        # The reference at c in [0, 4] is 0.2 + 0.025 c; the small run sits `shift` above it.
        write_curve(tmp_path / f"sweep__batch_prompts-8__seed-{seed}.csv", compute, 0.2 + 0.025 * compute + shift)
    rows = script.setting_rows(tmp_path, "study__scalerl", last=2, level=0.9)
    assert [row["setting"] for row in rows] == ["batch_prompts-8"]
    gains = [s["gain"] for s in rows[0]["seeds"]]
    assert gains == pytest.approx([0.05, 0.10, 0.15])
    half = 2.919986 * 0.05 / np.sqrt(3)  # t_0.95(2) * sd / sqrt(n)
    assert rows[0]["gain"]["lo"] == pytest.approx(0.10 - half, rel=1e-5)
    assert rows[0]["ahead"] == 3


def test_settings_ordered_by_value(tmp_path):
    script = load_script()
    for setting in ("batch_prompts-16", "batch_prompts-8"):
        write_curve(tmp_path / f"sweep__{setting}__seed-0.csv", [0, 1], [0.1, 0.2])
    assert list(script.sweep_files(tmp_path)) == ["batch_prompts-8", "batch_prompts-16"]
