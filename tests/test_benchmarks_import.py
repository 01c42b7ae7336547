"""Every benchmarks module imports on its own, as `python -m benchmarks.<name>` does: no import
cycle, no broken import, no script that needs its folder on sys.path. Imports only, runs nothing."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MODULES = sorted(
    ".".join(path.relative_to(REPO / "benchmarks").with_suffix("").parts)
    for path in (REPO / "benchmarks").rglob("*.py")
    if path.stem not in ("__init__", "__main__") and "data" not in path.parts
)


def test_benchmarks_is_flat_modules_and_a_render_package():
    assert (REPO / "benchmarks" / "__init__.py").is_file()
    assert (REPO / "benchmarks" / "render" / "__main__.py").is_file()
    assert "common" in MODULES and "render.pages" in MODULES and "render.tables" in MODULES
    assert not [name for name in MODULES if name.startswith("render_")], "a renderer outside benchmarks/render/"


@pytest.mark.parametrize("module", MODULES)
def test_module_imports_in_a_fresh_interpreter(module):
    # A fresh interpreter per module: a cycle fails only when one of its modules is imported first.
    done = subprocess.run(
        [sys.executable, "-c", f"import benchmarks.{module}"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
