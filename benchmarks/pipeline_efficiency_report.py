"""Tables, figure and weight-publication measurements of benchmarks/pipeline_efficiency.py.

`publication_costs` times snapshot + ray.put of a model's weights (and a fetch + copy by another
process on the same node, what a generator's load does) for the built-in model and synthetic
bf16 models up to ~1 B parameters;
`summarise` reduces the cells to the targets; `write_outputs` writes the JSON (atomically),
the markdown table next to it and the figure. Run as a module, it re-renders the table and the
figure from a results JSON:

    python -m benchmarks.pipeline_efficiency_report [benchmarks/results/pipeline_efficiency.json]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import DOCS_DIR, RESULTS_DIR, write_result, write_text
from benchmarks.pipeline_timing import reestimate

TARGET_EFFICIENCY = 0.90  # async k = 8 vs the overlap bound, up to trainer saturation
TARGET_SPEEDUP = 1.8  # async k = 8 vs sync at 1:1 with one generator (bound 2x)
TARGET_OVERHEAD = 0.05  # per-step overhead as a share of a step


def _model(size: str):
    """(torch module, label): the built-in model (TrainConfig's default or a named size) or a
    synthetic bf16 model of `size` parameters (16 M-parameter matrices)."""
    import torch

    from scalerl.models.sizes import MODEL_SIZES, model_size_assignments
    from scalerl.train.config.train_config import TrainConfig
    from scalerl.train.run_setup import fresh_policy

    if size == "builtin" or size in MODEL_SIZES:
        extra = model_size_assignments(size) if size in MODEL_SIZES else ()
        model, _ = fresh_policy(TrainConfig().with_overrides(["model.warmstart_steps=0", *extra]))
        return model, f"built-in ({size}, fp32)" if size != "builtin" else "built-in (fp32)"
    total = int(float(size))
    chunk = 16 * 2**20
    module = torch.nn.ParameterList()
    while total > 0:
        module.append(torch.nn.Parameter(torch.zeros(min(chunk, total), dtype=torch.bfloat16), requires_grad=False))
        total -= chunk
    return module, f"synthetic {float(size) / 1e6:.0f} M (bf16)"


def publication_costs(sizes, workdir: Path) -> list[dict]:
    """Per size: parameters, bytes per version, seconds to snapshot + put, seconds for another
    process on the node to fetch it, and the bytes one step moves with 1 and 8 generators."""
    import ray

    from benchmarks.overlap_bounds import weight_bytes_per_step
    from scalerl.distributed.weight_sync.object_store import snapshot_weights

    @ray.remote(num_cpus=0)
    class Fetcher:
        def fetch(self, wrapped) -> float:
            import numpy as np

            started = time.perf_counter()
            snapshot = ray.get(wrapped[0])  # same node: mapped from the object store, no copy
            copies = [np.array(array, copy=True) for array in snapshot.arrays.values()]
            elapsed = time.perf_counter() - started
            del copies, snapshot
            return elapsed

    fetcher = Fetcher.remote()
    results = []
    for size in sizes:
        model, label = _model(size.strip())
        params = sum(p.numel() for p in model.parameters())
        repeats = 3 if params < 50e6 else 1
        snap_s, put_s, fetch_s = [], [], []
        for _ in range(repeats):
            started = time.perf_counter()
            snapshot = snapshot_weights(model, 1)
            snapped = time.perf_counter()
            ref = ray.put(snapshot)
            put = time.perf_counter()
            del snapshot
            fetch_s.append(ray.get(fetcher.fetch.remote([ref])))
            snap_s.append(snapped - started)
            put_s.append(put - snapped)
            del ref
        bytes_per_param = model.parameters().__next__().element_size()
        results.append(
            {
                "model": label,
                "parameters": int(params),
                "bytes_per_version": int(params * bytes_per_param),
                "snapshot_ms": 1e3 * statistics.median(snap_s),
                "put_ms": 1e3 * statistics.median(put_s),
                "fetch_ms_same_node": 1e3 * statistics.median(fetch_s),
                "network_ms_per_copy_10gbit": 1e3 * network_seconds(params * bytes_per_param, 10.0),
                "bytes_per_step_1_generator": weight_bytes_per_step(params, bytes_per_param, 1)["total"],
                "bytes_per_step_8_generators": weight_bytes_per_step(params, bytes_per_param, 8)["total"],
            }
        )
        print(
            f"publication {label}: {params / 1e6:.2f} M params, snapshot "
            f"{results[-1]['snapshot_ms']:.1f} ms, put {results[-1]['put_ms']:.1f} ms, fetch "
            f"{results[-1]['fetch_ms_same_node']:.1f} ms",
            flush=True,
        )
        del model
    ray.kill(fetcher)
    return results


def network_seconds(num_bytes: float, gigabits_per_second: float) -> float:
    """Time to move one copy between nodes at line rate:  t = 8 bytes / (1e9 Gbit/s)."""
    return 8.0 * float(num_bytes) / (1e9 * float(gigabits_per_second))


def _cell(cells, mode, k, ratio, n):
    for cell in cells:
        if (cell["mode"], cell["k"], cell["ratio"], cell["generators"]) == (mode, k, ratio, n):
            return cell
    return None


def overhead(cell: dict, sync: dict | None) -> dict:
    """Per-step overhead of a trainer-bound cell (1:1, one generator, k = 8): everything the
    pipeline adds to the bound (measured - bound) and its parts. On the trainer's critical path:
    publication (snapshot + ray.put + register) and the hand-off between two queued steps (the
    result's return, the next call's arguments); off it: the driver's bookkeeping of a step
    (two steps are queued on the trainer) and a generator's weight fetch (between decoding steps;
    absorbed by the simulated decoding clock, reported for scale)."""
    step_ms, bound_ms = 1e3 * cell["measured_step_seconds"], 1e3 * cell["bound_step_seconds"]
    critical_ms = cell["publish_ms"] + (cell.get("trainer_gap_ms") or 0.0)
    result = {
        "step_ms": step_ms,
        "bound_ms": bound_ms,
        "excess_ms": step_ms - bound_ms,
        "excess_share": (step_ms - bound_ms) / bound_ms,
        "publish_ms": cell["publish_ms"],
        "trainer_gap_ms": cell.get("trainer_gap_ms"),
        "critical_path_ms": critical_ms,
        "critical_path_share": critical_ms / bound_ms,
        "bookkeeping_ms_off_critical_path": cell["bookkeeping_ms"],
        "generator_fetch_ms": cell["generator_fetch_ms"],
        "sequences_per_step": cell["sequences_per_step"],
        "completion_tokens": cell["completion_tokens"],
    }
    if sync is not None:
        result["sync_step_overhead_ms"] = 1e3 * (sync["measured_step_seconds"] - sync["bound_step_seconds"])
    return result


def _first_saturated(cells: list[dict], ratio) -> int:
    """The smallest generator count of the grid at which the trainer is saturated (G / n <= T)
    for this ratio (the largest count if none is): the targets hold up to there."""
    counts = sorted({c["generators"] for c in cells if c["ratio"] == ratio})
    saturated = [c["generators"] for c in cells if c["ratio"] == ratio and c["trainer_saturated"]]
    return min(saturated) if saturated else counts[-1]


def summarise(cells: list[dict], default_batch: dict) -> dict:
    """The targets, from the cells."""
    k8 = [c for c in cells if c["mode"] == "async" and c["k"] == 8]
    up_to = [c for c in k8 if c["generators"] <= _first_saturated(k8, c["ratio"])]
    sync, async_one = _cell(cells, "sync", 0, 1, 1), _cell(cells, "async", 8, 1, 1)
    summary = {
        "k8_min_efficiency_up_to_saturation": min((c["efficiency"] for c in up_to), default=None),
        "k8_min_efficiency_all": min((c["efficiency"] for c in k8), default=None),
        "k8_cells_below_target": [
            f"{c['ratio']}:1 n={c['generators']}" for c in up_to if c["efficiency"] < TARGET_EFFICIENCY
        ],
    }
    if sync and async_one:
        summary["k8_vs_sync_1to1_one_generator"] = sync["measured_step_seconds"] / async_one["measured_step_seconds"]
        summary["k8_vs_sync_bound_1to1_one_generator"] = sync["bound_step_seconds"] / async_one["measured_step_seconds"]
        summary["overhead"] = overhead(async_one, sync)
        summary["overhead"]["default_batch"] = overhead(default_batch, None)
    summary["targets"] = {"efficiency": TARGET_EFFICIENCY, "speedup": TARGET_SPEEDUP, "overhead_share": TARGET_OVERHEAD}
    return summary


def markdown(payload: dict) -> str:
    cells = payload["cells"]
    lags = sorted({c["k"] for c in cells if c["mode"] == "async"})
    offk = next((c["k"] for c in cells if c["mode"] == "ppo-offpolicy"), None)
    head = [
        "G:T",
        "gens",
        "async bound ms/step",
        "sync",
        *[f"async k={k}" for k in lags],
        f"PPO-off-policy-{offk}",
        "k=8 / sync",
        "k=8 lag mean",
        "k=8 lag max (steps: count)",
    ]
    lines = [
        f"Efficiency = measured step rate / bound (T = {payload['train_seconds'] * 1e3:.0f} ms "
        "per optimiser step; sync bound G + T, async max(G/n, T), off-policy G/n + T; in "
        "brackets, where the lag bound binds: over max(G/n, T, (G + T)/(k + 1))).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for ratio in sorted({c["ratio"] for c in cells}):
        sync = _cell(cells, "sync", 0, ratio, 1)
        for n in sorted({c["generators"] for c in cells if c["mode"] != "sync"}):
            k8 = _cell(cells, "async", 8, ratio, n)
            ref = k8 or _cell(cells, "async", lags[-1], ratio, n)
            if ref is None:
                continue
            effs = [_cell(cells, "async", k, ratio, n) for k in lags]
            off = _cell(cells, "ppo-offpolicy", offk, ratio, n)
            row = [
                f"{ratio}:1",
                str(n),
                f"{ref['bound_step_seconds'] * 1e3:.0f}",
                f"{sync['efficiency']:.2f}" if sync and n == 1 else "",
                *[_efficiency_text(c) for c in effs],
                f"{off['efficiency']:.2f}" if off else "",
                f"{sync['measured_step_seconds'] / k8['measured_step_seconds']:.2f}x" if sync and k8 else "",
                f"{k8['policy_lag_mean']:.2f}" if k8 else "",
                ", ".join(f"{v}: {c}" for v, c in k8["policy_lag_max_counts"].items()) if k8 else "",
            ]
            lines.append("| " + " | ".join(row) + " |")
    summary = payload["summary"]
    over = summary.get("overhead", {})
    lines += [
        "",
        "| publication (model) | parameters | bytes / version | snapshot ms | put ms | "
        "fetch + copy ms (same node) | one copy at 10 Gbit/s, ms | bytes / step, 1 gen | "
        "bytes / step, 8 gens |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in payload["publication"]:
        lines.append(
            f"| {p['model']} | {p['parameters']:,} | {_bytes(p['bytes_per_version'])} | "
            f"{p['snapshot_ms']:.1f} | {p['put_ms']:.1f} | {p['fetch_ms_same_node']:.1f} | "
            f"{p['network_ms_per_copy_10gbit']:.1f} | "
            f"{_bytes(p['bytes_per_step_1_generator'])} | "
            f"{_bytes(p['bytes_per_step_8_generators'])} |"
        )
    if over:
        lines += [
            "",
            _overhead_line("1:1, one generator, k = 8, 64 x 32 tokens", over),
            _overhead_line("the same with TrainConfig's 32 x 16 x 64-token batch", over["default_batch"]),
            f"A synchronous (k = 0) step costs {over['sync_step_overhead_ms']:.1f} ms over "
            "G + T (four Ray hand-offs, publication and the generator's weight load in "
            "series).",
        ]
    lines += ["", *_target_lines(summary)]
    return "\n".join(lines) + "\n"


def _efficiency_text(cell: dict | None) -> str:
    """'0.96', or '0.48 (0.93)' when the lag bound (G + T) / (k + 1) binds: measured over the
    overlap bound, and in brackets over the bound with the lag limit."""
    if cell is None:
        return ""
    text = f"{cell['efficiency']:.2f}"
    if cell["lag_bound_step_seconds"] > cell["bound_step_seconds"] * (1 + 1e-9):
        text += f" ({cell['lag_bound_step_seconds'] / cell['measured_step_seconds']:.2f})"
    return text


def _overhead_line(what: str, over: dict) -> str:
    return (
        f"Per-step overhead ({what}; built-in model): the step takes {over['step_ms']:.1f} ms "
        f"against a {over['bound_ms']:.0f} ms bound, {over['excess_ms']:.1f} ms = "
        f"{100 * over['excess_share']:.1f} % over it; on the trainer's critical path: "
        f"publication {over['publish_ms']:.1f} ms + hand-off between steps "
        f"{over['trainer_gap_ms'] or 0.0:.1f} ms = {100 * over['critical_path_share']:.1f} %; "
        f"off it: driver bookkeeping {over['bookkeeping_ms_off_critical_path']:.1f} ms, "
        f"generator weight fetch {over['generator_fetch_ms']:.1f} ms."
    )


def _target_lines(summary: dict) -> list[str]:
    """One line per target: measured value, target, met or not."""
    targets, lines = summary["targets"], []
    low = summary["k8_min_efficiency_up_to_saturation"]
    if low is not None:
        below = ", ".join(summary["k8_cells_below_target"]) or "none"
        lines.append(
            f"- async k = 8, lowest efficiency up to trainer saturation: {low:.3f} "
            f"(target >= {targets['efficiency']:.2f}: "
            f"{'met' if low >= targets['efficiency'] else 'missed'}; below: {below}); "
            f"over every generator count: {summary['k8_min_efficiency_all']:.3f}"
        )
    speedup = summary.get("k8_vs_sync_1to1_one_generator")
    if speedup is not None:
        over_bound = summary["k8_vs_sync_bound_1to1_one_generator"]
        met = "met" if min(speedup, over_bound) >= targets["speedup"] else "missed"
        lines.append(
            f"- async k = 8 vs sync at 1:1, one generator: {speedup:.2f}x measured sync, "
            f"{over_bound:.2f}x the sync bound G + T (target >= "
            f"{targets['speedup']:.1f}x: {met})"
        )
    over = summary.get("overhead")
    if over:
        share = over["excess_share"]
        lines.append(
            f"- overhead per step at the built-in model's size: {over['excess_ms']:.1f} ms "
            f"= {100 * share:.1f} % of a step (target < {100 * targets['overhead_share']:.0f} %: "
            f"{'met' if share < targets['overhead_share'] else 'missed'})"
        )
    return lines


def _bytes(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.1f} {unit}" if unit != "B" else f"{int(count)} B"
        count /= 1000.0
    return str(count)


def figure(payload: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = payload["cells"]
    ratios = sorted({c["ratio"] for c in cells})
    gens = sorted({c["generators"] for c in cells})
    series = sorted({(c["mode"], c["k"]) for c in cells if c["mode"] != "sync"})
    fig, grid = plt.subplots(2, len(ratios), figsize=(4.2 * len(ratios), 6.6), sharex=True, squeeze=False)
    for column, ratio in enumerate(ratios):
        top, bottom = grid[0][column], grid[1][column]
        sync = _cell(cells, "sync", 0, ratio, 1)
        for mode, k in series:
            chosen = sorted((c["generators"], c) for c in cells if (c["mode"], c["k"], c["ratio"]) == (mode, k, ratio))
            label = f"async k={k}" if mode == "async" else f"PPO-off-policy-{k}"
            style = "-" if mode == "async" else "--"
            xs = [n for n, _ in chosen]
            top.plot(xs, [c["efficiency"] for _, c in chosen], marker="o", label=label, linestyle=style)
            if sync:  # throughput relative to the synchronous bound (G + T per step)
                bottom.plot(
                    xs,
                    [sync["bound_step_seconds"] / c["measured_step_seconds"] for _, c in chosen],
                    marker="o",
                    label=label,
                    linestyle=style,
                )
        if sync:
            top.plot([1], [sync["efficiency"]], marker="s", color="black", linestyle="none", label="sync (k = 0)")
            bound = [
                sync["bound_step_seconds"] / max(sync["generate_seconds"] / n, sync["train_seconds"]) for n in gens
            ]
            bottom.plot(gens, bound, color="black", linestyle=":", label="async bound max(G/n, T)")
            bottom.plot(
                [1],
                [sync["bound_step_seconds"] / sync["measured_step_seconds"]],
                marker="s",
                color="black",
                linestyle="none",
                label="sync (k = 0)",
            )
        top.axhline(TARGET_EFFICIENCY, color="grey", linewidth=0.8, linestyle=":")
        top.set_title(f"generation : training = {ratio}:1")
        top.set_ylim(0.0, 1.1)
        bottom.set_xscale("log", base=2)
        bottom.set_xticks(gens, [str(n) for n in gens])
        bottom.set_xlabel("generators")
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
    grid[0][0].set_ylabel("measured / own analytic bound")
    grid[1][0].set_ylabel("steps/s over the sync bound (G + T)")
    grid[0][-1].legend(fontsize=7, loc="lower right")
    grid[1][-1].legend(fontsize=7, loc="upper left")
    fig.suptitle(
        f"Pipeline overlap on simulated devices (T = {payload['train_seconds'] * 1e3:.0f} ms per optimiser step)",
        fontsize=11,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(
    payload: dict, out: Path, figure_path: Path, command: str, machine_block: dict | None = None
) -> list[str]:
    """Write JSON (with `command` and the machine block: this machine's unless given, when it is
    the measuring run's and the dirty-tree check does not apply), markdown and figure; return the
    lines to print."""
    table = markdown(payload)
    write_result(out, payload, command, indent=2, machine_block=machine_block, new_measurement=machine_block is None)
    write_text(out.with_suffix(".md"), table)
    figure(payload, figure_path)
    return [table, f"wrote {out}, {out.with_suffix('.md')} and {figure_path}"]


def rerender(results: Path, figure_out: Path) -> list[str]:
    """Re-estimate a saved run's cells, then rewrite its JSON, table and figure (the command and
    the machine that measured it are kept)."""
    saved = json.loads(results.read_text())
    saved["cells"] = [reestimate(cell) for cell in saved["cells"]]
    saved["default_batch_cell"] = reestimate(saved["default_batch_cell"])
    saved["summary"] = summarise(saved["cells"], saved["default_batch_cell"])
    return write_outputs(saved, results, figure_out, saved.get("command", ""), saved.get("machine"))


if __name__ == "__main__":  # re-render the table and figure from a results JSON
    for printed in rerender(
        Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS_DIR / "pipeline_efficiency.json",
        Path(sys.argv[2]) if len(sys.argv) > 2 else DOCS_DIR / "pipeline_efficiency.png",
    ):
        print(printed)
