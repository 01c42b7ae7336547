"""Render every measured table from benchmarks/results/*.json: docs/results.md, and the marked
blocks of README.md and docs/*.md, so that no figure is typed by hand.

    python -m benchmarks.render            # write docs/results.md and fill the blocks
    python -m benchmarks.render --check    # exit 1, naming the files, when one is stale

A block is the text between `<!-- results:NAME -->` and `<!-- /results:NAME -->`; NAME is one of
BLOCKS. Each area's renderer is a small function of its loaded JSON (tables.py; forecast
accuracy in forecast.py); SECTIONS lists the areas of docs/results.md, BLOCKS what the
README and the guides may quote.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from benchmarks.common import DOCS_DIR, REPO, RESULTS_DIR, write_text
from benchmarks.render import forecast as render_forecast
from benchmarks.render import forecast_checks, pipeline_scale, provenance, readings, study_checks, tables

RESULTS_PAGE = DOCS_DIR / "results.md"
BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)<!-- results:(?P<name>[\w-]+) -->\n.*?^[ \t]*<!-- /results:(?P=name) -->", re.S | re.M
)
OPENING = re.compile(r"<!-- results:(?P<name>[\w-]+) -->")


def load(name: str, results_dir: Path = RESULTS_DIR) -> dict:
    path = results_dir / name
    if not path.is_file():
        raise SystemExit(f"error: {path} is missing: run the benchmark that writes it (benchmarks/README.md)")
    return json.loads(path.read_text())


# (anchor, title, results files, renderer, the command that writes them)
SECTIONS = [
    (
        "forecast-accuracy",
        "Forecast accuracy on real runs",
        [render_forecast.RESULTS_FILE],
        render_forecast.table,
        render_forecast.COMMAND,
    ),
    (
        "forecast-accuracy-unseen",
        "Forecast accuracy on repositories never used",
        [render_forecast.UNSEEN_FILE],
        render_forecast.unseen_table,
        render_forecast.UNSEEN_COMMAND,
    ),
    (
        "plateau-shapes",
        "Plateau read on synthetic shapes",
        [forecast_checks.SHAPES_FILE],
        forecast_checks.plateau_shapes,
        forecast_checks.SHAPES_COMMAND,
    ),
    (
        "sigmoid-recovery",
        "Ceiling of a textbook sigmoid",
        [forecast_checks.RECOVERY_FILE],
        forecast_checks.sigmoid_recovery,
        forecast_checks.RECOVERY_COMMAND,
    ),
    (
        "forecast-seed-spread",
        "Forecast accuracy over sampler seeds",
        [forecast_checks.SEED_SPREAD_FILE],
        forecast_checks.seed_spread,
        forecast_checks.SEED_SPREAD_COMMAND,
    ),
    (
        "run-length",
        "Run length on real runs",
        ["run_length_accuracy.json"],
        tables.run_length,
        "python -m benchmarks.run_length_accuracy",
    ),
    (
        "reader-scale",
        "Reading long logs",
        ["reader_scale.json"],
        tables.reader_scale,
        "python -m benchmarks.reader_scale",
    ),
    (
        "cli-latency",
        "How fast the command line starts",
        ["cli_latency.json"],
        tables.cli_latency,
        "python -m benchmarks.cli_latency",
    ),
    (
        "live-forecast-overhead",
        "Live forecast overhead",
        ["live_forecast_overhead.json"],
        tables.live_forecast_overhead,
        "python -m benchmarks.live_forecast_overhead --steps 50 --repeats 7",
    ),
    (
        "demo-robustness",
        "The demo over seeds and thread counts",
        [
            "demo_robustness.json",
            "demo_robustness_threads2.json",
            "demo_robustness_threads2_seeds34.json",
            "tiny_self_forecast_mod10.json",
        ],
        tables.demo_robustness,
        "python -m benchmarks.demo_robustness, then python -m benchmarks.tiny_self_forecast "
        "--data benchmarks/data/tiny_mod10_runs",
    ),
    (
        "self-forecast",
        "Self-forecast of the tiny runs",
        ["tiny_self_forecast_mod10.json", "tiny_self_forecast_mod10_fit0.25.json", "tiny_self_forecast.json"],
        tables.self_forecast,
        "python -m benchmarks.tiny_self_forecast --data benchmarks/data/tiny_mod10_runs "
        "[--fit-fraction 0.25]; python -m benchmarks.tiny_self_forecast (the capped runs)",
    ),
    (
        "tiny-study",
        "Leave-one-out study on the tiny task",
        ["ablation_tiny_table.json", "ablation_tiny.json"],
        tables.tiny_study,
        "python -m benchmarks.ablation_tiny --steps 200 --seeds 5 --workdir DIR, then python -m benchmarks.study_table",
    ),
    (
        "batch-sweep",
        "Batch sweep at equal compute",
        ["sweep_equal_compute.json"],
        tables.batch_sweep,
        "python -m benchmarks.sweep_equal_compute",
    ),
    (
        "trainer-throughput",
        "Trainer throughput against TRL",
        ["trainer_throughput.json"],
        tables.trainer_throughput,
        "python -m benchmarks.trainer_throughput --rounds 5 --steps 25 --profile",
    ),
    (
        "async-vs-sync",
        "Async against sync on two shared CPU cores",
        ["async_vs_sync.json"],
        tables.async_vs_sync,
        "python -m benchmarks.async_vs_sync --interleave 3",
    ),
    (
        "pipeline-efficiency",
        "Pipeline efficiency on simulated devices",
        ["pipeline_efficiency.json"],
        tables.pipeline_efficiency,
        "python -m benchmarks.pipeline_efficiency",
    ),
]

SECTION_FILES = {anchor: files for anchor, _, files, _, _ in SECTIONS}

# block name -> (results files, renderer): what README.md and docs/*.md may quote
BLOCKS = {
    "forecast-headline": ([render_forecast.RESULTS_FILE, forecast_checks.SEED_SPREAD_FILE], render_forecast.headline),
    "forecast-accuracy": ([render_forecast.RESULTS_FILE], render_forecast.table),
    "forecast-unseen-headline": (
        [render_forecast.UNSEEN_FILE, render_forecast.RESULTS_FILE],
        render_forecast.unseen_headline,
    ),
    "sampler-check": ([forecast_checks.SAMPLER_FILE], forecast_checks.sampler_line),
    "gain-ahead-adopted": ([render_forecast.RESULTS_FILE], render_forecast.gain_ahead_line),
    "plateau-shapes": ([forecast_checks.SHAPES_FILE], forecast_checks.plateau_shapes),
    "sigmoid-recovery": ([forecast_checks.RECOVERY_FILE], forecast_checks.sigmoid_recovery),
    "forecast-seed-spread": ([forecast_checks.SEED_SPREAD_FILE], forecast_checks.seed_spread),
    "run-length-headline": (["run_length_accuracy.json"], tables.run_length_headline),
    "reader-scale": (["reader_scale.json"], tables.reader_scale),
    "cli-latency": (["cli_latency.json"], tables.cli_latency),
    "live-forecast-overhead": (["live_forecast_overhead.json"], tables.live_forecast_overhead),
    "live-forecast-headline": (["live_forecast_overhead.json"], tables.live_forecast_headline),
    "demo-headline": (SECTION_FILES["demo-robustness"], tables.demo_headline),
    "demo-robustness": (SECTION_FILES["demo-robustness"], tables.demo_robustness),
    "demo-band-misses": (SECTION_FILES["demo-robustness"], readings.demo_band_misses),
    "self-forecast": (SECTION_FILES["self-forecast"], tables.self_forecast),
    "study-headline": (SECTION_FILES["tiny-study"], tables.study_headline),
    "tiny-study": (SECTION_FILES["tiny-study"], tables.tiny_study),
    "batch-sweep": (["sweep_equal_compute.json"], tables.batch_sweep),
    "from-logs-verdicts": (["from_logs_verdicts.json"], study_checks.from_logs_verdicts),
    "positive-controls": (["positive_controls.json"], study_checks.positive_controls),
    "positive-controls-headline": (["positive_controls.json"], study_checks.positive_controls_headline),
    "positive-controls-ceiling-reading": (["positive_controls.json"], study_checks.positive_controls_ceiling_reading),
    "positive-controls-efficiency-reading": (
        ["positive_controls.json"],
        study_checks.positive_controls_efficiency_reading,
    ),
    "study-run-cost": (["positive_controls.json"], study_checks.study_run_cost),
    "positive-controls-variant-start": (["positive_controls.json"], study_checks.positive_controls_variant_start),
    "demo-time": (SECTION_FILES["demo-robustness"][:3], tables.demo_time),
    "tiny-study-headline": (["from_logs_verdicts.json"], study_checks.tiny_study_headline),
    "tiny-study-rejudged": (["from_logs_verdicts.json", "ablation_tiny.json"], readings.tiny_study_rejudged),
    "trainer-headline": (["trainer_throughput.json"], tables.trainer_headline),
    "trainer-throughput": (["trainer_throughput.json"], tables.trainer_throughput),
    "async-vs-sync": (["async_vs_sync.json"], tables.async_vs_sync),
    "train-memory": (["train_memory.json"], tables.train_memory),
    "train-memory-headline": (["train_memory.json"], tables.train_memory_headline),
    "pipeline-headline": (["pipeline_efficiency.json"], tables.pipeline_headline),
    "pipeline-efficiency": (["pipeline_efficiency.json"], tables.pipeline_efficiency),
    "publication-at-scale": (["pipeline_efficiency.json"], tables.publication_at_scale),
    "pipeline-broadcast": (["pipeline_broadcast.json"], pipeline_scale.broadcast_table),
    "pipeline-transport": (["pipeline_transport.json"], pipeline_scale.transport_table),
}


def _call(renderer, names: list[str], results_dir: Path) -> str:
    """The renderer's text, with a provenance note when a result is not tied to a clean commit;
    a JSON whose layout the renderer does not know is one error naming both (rerun the benchmark,
    or update the renderer with the benchmark)."""
    documents = {name: load(name, results_dir) for name in names}
    try:
        return provenance.with_note(renderer(*documents.values()).strip(), documents)
    except (KeyError, IndexError, TypeError, ValueError) as error:
        where = f"{renderer.__module__}.{renderer.__name__}"
        raise SystemExit(f"error: {where} cannot render {', '.join(names)}: {type(error).__name__} {error}") from None


def results_page(results_dir: Path = RESULTS_DIR) -> str:
    """docs/results.md: one section per area, each with the command that measured it."""
    lines = [
        "# Measured results",
        "",
        "Rendered by `python -m benchmarks.render` from `benchmarks/results/*.json`; edit the",
        "renderers (`benchmarks/render/`: `pages.py`, `tables.py`, `forecast.py`, `forecast_checks.py`), never this",
        "page. How to rerun each benchmark and what it costs:",
        "[benchmarks/README.md](../benchmarks/README.md).",
        "",
    ]
    lines += [f"- [{title}](#{anchor})" for anchor, title, *_ in SECTIONS]
    lines.append("- [Which commit measured each result](#provenance)")
    for anchor, title, names, renderer, command in SECTIONS:
        sources = ", ".join(f"`benchmarks/results/{name}`" for name in names)
        machine = tables.machine_text(load(names[0], results_dir))
        lines += [
            "",
            f'<a id="{anchor}"></a>',
            f"## {title}",
            "",
            f"`{command}` ({sources}{'; ' + machine if machine else ''})",
            "",
            _call(renderer, names, results_dir),
        ]
    every = {name: load(name, results_dir) for name in provenance.result_files(results_dir)}
    lines += [
        "",
        '<a id="provenance"></a>',
        "## Which commit measured each result",
        "",
        "From each result's machine block (`git_commit`, `git_dirty`: uncommitted changes under "
        "`src/` or `benchmarks/`); a figure above from a result that is not clean says so under it.",
        "",
        provenance.table(every),
    ]
    return "\n".join(lines) + "\n"


def fill_blocks(text: str, results_dir: Path = RESULTS_DIR, where: str = "") -> str:
    """`text` with every marked block's body replaced by its rendering; an unknown or unclosed
    block is an error naming it."""
    for match in OPENING.finditer(text):
        name = match["name"]
        if name not in BLOCKS:
            raise SystemExit(f"error: {where}: unknown results block {name!r} (known: {', '.join(BLOCKS)})")
        if f"<!-- /results:{name} -->" not in text[match.end() :]:
            raise SystemExit(f"error: {where}: results block {name!r} is not closed")

    def body(match: re.Match) -> str:  # a block inside a list item keeps the item's indent
        indent, name = match["indent"], match["name"]
        names, renderer = BLOCKS[name]
        lines = [indent + line if line else line for line in _call(renderer, names, results_dir).split("\n")]
        return "\n".join([f"{indent}<!-- results:{name} -->", *lines, f"{indent}<!-- /results:{name} -->"])

    return BLOCK.sub(body, text)


def rendered_files(repo: Path = REPO, results_dir: Path = RESULTS_DIR) -> dict[Path, str]:
    """{path: its rendered text} for docs/results.md and every README.md / docs/*.md with blocks."""
    docs = repo / "docs"
    files = {docs / "results.md": results_page(results_dir)}
    for path in [repo / "README.md", *sorted(docs.glob("*.md"))]:
        if path.name == "results.md" and path.parent == docs or not path.is_file():
            continue
        text = path.read_text()
        if OPENING.search(text):
            files[path] = fill_blocks(text, results_dir, str(path.relative_to(repo)))
    return files


def stale_files(files: dict[Path, str]) -> list[Path]:
    return [path for path, text in files.items() if not path.is_file() or path.read_text() != text]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a rendered file is stale")
    parser.add_argument(
        "--results", type=Path, default=RESULTS_DIR, help="folder of the results JSON (default benchmarks/results)"
    )
    args = parser.parse_args(argv)
    files = rendered_files(REPO, args.results)
    stale = stale_files(files)
    names = [str(path.relative_to(REPO)) for path in stale]
    if args.check:
        if stale:
            print("stale (run python -m benchmarks.render): " + ", ".join(names), file=sys.stderr)
            return 1
        print(f"up to date: {len(files)} files")
        return 0
    for path in stale:
        write_text(path, files[path])
    print("written: " + (", ".join(names) if names else "nothing (all up to date)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
