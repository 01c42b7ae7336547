"""Which commit measured each result: the machine block's git_commit and git_dirty
(benchmarks/common.py), read back for a note under every rendered figure whose result is not tied
to a clean commit, and for the provenance table of docs/results.md. A result not tied to a clean
commit and knowingly kept carries `"not_rerun": "why"` at its top level (e.g. the hours a rerun
costs): the note says "not re-run", the table says why."""

from __future__ import annotations

from pathlib import Path

SHORT = 10  # characters of a commit shown


def provenance(document: dict) -> tuple[str | None, bool | None]:
    """(commit, clean): the commit a result ran at (None when not recorded) and whether the tree
    was clean under src/ and benchmarks/ (None when not recorded)."""
    block = document.get("machine") or document.get("meta") or {}
    commit = block.get("git_commit")
    dirty = block.get("git_dirty")
    return commit, (None if commit is None or dirty is None else not dirty)


def not_rerun(document: dict, why: bool = True) -> str:
    """', not re-run: WHY' (', not re-run' without `why`) when the result is marked as kept
    without a rerun, else empty."""
    reason = document.get("not_rerun")
    if not reason:
        return ""
    return f", not re-run: {reason}" if why else ", not re-run"


def state(document: dict) -> str:
    """'clean at C', 'measured on an uncommitted tree at C', or 'commit not recorded', then
    ', not re-run' when it is marked so."""
    commit, clean = provenance(document)
    if commit is None:
        text = "commit not recorded"
    elif clean is None:
        text = f"at {commit[:SHORT]}, tree state not recorded"
    else:
        text = f"clean at {commit[:SHORT]}" if clean else f"measured on an uncommitted tree at {commit[:SHORT]}"
    return text + not_rerun(document, why=False)


def note(documents: dict[str, dict]) -> str:
    """One italic line naming each of `documents` ({file name: loaded JSON}) not tied to a
    clean commit, e.g. '*Provenance: x.json measured on an uncommitted tree at 0123456789.*';
    empty when every one is clean."""
    unclean = [
        f"`{name}` {state(document)}" for name, document in documents.items() if provenance(document)[1] is not True
    ]
    return f"*Provenance: {'; '.join(unclean)}.*" if unclean else ""


def with_note(text: str, documents: dict[str, dict]) -> str:
    """`text` with note(documents) after it: its own paragraph after a table, else the last
    sentence of the paragraph (a block may sit inside prose or a list item)."""
    line = note(documents)
    if not line:
        return text
    last = text.rstrip().rsplit("\n", 1)[-1].lstrip()
    return f"{text.rstrip()}{chr(10) * 2 if last.startswith('|') else chr(10)}{line}"


def table(documents: dict[str, dict]) -> str:
    """Markdown table: result file, commit, clean? for every results file."""
    lines = ["| result file | commit | clean tree? |", "|---|---|---|"]
    for name, document in sorted(documents.items()):
        commit, clean = provenance(document)
        clean_text = {
            True: "yes",
            False: "**no** (uncommitted changes under src/ or benchmarks/)",
            None: "not recorded",
        }[clean]
        clean_text += not_rerun(document)
        lines.append(f"| `{name}` | {f'`{commit[:SHORT]}`' if commit else 'not recorded'} | {clean_text} |")
    counts = [provenance(document)[1] for document in documents.values()]
    kept = sum(bool(not_rerun(document)) for document in documents.values() if provenance(document)[1] is not True)
    lines += [
        "",
        f"{counts.count(True)} of {len(counts)} results tie to a clean commit; "
        f"{counts.count(False)} were measured on an uncommitted tree and {counts.count(None)} "
        f"record no commit or tree state ({kept} of these marked not re-run, with why). Rerunning a "
        "benchmark on a clean checkout ties it (benchmarks/README.md).",
    ]
    return "\n".join(lines)


def result_files(results_dir: Path) -> list[str]:
    return sorted(path.name for path in results_dir.glob("*.json"))
