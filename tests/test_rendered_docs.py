"""docs/results.md and the results blocks of README.md and docs/*.md are what
`python -m benchmarks.render` makes of benchmarks/results/*.json: a stale file fails here."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_rendered_docs_are_up_to_date():
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.render", "--check"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr + done.stdout


@pytest.fixture()
def render(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    from benchmarks.render import pages as module

    return module


def test_a_block_is_filled_between_its_markers(render):
    text = "before\n<!-- results:trainer-headline -->\ntyped by hand\n<!-- /results:trainer-headline -->\nafter\n"
    filled = render.fill_blocks(text)
    assert filled.startswith("before\n<!-- results:trainer-headline -->\n") and filled.endswith(
        "<!-- /results:trainer-headline -->\nafter\n"
    )
    assert "typed by hand" not in filled and "TRL" in filled
    assert render.fill_blocks(filled) == filled


def test_unknown_or_unclosed_blocks_are_named(render):
    with pytest.raises(SystemExit, match="unknown results block 'no-such-table'"):
        render.fill_blocks("<!-- results:no-such-table -->\n<!-- /results:no-such-table -->\n", where="X.md")
    with pytest.raises(SystemExit, match="'forecast-headline' is not closed"):
        render.fill_blocks("<!-- results:forecast-headline -->\ntext\n", where="X.md")


def test_check_names_a_stale_file(render, tmp_path):
    stale = tmp_path / "stale.md"
    stale.write_text("old")
    fresh = tmp_path / "fresh.md"
    fresh.write_text("new")
    assert render.stale_files({stale: "new", fresh: "new", tmp_path / "missing.md": "x"}) == [
        stale,
        tmp_path / "missing.md",
    ]


def test_a_results_file_the_renderer_cannot_read_is_named(render, tmp_path):
    (tmp_path / "trainer_throughput.json").write_text("{}")
    with pytest.raises(SystemExit, match=r"render.tables.trainer_headline cannot render trainer_throughput.json"):
        render.fill_blocks("<!-- results:trainer-headline -->\n<!-- /results:trainer-headline -->\n", tmp_path)
    with pytest.raises(SystemExit, match="reader_scale.json is missing"):
        render.fill_blocks("<!-- results:reader-scale -->\n<!-- /results:reader-scale -->\n", tmp_path)
