"""The textbook efficiency mover through `ablate --from-logs`: four seeds at A = 0.60, B = 1.8
against four at B = 1.1 (R0 = 0.1, run to 10 x C_mid, evaluation noise 0.006) read "moves
efficiency only" in at least 4 of 5 repetitions with fresh noise, through the one model."""

import numpy as np
import pytest

from scalerl.forecast.curves import sigmoid_reward
from scalerl.study.from_logs import build_from_logs_report
from scalerl.study.log_manifest import read_manifest
from scalerl.study.paired import EFFICIENCY

C_MID = 1e4
COMPUTE = np.concatenate([[0.0], np.geomspace(C_MID / 30.0, 10.0 * C_MID, 30)])


def write_mover_study(root, repetition: int):
    """manifest.csv and one CSV per seed: base B = 1.1, variant "steep" B = 1.8, A 0.6 for both."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1000 + repetition)
    rows = ["path,variant,seed"]
    for variant, b in (("base", 1.1), ("steep", 1.8)):
        for seed in range(1, 5):
            reward = sigmoid_reward(COMPUTE, 0.6, b, C_MID, 0.1) + rng.normal(0.0, 0.006, COMPUTE.size)
            reward[0] = 0.1
            name = f"{variant}_s{seed}.csv"
            lines = ["compute,reward"] + [f"{c:.6g},{r:.6f}" for c, r in zip(COMPUTE, reward)]
            (root / name).write_text("\n".join(lines) + "\n")
            rows.append(f"{name},{variant},{seed}")
    (root / "manifest.csv").write_text("\n".join(rows) + "\n")
    return root / "manifest.csv"


@pytest.mark.slow
def test_the_textbook_efficiency_mover_moves_efficiency_only_in_four_of_five_repetitions(tmp_path):
    calls = []
    for repetition in range(5):
        manifest = write_mover_study(tmp_path / f"repetition-{repetition}", repetition)
        report = build_from_logs_report(read_manifest(manifest), "base", margin=0.02)
        verdict = next(item.verdict for item in report.variants if item.run.slug == "steep")
        calls.append((verdict.verdict, verdict.direction))
    assert sum(call == (EFFICIENCY, "up") for call in calls) >= 4, calls
