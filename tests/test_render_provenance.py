"""The renderer marks every figure whose result is not tied to a clean commit, and docs/results.md
lists the commit of every result (benchmarks/render/provenance.py)."""

import json

from benchmarks.render import pages, provenance

CLEAN = {"machine": {"git_commit": "0123456789abcdef", "git_dirty": False}}
DIRTY = {"machine": {"git_commit": "fedcba9876543210", "git_dirty": True}}
UNRECORDED = {"machine": {"cpus": 2}}


def test_provenance_reads_the_machine_block():
    assert provenance.provenance(CLEAN) == ("0123456789abcdef", True)
    assert provenance.provenance(DIRTY) == ("fedcba9876543210", False)
    assert provenance.provenance(UNRECORDED) == (None, None)
    assert provenance.provenance({}) == (None, None)
    assert provenance.provenance({"machine": {"git_commit": "abc", "git_dirty": None}}) == ("abc", None)


def test_a_clean_result_gets_no_note_and_the_others_are_named():
    assert provenance.note({"a.json": CLEAN}) == ""
    assert provenance.note({"a.json": CLEAN, "b.json": DIRTY, "c.json": UNRECORDED}) == (
        "*Provenance: `b.json` measured on an uncommitted tree at fedcba9876; `c.json` commit not recorded.*"
    )


def test_the_note_ends_a_sentence_or_follows_a_table():
    assert provenance.with_note("Two runs agree.", {"a.json": CLEAN}) == "Two runs agree."
    assert provenance.with_note("Two runs agree.\n", {"b.json": DIRTY}) == (
        "Two runs agree.\n*Provenance: `b.json` measured on an uncommitted tree at fedcba9876.*"
    )
    assert provenance.with_note("| a |\n|---|\n| 1 |", {"c.json": UNRECORDED}) == (
        "| a |\n|---|\n| 1 |\n\n*Provenance: `c.json` commit not recorded.*"
    )


def test_the_table_lists_every_result_and_counts_them():
    kept = {**UNRECORDED, "not_rerun": "about 150 minutes"}
    text = provenance.table({"z.json": CLEAN, "b.json": DIRTY, "c.json": UNRECORDED, "d.json": kept})
    rows = [line for line in text.split("\n") if line.startswith("| `")]
    assert rows == [
        "| `b.json` | `fedcba9876` | **no** (uncommitted changes under src/ or benchmarks/) |",
        "| `c.json` | not recorded | not recorded |",
        "| `d.json` | not recorded | not recorded, not re-run: about 150 minutes |",
        "| `z.json` | `0123456789` | yes |",
    ]
    assert "1 of 4 results tie to a clean commit; 1 were measured on an uncommitted tree and 2 record" in text
    assert "(1 of these marked not re-run, with why)" in text


def test_a_result_kept_without_a_rerun_says_so_under_its_figure():
    kept = {**DIRTY, "not_rerun": "needs 8 GB"}
    assert provenance.note({"a.json": CLEAN, "b.json": kept}) == (
        "*Provenance: `b.json` measured on an uncommitted tree at fedcba9876, not re-run.*"
    )


def test_the_results_page_marks_an_unclean_figure(tmp_path):
    (tmp_path / "reader_scale.json").write_text((pages.RESULTS_DIR / "reader_scale.json").read_text())
    block = "<!-- results:reader-scale -->\n<!-- /results:reader-scale -->\n"
    assert "Provenance" not in pages.fill_blocks(block, tmp_path)
    document = json.loads((tmp_path / "reader_scale.json").read_text())
    document["machine"]["git_dirty"] = True
    (tmp_path / "reader_scale.json").write_text(json.dumps(document))
    commit = document["machine"]["git_commit"][:10]
    assert f"`reader_scale.json` measured on an uncommitted tree at {commit}" in pages.fill_blocks(block, tmp_path)


# Forecast results measured before the forecaster they describe settled: exempt until each is rerun
# on a clean checkout, when its name leaves this set.
AWAITING_RERUN: set[str] = set()


def test_every_committed_result_is_tied_to_a_clean_commit_or_says_why_not():
    untied = []
    for name in provenance.result_files(pages.RESULTS_DIR):
        document = json.loads((pages.RESULTS_DIR / name).read_text())
        if provenance.provenance(document)[1] is not True and not document.get("not_rerun"):
            untied.append(name)
    assert sorted(set(untied) - AWAITING_RERUN) == [], "rerun these on a clean checkout, or mark them not_rerun"
    assert sorted(AWAITING_RERUN - set(untied)) == [], "rerun and tied to a clean commit: drop from AWAITING_RERUN"
