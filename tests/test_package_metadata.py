"""The built package metadata: `scalerl[train]` bounds torch from below only, so installing the
package next to a newer torch resolves without downgrading it.

Resolving `pip install --dry-run` against a real newer torch needs the index, so the test builds
the wheel metadata offline (setuptools' PEP 517 hook, in a subprocess on a copy of pyproject.toml)
and reads its `Requires-Dist` lines with `packaging`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]


def _built_requirements(tmp_path: Path) -> list[Requirement]:
    """Requires-Dist of the metadata setuptools builds from this repository's pyproject.toml."""
    project = tmp_path / "project"
    (project / "src" / "scalerl").mkdir(parents=True)
    (project / "src" / "scalerl" / "__init__.py").write_text("")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, project / name)
    script = (
        "from setuptools import build_meta; import sys; print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))"
    )
    out = project / "metadata"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", script, str(out)], cwd=project, capture_output=True, text=True, timeout=120, check=True
    )
    dist_info = out / done.stdout.strip().splitlines()[-1]
    lines = (dist_info / "METADATA").read_text().splitlines()
    return [Requirement(line.split(":", 1)[1].strip()) for line in lines if line.startswith("Requires-Dist:")]


def test_train_extra_bounds_torch_from_below_only(tmp_path):
    torch_requirements = [r for r in _built_requirements(tmp_path) if r.name == "torch"]
    assert torch_requirements, "the train extra must require torch"
    for requirement in torch_requirements:
        assert requirement.marker is not None and requirement.marker.evaluate({"extra": "train"})
        for newer in ("2.13.0", "2.14.0", "2.15.1", "3.0.0"):
            assert requirement.specifier.contains(newer), f"{requirement} refuses torch {newer}"
        assert not requirement.specifier.contains("2.2.0"), f"{requirement} has no lower bound"
