"""The renderers of benchmarks/render/pages.py, one small function per area (forecast accuracy is in
forecast.py): each takes the loaded results JSON and returns markdown, a table or one
headline sentence."""

from __future__ import annotations

import statistics

from benchmarks.pipeline_efficiency_report import markdown as pipeline_markdown
from benchmarks.render.throughput import markdown_table as throughput_table
from benchmarks.study_table import markdown as study_markdown
from benchmarks.sweep_equal_compute import markdown as sweep_markdown


def machine_text(results: dict) -> str:
    """'2 CPUs, load average 4.5', from the machine block (or an older `meta`); empty when neither
    was recorded."""
    block = results.get("machine") or results.get("meta") or {}
    cpus = block.get("cpus")
    load = next(
        (
            block[key]
            for key in (
                "load_average_before",
                "load_average",
                "load_average_at_start",
                "load_average_at_end",
                "load_average_after",
            )
            if block.get(key)
        ),
        None,
    )
    if isinstance(load, list):
        load = load[0]
    parts = [f"{cpus} CPUs"] if cpus else []
    if load is not None:
        parts.append(f"load average {load:.1f}")
    return ", ".join(parts)


def _range(values, digits: int = 3) -> str:
    low, high = min(values), max(values)
    return f"{low:.{digits}f}" if f"{low:.{digits}f}" == f"{high:.{digits}f}" else f"{low:.{digits}f}-{high:.{digits}f}"


# ------------------------------------------------------------------------- forecasting


def run_length(results: dict) -> str:
    """Does the run-length interval hold the compute at which real runs settled?"""
    pct = int(round(100 * results["level"]))
    lines = [
        f"| fitted on | runs scored | settled | settling compute inside the {pct} % interval | "
        "point value within 2x | median factor off |",
        "|---|---|---|---|---|---|",
    ]
    for fraction, part in results["summary"].items():
        lines.append(
            f"| first {100 * float(fraction):.0f} % | {part['scored']} | {part['settled']} | "
            f"{part['settled_inside_interval']} of {part['settled']} | {part['within_factor_2']} of "
            f"{part['scored']} | {10 ** part['median_abs_log10_ratio']:.1f} |"
        )
    return "\n".join(lines)


def run_length_headline(results: dict) -> str:
    parts = results["summary"].values()
    inside, settled = sum(p["settled_inside_interval"] for p in parts), sum(p["settled"] for p in parts)
    return (
        f"The run length's {100 * results['level']:.0f} % interval held the compute at which real runs "
        f"settled on {inside} of {settled}: an order of magnitude, not a deadline."
    )


def reader_scale(results: dict) -> str:
    lines = ["| rows | format | file | seconds | peak memory | points fitted |", "|---|---|---|---|---|---|"]
    names = {"csv": "CSV", "jsonl": "JSON lines", "tensorboard": "TensorBoard"}
    for run in results["runs"]:
        lines.append(
            f"| {run['rows']:,} | {names.get(run['format'], run['format'])} | {run['file_mb']} MB | "
            f"{run['seconds']:.1f} | {run['peak_mb']:.0f} MB | {run['n_points']} |"
        )
    return "\n".join(lines)


def cli_latency(results: dict) -> str:
    lines = [
        f"CPU seconds of the whole `scalerl` process (interpreter start included), median of "
        f"{results['repeats']} runs; `fit` on a {results['n_points']}-point CSV"
        + (", scalerl's bytecode cached as after a first run" if results.get("bytecode") else "")
        + ":",
        "",
        "| command | CPU s | wall s | target | heavy modules imported |",
        "|---|---|---|---|---|",
    ]
    for row in results["commands"]:
        target = "" if row["target_cpu_seconds"] is None else f"<= {row['target_cpu_seconds']:g}"
        lines.append(
            f"| `{row['command']}` | {row['median_cpu_seconds']:.2f} | {row['median_wall_seconds']:.2f} | "
            f"{target} | {', '.join(row['heavy_modules']) or '-'} |"
        )
    floor = results.get("library_floor")
    if floor:
        lines += [
            "",
            f"The floor: a bare interpreter that only imports the libraries the fit needs "
            f"as the fit imports them (`{floor['script']}`), on one BLAS thread as `scalerl fit` runs them, takes "
            f"{floor['median_cpu_seconds']:.2f} s of CPU.",
        ]
    return "\n".join(lines)


def live_forecast_overhead(results: dict) -> str:
    real = results["real_run"]
    config = real["config"]
    interval = config["eval_every"] * real["median_step_seconds"]
    refits = [s for s in real["refit_seconds"] if s > 0.01]  # the first ones return at once
    shares = [100 * s / interval for s in refits]
    lines = [
        f"Inside a real {config['steps']}-step run of the demo config ({config['prompts_per_step']} prompts x "
        f"{config['generations_per_prompt']} generations, one torch thread): median step "
        f"{real['median_step_seconds']:.2f} s, so {interval:.1f} s between validations; the live "
        f"forecasts that fitted took "
        + ", ".join(f"{s:.2f}" for s in refits)
        + " s, "
        + ", ".join(f"{s:.1f}" for s in shares)
        + " % of the steps between validations.",
        "",
        f"On demo-shaped curves, median of the repeats, {results['n_draws']} posterior draws:",
        "",
        f"| evaluations so far | refit s | plot s | overhead (% of {config['eval_every']} steps) |",
        "|---|---|---|---|",
    ]
    for row in results["synthetic_curves"]:
        lines.append(
            f"| {row['n_points']} | {row['median_fit_seconds']:.3f} | {row['median_plot_seconds']:.3f} | "
            f"{row['overhead_percent']:.2f} |"
        )
    return "\n".join(lines)


def live_forecast_headline(results: dict) -> str:
    shares = [row["overhead_percent"] for row in results["synthetic_curves"]]
    return f"The live forecast costs {_range(shares, 1)} % of training time per validation at the demo's scale."


# ------------------------------------------------------------------------- the demo and the tiny runs


def _demo_runs(robustness: list[dict], self_forecast: dict) -> list[dict]:
    scored = {run["run"]: run for run in self_forecast["runs"]}
    rows = []
    for report in robustness:
        for run in report["runs"]:
            rescored = scored.get(f"demo__seed{run['seed']}-threads{run['threads']}")
            rows.append({**run, "rescored": rescored})
    return sorted(rows, key=lambda r: (r["threads"], r["seed"]))


def demo_robustness(*loaded: dict) -> str:
    """Per demo: R0, plateau, A on every evaluation and the first-half band's hits, re-scored by the
    current forecaster on the kept curves (tiny_self_forecast), and the seconds."""
    *robustness, self_forecast = loaded
    lines = [
        "| RL seed, torch threads | R0 | plateau (last quarter) | A, all points [80 %] | "
        "first-half 80 % band holds | mean abs error | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in _demo_runs(robustness, self_forecast):
        scored = run["rescored"] or {}
        a_text = "-"
        if scored.get("A_all_points") is not None:
            low, high = scored["A_interval_all_points"]
            a_text = f"{scored['A_all_points']:.3f} [{low:.3f}, {high:.3f}]"
        holds = f"{scored['inside']} of {scored['held_out']}" if scored else "-"
        error = f"{scored['mean_abs_error']:.3f}" if scored.get("mean_abs_error") is not None else "-"
        lines.append(
            f"| {run['seed']}, {run['threads']} thread{'s' if run['threads'] > 1 else ''} | "
            f"{run['R0']:.2f} | {run['final_plateau']:.3f} | {a_text} | {holds} | {error} | "
            f"{run['seconds']:.0f} |"
        )
    return "\n".join(lines)


def demo_headline(*loaded: dict) -> str:
    *robustness, self_forecast = loaded
    runs = _demo_runs(robustness, self_forecast)
    scored = [r["rescored"] for r in runs if r["rescored"]]
    a_values = [s["A_all_points"] for s in scored if s.get("A_all_points") is not None]
    return (
        f"Over {len(runs)} demos (RL seeds and thread counts), the fitted ceiling A is "
        f"{_range(a_values)}, and the sigmoid fitted on the first half of the compute held "
        f"{sum(s['inside'] for s in scored)} of {sum(s['held_out'] for s in scored)} later evaluations "
        "in its 80 % band."
    )


def _fmt_score(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def self_forecast(half: dict, quarter: dict, capped: dict) -> str:
    """Per group of tiny runs: the later evaluations inside the band fitted on the first half (and
    quarter) of the compute; then the runs with a known ceiling."""
    lines = [
        "| runs | fitted on | runs | later evaluations inside the 80 % band | share | runs holding "
        ">= 70 % | lowest run | interval score |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, result in (("first half", half), ("first quarter", quarter)):
        for group, part in result["by_group"].items():
            lines.append(
                f"| {group} | {label} | {part['runs_fitted']} | {part['inside']} of {part['held_out']} | "
                f"{part['pooled_coverage']:.0%} | {part['runs_at_least_target']} of {part['runs_fitted']} | "
                f"{part['lowest_run_coverage']:.0%} | {_fmt_score(part.get('mean_interval_score'))} |"
            )
    known = capped["known_ceiling"]
    lines += [
        "",
        f"Runs whose pass rate cannot exceed {known['bound']} (`benchmarks/data/tiny_capped_runs`), "
        f"fitted on every evaluation: the 80 % interval of A reaches the bound on "
        f"{known['intervals_admitting_bound']} of {known['fitted']}.",
    ]
    return "\n".join(lines)


def tiny_study(table: dict, ablation: dict) -> str:
    return study_markdown(table["rows"], ablation["leave_one_out"])


def study_headline(table: dict, ablation: dict) -> str:
    variants = [row for row in table["rows"] if not row["is_base"]]
    identified = sum(row["identified"] for row in table["rows"])
    runs = sum(row["seeds"] for row in table["rows"])
    labels = [(row.get("effect") or {}).get("label", "-") for row in variants]
    margin = ablation["leave_one_out"].get("margin", {}).get("value")
    no_effect = sum(label.startswith("no measurable effect") for label in labels)
    seeds = max(row["seeds"] for row in table["rows"])
    return (
        f"On the tiny task, {identified} of {runs} ceilings are identified and {no_effect} of the "
        f"{len(variants)} leave-one-out knobs have no measurable effect at margin {margin} "
        f"({seeds} paired seeds)."
    )


def batch_sweep(results: dict) -> str:
    return sweep_markdown(results["rows"], results["level"], results["last"])


# ------------------------------------------------------------------------- training and scale-out


def trainer_throughput(results: dict) -> str:
    setup = results["setup"]
    return "\n".join(
        [
            f"{setup['prompts']} prompts x {setup['generations']} generations per step, {setup['max_new_tokens']} new "
            f"tokens, {setup['threads']} torch thread(s), each trainer in its own process, median of "
            f"{setup['rounds']} alternating rounds.",
            "",
            throughput_table(results["results"]),
            "",
            trainer_headline(results),
        ]
    )


def trainer_headline(results: dict) -> str:
    recipe, matched = results["rounds_recipe_tokens_per_second_ratio"], results["rounds_tokens_per_second_ratio"]
    return (
        f"scalerl generates **{results['recipe_tokens_per_second_ratio']:.2f}x** TRL GRPOTrainer's tokens per "
        f"second with the ScaleRL recipe (per round {min(recipe):.2f}-{max(recipe):.2f}) and "
        f"{results['tokens_per_second_ratio']:.2f}x doing TRL's exact work (per round "
        f"{min(matched):.2f}-{max(matched):.2f}), on CPU."
    )


def async_vs_sync(results: dict) -> str:
    names = {
        "sync": "sync (2 threads)",
        "sync-1thread": "sync (1 thread)",
        "async-k1": "async k = 1",
        "async-k4": "async k = 4",
        "async-k8": "async k = 8",
        "ppo-offpolicy-k4": "PPO-off-policy-4",
    }
    lines = ["| mode | generated tokens/s | vs sync | wall s to the same samples | max lag |", "|---|---|---|---|---|"]
    for name, run in results["results"].items():
        lines.append(
            f"| {names.get(name, name)} | {run['tokens_per_second']:,.0f} | {run['throughput_vs_sync']:.2f} | "
            f"{run['wall_seconds']:.0f} | {run['policy_lag_max']} |"
        )
    split = results.get("sync_step_split")
    if split:
        lines += [
            "",
            f"A synchronous step of this batch (one thread): {split['generate_seconds_per_step']:.2f} s "
            f"generating, {split['train_seconds_per_step']:.2f} s training ({split['generation_share']:.0%} "
            "generation), so the pipeline is bounded by the trainer.",
        ]
    rounds = results.get("interleaved")
    if rounds:
        medians = ", ".join(f"{names.get(k, k)} {v:,.0f}" for k, v in rounds["median_tokens_per_second"].items())
        lines += [
            "",
            f"In {rounds['rounds']} alternating rounds of {rounds['steps']} steps, median tokens/s: {medians} "
            f"(async k = 8 {rounds['async_k8_vs_sync_1thread']:.2f}x the 1-thread trainer, "
            f"{rounds['async_k8_vs_sync']:.2f}x the 2-thread one).",
        ]
    return "\n".join(lines)


def pipeline_efficiency(results: dict) -> str:
    return pipeline_markdown(results)


def pipeline_headline(results: dict) -> str:
    summary = results["summary"]
    over = summary["overhead"]
    efficiencies = [c["efficiency"] for c in results["cells"] if c["mode"] == "async" and c["k"] == 8]
    return (
        f"On simulated devices, async k = 8 runs at **{summary['k8_vs_sync_1to1_one_generator']:.2f}x** the "
        f"synchronous throughput at a 1:1 generation : training ratio with one generator (ideal 2x), at "
        f"{_range(efficiencies, 2)} of the overlap bound over every ratio and generator count, for "
        f"{over['excess_ms']:.1f} ms ({100 * over['excess_share']:.1f} %) of overhead per step; "
        f"{statistics.median(efficiencies):.2f} at the median."
    )


def train_memory(results: dict) -> str:
    setup, summary = results["setup"], results["summary"]
    lines = [
        f"One step's resident set on CPU at train.micro_batch_size = {setup['micro_batch_size']} and "
        f"train.logprob_chunk_size = {setup['logprob_chunk_size']} (the second step of a fresh process; "
        "added: its peak minus the resident set before it).",
        "",
        "| model | sequences | tokens | peak MiB | added MiB | step s |",
        "|---|---|---|---|---|---|",
    ]
    for name, rows in results["memory"].items():
        for row in rows:
            lines.append(
                f"| {name} ({row['parameters'] / 1e6:.1f} M params) | {row['batch']} | {row['tokens']:,} | "
                f"{row['peak_mib']:,.0f} | {row['added_mib']:,.0f} | {row['seconds']:.1f} |"
            )
    head, logprobs = setup["logprob_head"], results["logprobs"]
    throughput = results["median_step_seconds"]
    lines += [
        "",
        "Peak over the batch sizes, max / min: "
        + ", ".join(f"{name} {value:.3f}" for name, value in summary["peak_flatness"].items())
        + ".",
        "",
        f"Log-probs of {head['sequences']} x {head['length']} tokens through a {head['vocab']:,}-word LM head "
        f"(hidden {head['hidden']}), forward and backward: materialised logits add "
        f"{logprobs['materialised']['added_mib']:,.0f} MiB, chunks of {logprobs['chunked']['logprob_chunk_size']} "
        f"positions {logprobs['chunked']['added_mib']:,.0f} MiB ({summary['logprob_memory_ratio']:.1f}x less).",
        "",
        f"Built-in model, {setup['throughput_batch']} sequences, {setup['throughput_rounds']} alternating rounds "
        f"of {setup['timed_steps']} steps each: {throughput['unbatched']:.2f} s unbatched, "
        f"{throughput['micro-batched']:.2f} s in micro-batches of {setup['micro_batch_size']} (medians); "
        f"micro-batched throughput {summary['micro_vs_unbatched_throughput']:.2f}x the unbatched (median of the "
        f"rounds; {min(summary['throughput_ratio_by_round']):.2f}-{max(summary['throughput_ratio_by_round']):.2f}).",
    ]
    return "\n".join(lines)


def _model_label(name: str, rows: list[dict]) -> str:
    return "built-in" if name == "builtin" else f"{rows[0]['parameters'] / 1e6:.0f} M-parameter"


def train_memory_headline(results: dict) -> str:
    summary = results["summary"]
    spans = " and ".join(
        f"{min(r['batch'] for r in rows)} to {max(r['batch'] for r in rows)} sequences on the "
        f"{_model_label(name, rows)} model"
        for name, rows in results["memory"].items()
    )
    flat = max(summary["peak_flatness"].values())
    return (
        f"At a fixed micro-batch one step's peak memory varies by at most **{100 * (flat - 1):.1f} %** from "
        f"{spans}; chunked log-probs need {summary['logprob_memory_ratio']:.1f}x less memory than "
        "materialised logits at a 32k vocabulary "
        "([docs/training.md](docs/training.md#larger-models-memory-reward-functions-several-processes))."
    )


def demo_time(*robustness: dict) -> str:
    """How long `make demo` takes on two cores: the range and median wall time of the demos that
    ran alone (one at a time) on two threads."""
    seconds = sorted(
        run["seconds"]
        for result in robustness
        if result["settings"].get("parallel") == 1
        for run in result["runs"]
        if run["threads"] == 2 and run["exit_code"] == 0
    )
    minutes = [s / 60 for s in seconds]
    return (
        f"`make demo` takes {minutes[0]:.0f}-{minutes[-1]:.0f} minutes on two CPU cores (median "
        f"{statistics.median(minutes):.0f} over {len(minutes)} demos run one at a time on two threads; "
        "install excluded)."
    )


def publication_at_scale(results: dict) -> str:
    """Weight publication of the largest model pipeline_efficiency timed: bytes per version, this
    CPU's snapshot and put, and one network copy per node at 10 and 100 Gbit/s (bytes * 8 / rate)."""
    largest = max(results["publication"], key=lambda row: row["parameters"])
    network_s = largest["network_ms_per_copy_10gbit"] / 1000
    return (
        f"The cost that grows with scale is weight publication: at ~{largest['parameters'] / 1e9:.0f} B "
        f"parameters expect a device-to-host copy and an object-store put of "
        f"{largest['bytes_per_version'] / 1e9:.1f} GB per version (about a second on a GPU node's memory "
        f"bandwidth; {largest['snapshot_ms'] / 1000:.1f} s + {largest['put_ms'] / 1000:.1f} s on this CPU) "
        f"plus one network copy per node ({network_s:.1f} s at 10 Gbit/s, {network_s / 10:.2f} s at 100 "
        "Gbit/s), serial with each optimiser step, so it matters once T is a few seconds."
    )
