"""The command line starts light: `scalerl --help` imports neither numpy nor rich, `scalerl fit` on a
short CSV imports neither pandas, matplotlib nor scipy.stats, and `--help` shows every option name whole on a
narrow terminal; the curve-fitting commands run numpy on one BLAS thread unless the user set a count.
(How fast it starts is measured by benchmarks/cli_latency.py, never asserted.)"""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from scalerl.cli.app import app, one_blas_thread_for

HEAVY = ("numpy", "pandas", "scipy", "scipy.stats", "matplotlib", "emcee", "rich", "pydantic", "torch")


def imported_by(script: str, *argv: str) -> set[str]:
    """The HEAVY top-level modules a fresh interpreter holds after running `script` with `argv`."""
    probe = f"{script}\nimport sys\nprint('imported:', *(name for name in {HEAVY!r} if name in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.splitlines()[-1].split()[1:])


def test_importing_the_command_line_loads_no_heavy_module():
    assert imported_by("import scalerl.cli.app") == set()


def test_top_level_help_loads_no_heavy_module():
    script = (
        "import sys\nfrom scalerl.cli.app import main\nsys.argv = ['scalerl', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    assert imported_by(script) == set()


def test_fit_on_a_short_csv_needs_neither_pandas_nor_matplotlib(tmp_path):
    log = tmp_path / "run.csv"
    log.write_text(
        "gpu_hours,val_pass_rate\n"
        + "".join(f"{c},{0.1 + 0.5 / (1 + (40 / c) ** 1.5) if c else 0.1:.4f}\n" for c in range(0, 200, 10))
    )
    script = (
        "import sys\nfrom scalerl.cli.app import main\n"
        f"sys.argv = ['scalerl', 'fit', {str(log)!r}, '--json', '--n-draws', '50']\n"
        "try:\n    main()\nexcept SystemExit as stop:\n    assert stop.code in (0, None), stop.code"
    )
    modules = imported_by(script)
    assert "pandas" not in modules and "matplotlib" not in modules and "torch" not in modules
    assert "scipy.stats" not in modules  # emcee's optional KDE move would pull it in
    assert {"numpy", "scipy", "emcee"} <= modules  # the fit itself ran


def test_scipy_stats_still_imports_after_the_sampler_did():
    script = (
        "import scalerl.forecast.posterior\nimport scipy.stats\n"
        "assert abs(scipy.stats.norm.ppf(0.975) - 1.959964) < 1e-6\n"
        "from scipy.stats import gaussian_kde"
    )
    assert {"emcee", "scipy.stats"} <= imported_by(script)


def command_names() -> list[str]:
    group = get_command(app)
    return sorted(
        name
        for name, command in group.commands.items()
        if command.add_help_option and any(param.opts[0].startswith("-") for param in command.params)
    )


@pytest.mark.parametrize("command", command_names())
def test_help_shows_every_option_name_whole_on_a_narrow_terminal(command):
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "60"})
    assert result.exit_code == 0, result.output
    words = set(result.stdout.replace(",", " ").replace("/", " ").split())
    options = get_command(app).commands[command].params
    names = [name for param in options for name in (*param.opts, *param.secondary_opts) if name.startswith("-")]
    assert names and [name for name in names if name not in words] == []


@pytest.mark.parametrize("command", ["fit", "compare", "plot", "report"])
def test_a_curve_fitting_command_defaults_to_one_blas_thread(command):
    environ = {}
    one_blas_thread_for([command, "run.csv"], environ)
    assert environ == {"OPENBLAS_NUM_THREADS": "1"}


def test_a_blas_thread_count_the_user_set_is_kept():
    environ = {"OPENBLAS_NUM_THREADS": "8"}
    one_blas_thread_for(["fit", "run.csv"], environ)
    assert environ == {"OPENBLAS_NUM_THREADS": "8"}


@pytest.mark.parametrize("arguments", [["train", "--preset", "scalerl"], ["ablate"], ["--help"], []])
def test_training_commands_keep_their_libraries_thread_defaults(arguments):
    environ = {}
    one_blas_thread_for(arguments, environ)
    assert environ == {}


def test_the_fit_command_runs_numpy_on_one_blas_thread(tmp_path):
    log = tmp_path / "run.csv"
    log.write_text("step,reward\n" + "".join(f"{s},{0.1 + 0.5 * s / (s + 40):.4f}\n" for s in range(0, 200, 10)))
    script = (
        "import os, sys\nos.environ.pop('OPENBLAS_NUM_THREADS', None)\nfrom scalerl.cli.app import main\n"
        f"sys.argv = ['scalerl', 'fit', {str(log)!r}, '--n-draws', '50']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('threads:', os.environ.get('OPENBLAS_NUM_THREADS'), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert "threads: 1" in done.stderr, done.stderr
