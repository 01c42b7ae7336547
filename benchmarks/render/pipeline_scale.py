"""Renderers of the pipeline-at-scale results: weight publication by broadcast against the object
store (pipeline_broadcast.json) and the rollouts' hand-off as tuples against packed arrays
(pipeline_transport.json). Each is a function of the loaded JSON (see render.py)."""

from __future__ import annotations

from benchmarks.pipeline_efficiency_report import TARGET_OVERHEAD
from benchmarks.render.tables import machine_text


def broadcast_table(results: dict) -> str:
    """One row per model size: broadcast, wire time, object store, and the two ratios."""
    link = results["link"]
    lines = [
        f"Per weight version, trainer to one generator (two Ray actors on this machine, gloo; buckets of "
        f"{results['bucket_mb']:.0f} MiB; median of {results['repeats']}). Wire time = bytes / the gloo link's "
        f"bandwidth measured here, {link['bytes_per_second'] / 1e9:.2f} GB/s "
        f"({link['bytes'] / 2**20:.0f} MiB raw broadcast).",
        "",
        "| model (bf16) | bytes / version | broadcast s | wire s | broadcast / wire | object store s "
        "(snapshot + put; get + copy) | object store / broadcast | received = sent |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in results["sizes"]:
        lines.append(
            f"| {row['parameters'] / 1e6:,.0f} M | {row['bytes_per_version'] / 1e9:.2f} GB | "
            f"{row['broadcast_s']:.2f} | {row['wire_s']:.2f} | {row['broadcast_over_wire']:.2f} | "
            f"{row['object_store_s']:.2f} ({row['object_store_publish_s']:.2f}; "
            f"{row['object_store_fetch_s']:.2f}) | {row['object_store_over_broadcast']:.1f}x | "
            f"{'yes' if row['received_equals_sent'] else 'NO'} |"
        )
    lines += ["", machine_text(results)]
    return "\n".join(lines)


def _target_text(excess_share: float) -> str:
    """'target < 5 %: met' (or 'missed'): a step's overhead against pipeline_efficiency's target."""
    met = "met" if excess_share < TARGET_OVERHEAD else "missed"
    return f"target < {100 * TARGET_OVERHEAD:.0f} %: {met}"


def transport_table(results: dict) -> str:
    """The hand-off of one batch, tuples against packed, and the default-batch pipeline cell."""
    batch, cpu = results["batch"], results["cpu_ms"]
    lines = [
        f"One step's batch ({batch['prompts']} x {batch['generations']} = {batch['sequences']} sequences, "
        f"{batch['completion_tokens']:,} completion tokens; packed {results['packed_bytes'] / 1e6:.2f} MB); "
        f"medians of {results['repeats']}.",
        "",
        "| | Python tuples | packed arrays |",
        "|---|---|---|",
        f"| actor call that receives the batch and makes Rollouts of it, wall ms | "
        f"{results['handoff_ms']['tuples']:.1f} | {results['handoff_ms']['packed']:.1f} |",
        f"| sender CPU ms (pickle; pack + pickle) | {cpu['tuples_send']:.2f} | {cpu['packed_send']:.2f} |",
        f"| receiver CPU ms (unpickle; unpickle + unpack) | {cpu['tuples_receive']:.2f} | "
        f"{cpu['packed_receive']:.2f} |",
        f"| driver forwarding a received batch to the trainer, CPU ms | {cpu['tuples_send']:.2f} | "
        f"{cpu['packed_forward']:.2f} |",
    ]
    if "pack_decoded" in cpu:
        lines += [
            "",
            f"Packing the batch, CPU ms: from its Rollouts {cpu['pack']:.2f}; from the decoder's record "
            f"(the token grid the pipeline's generator fills as it decodes: `packed_rollouts.pack_decoded`) "
            f"{cpu['pack_decoded']:.2f}.",
        ]
    cell = results.get("default_batch")
    if cell:
        over = cell["overhead"]
        lines += [
            "",
            f"The pipeline at that batch (async k = 8, 1:1, one generator, simulated devices): "
            f"{over['step_ms']:.1f} ms per step against a {over['bound_ms']:.0f} ms bound, "
            f"{100 * over['excess_share']:.1f} % over it ({_target_text(over['excess_share'])}); "
            "trainer hand-off between steps "
            f"{over['trainer_gap_ms'] or 0.0:.1f} ms, publication {over['publish_ms']:.1f} ms, "
            f"driver bookkeeping {over['bookkeeping_ms_off_critical_path']:.1f} ms.",
        ]
    lines += ["", machine_text(results)]
    return "\n".join(lines)
