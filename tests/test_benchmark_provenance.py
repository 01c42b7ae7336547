"""A result is tied to the commit it measured: benchmarks/common.py's write_result refuses a new
measurement of uncommitted code into the repository unless SCALERL_BENCH_ALLOW_DIRTY=1, and the
machine block's git_commit / git_dirty say what the tree was."""

import json
import subprocess

import pytest

from benchmarks import common

CLEAN = {"git_commit": "a" * 40, "git_dirty": False}
DIRTY = {"git_commit": "b" * 40, "git_dirty": True}


@pytest.fixture()
def repo(tmp_path, monkeypatch):
    """A throwaway git repository standing in for the project's, with one commit under src/."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "code.py").write_text("x = 1\n")
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one"],
    ):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    monkeypatch.setattr(common, "REPO", root)
    monkeypatch.delenv(common.ALLOW_DIRTY_VARIABLE, raising=False)
    return root


def test_machine_block_records_the_commit_and_whether_the_tree_is_dirty(repo):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert common._git_commit() == {"commit": head, "dirty": False}
    (repo / "notes.txt").write_text("outside src/ and benchmarks/: not a change to measured code\n")
    assert common._git_commit()["dirty"] is False
    (repo / "benchmarks" / "results").mkdir(parents=True)
    (repo / "benchmarks" / "results" / "earlier.json").write_text("{}\n")
    assert common._git_commit()["dirty"] is False, "a result written by an earlier run is not measured code"
    (repo / "benchmarks" / "helper.py").write_text("y = 1\n")
    assert common._git_commit()["dirty"] is True
    (repo / "benchmarks" / "helper.py").unlink()
    (repo / "src" / "code.py").write_text("x = 2\n")
    assert common._git_commit() == {"commit": head, "dirty": True}


def test_a_dirty_measurement_into_the_repository_is_refused_and_kept_aside(repo):
    target = repo / "benchmarks" / "results" / "x.json"
    with pytest.raises(common.DirtyTreeError, match="uncommitted code.*SCALERL_BENCH_ALLOW_DIRTY=1") as refused:
        common.write_result(target, {"value": 3}, "python -m benchmarks.x", machine_block=DIRTY)
    assert not target.exists()
    kept = str(refused.value).rsplit("kept at ", 1)[1].rstrip(")")
    document = json.loads(open(kept).read())
    assert document["value"] == 3 and document["machine"] == DIRTY


def test_the_override_writes_it_marked_dirty(repo, monkeypatch):
    monkeypatch.setenv(common.ALLOW_DIRTY_VARIABLE, "1")
    target = repo / "benchmarks" / "results" / "x.json"
    common.write_result(target, {"value": 3}, "cmd", machine_block=DIRTY)
    assert json.loads(target.read_text())["machine"]["git_dirty"] is True


def test_clean_trees_quick_runs_outside_the_repository_and_rerenders_are_written(repo, tmp_path):
    inside = repo / "benchmarks" / "results" / "clean.json"
    common.write_result(inside, {"value": 1}, "cmd", machine_block=CLEAN)
    assert json.loads(inside.read_text())["machine"] == CLEAN
    outside = tmp_path / "quick" / "x.json"
    common.write_result(outside, {"value": 2}, "cmd", machine_block=DIRTY)
    assert json.loads(outside.read_text())["value"] == 2
    rerendered = repo / "benchmarks" / "results" / "old.json"
    common.write_result(rerendered, {"value": 4}, "cmd", machine_block=DIRTY, new_measurement=False)
    assert json.loads(rerendered.read_text())["machine"] == DIRTY


def test_a_fresh_block_is_checked_against_the_tree_now(repo):
    (repo / "src" / "code.py").write_text("x = 3\n")
    with pytest.raises(common.DirtyTreeError):
        common.write_result(repo / "benchmarks" / "results" / "x.json", {"value": 5}, "cmd")
