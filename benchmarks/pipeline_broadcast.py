"""Benchmark: publishing one weight version by collective broadcast against the object store.

Two Ray actors on this machine stand for the trainer and one generator. Per model size (synthetic
bf16 models of 16 M-parameter tensors, as pipeline_efficiency's publication table):

- broadcast: scalerl.distributed.weight_sync.collective over a gloo process group of the two actors,
  dtype-grouped buckets of --bucket-mb; seconds from the start of the send until the generator has
  copied the last bucket into its own tensors;
- wire time: the version's bytes over the gloo link's bandwidth, measured first by broadcasting
  one raw buffer of --link-mb (no bucketing, no copies): the floor a broadcast can reach here;
- object store: what weight_sync/object_store.py does, snapshot + ray.put on the trainer, then ray.get and
  the copy into the generator's tensors (load_snapshot).

Prints a table and writes benchmarks/results/pipeline_broadcast.json (its table is rendered into
docs/distributed.md). A script, not a test. On the shared 2-core machine the 1 B size needs ~8 GB
of memory and a few minutes.

    python -m benchmarks.pipeline_broadcast                      # 125 M, 350 M, 1 B
    python -m benchmarks.pipeline_broadcast --quick              # smoke run: 4 M parameters
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import RESULTS_DIR, command_line, write_result

RESULTS = RESULTS_DIR / "pipeline_broadcast.json"
TARGET_WIRE_RATIO = 1.3  # broadcast <= 1.3 x the wire time
TARGET_SPEEDUP = 3.0  # broadcast >= 3 x faster than the object store at 1 B


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="125e6,350e6,1e9", help="parameters per model (bf16)")
    parser.add_argument("--bucket-mb", type=float, default=256.0, help="broadcast bucket size, MiB")
    parser.add_argument("--link-mb", type=float, default=512.0, help="raw buffer that measures the link, MiB")
    parser.add_argument("--repeats", type=int, default=3, help="versions sent per size and path")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--quick", action="store_true", help="smoke run: one 4 M-parameter size, small link buffer")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.link_mb, args.repeats, args.bucket_mb = "4e6", 16.0, 2, 4.0
    return args


class Side:
    """One end of the link (rank 0 the trainer, rank 1 a generator), run as a Ray actor."""

    def __init__(self, rank: int) -> None:
        import torch

        torch.set_num_threads(1)
        self.rank = rank
        self.model = None

    def join(self, address: str) -> None:
        from scalerl.distributed.weight_sync.collective import join_group

        self.group = join_group(self.rank, 2, address, "gloo")

    def build(self, parameters: int) -> int:
        """A synthetic bf16 model of `parameters` (16 M per tensor); the generator's starts at zero."""
        import torch

        self.model = None
        chunk, left, module = 16 * 2**20, int(parameters), torch.nn.ParameterList()
        generator = torch.Generator().manual_seed(0)
        while left > 0:
            size = min(chunk, left)
            values = torch.randn(size, generator=generator) if self.rank == 0 else torch.zeros(size)
            module.append(torch.nn.Parameter(values.to(torch.bfloat16), requires_grad=False))
            left -= size
        self.model = module
        return sum(p.numel() * p.element_size() for p in module.parameters())

    def link(self, num_bytes: int) -> float:
        """Seconds to broadcast one raw uint8 buffer of `num_bytes` from rank 0."""
        import torch

        buffer = (
            torch.ones(int(num_bytes), dtype=torch.uint8)
            if self.rank == 0
            else torch.empty(int(num_bytes), dtype=torch.uint8)
        )
        self._barrier()
        started = time.perf_counter()
        self.group.broadcast(buffer, 0)
        return time.perf_counter() - started

    def _barrier(self) -> None:
        """Both ends start the timed part together (a one-element broadcast)."""
        import torch

        self.group.broadcast(torch.zeros(1), 0)

    def broadcast(self, bucket_mb: float) -> float:
        """Seconds for one version by broadcast (send on rank 0, receive + copy on rank 1)."""
        from scalerl.distributed.weight_sync.collective import model_bucket_plan, receive_weights, send_weights

        state = self.model.state_dict()
        plan = model_bucket_plan(state, bucket_mb)
        self._barrier()
        started = time.perf_counter()
        (send_weights if self.rank == 0 else receive_weights)(state, plan, self.group)
        return time.perf_counter() - started

    def publish(self) -> tuple[list, float]:
        """The object-store path's trainer side: snapshot + ray.put; ([ref], seconds)."""
        import ray

        from scalerl.distributed.weight_sync.object_store import snapshot_weights

        started = time.perf_counter()
        ref = ray.put(snapshot_weights(self.model, 1))
        return [ref], time.perf_counter() - started

    def fetch(self, wrapped: list) -> float:
        """The object-store path's generator side: ray.get + copy into the model's tensors."""
        import ray

        from scalerl.distributed.weight_sync.object_store import load_snapshot

        started = time.perf_counter()
        load_snapshot(self.model, ray.get(wrapped[0]))
        return time.perf_counter() - started

    def checksum(self) -> float:
        return float(sum(p.float().sum().item() for p in self.model.parameters()))


def measure_size(sides, parameters: int, args) -> dict:
    """Broadcast and object-store seconds per version for one model size."""
    import ray

    trainer, generator = sides
    num_bytes = ray.get([side.build.remote(parameters) for side in sides])[0]
    broadcast_s, publish_s, fetch_s = [], [], []
    for _ in range(args.repeats):
        broadcast_s.append(max(ray.get([side.broadcast.remote(args.bucket_mb) for side in sides])))
    same = len(set(ray.get([side.checksum.remote() for side in sides]))) == 1
    for _ in range(args.repeats):
        wrapped, put_seconds = ray.get(trainer.publish.remote())
        fetch_s.append(ray.get(generator.fetch.remote(wrapped)))
        publish_s.append(put_seconds)
        del wrapped
    return {
        "parameters": int(parameters),
        "bytes_per_version": int(num_bytes),
        "broadcast_s": statistics.median(broadcast_s),
        "broadcast_runs_s": broadcast_s,
        "object_store_publish_s": statistics.median(publish_s),
        "object_store_fetch_s": statistics.median(fetch_s),
        "object_store_s": statistics.median(publish_s) + statistics.median(fetch_s),
        "received_equals_sent": same,
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ["RAY_worker_niceness"] = "0"
    import ray

    from scalerl.distributed.weight_sync.collective import free_address

    load_before = os.getloadavg()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the actors need not import benchmarks/
        side = ray.remote(num_cpus=0)(Side)
        sides = [side.remote(0), side.remote(1)]
        address = free_address()
        ray.get([s.join.remote(address) for s in sides])
        link_bytes = int(args.link_mb * 2**20)
        link_s = [max(ray.get([s.link.remote(link_bytes) for s in sides])) for _ in range(args.repeats)]
        bandwidth = link_bytes / statistics.median(link_s)
        print(
            f"gloo link: {bandwidth / 1e9:.2f} GB/s ({args.link_mb:.0f} MiB in "
            f"{1e3 * statistics.median(link_s):.0f} ms)",
            flush=True,
        )
        rows = []
        for size in args.sizes.split(","):
            row = measure_size(sides, int(float(size)), args)
            row["wire_s"] = row["bytes_per_version"] / bandwidth
            row["broadcast_over_wire"] = row["broadcast_s"] / row["wire_s"]
            row["object_store_over_broadcast"] = row["object_store_s"] / row["broadcast_s"]
            rows.append(row)
            print(
                f"{row['parameters'] / 1e6:.0f} M bf16 ({row['bytes_per_version'] / 1e9:.2f} GB): broadcast "
                f"{row['broadcast_s']:.2f} s = {row['broadcast_over_wire']:.2f} x wire {row['wire_s']:.2f} s; "
                f"object store {row['object_store_s']:.2f} s (put {row['object_store_publish_s']:.2f} + fetch "
                f"{row['object_store_fetch_s']:.2f}) = {row['object_store_over_broadcast']:.1f} x broadcast",
                flush=True,
            )
    finally:
        ray.shutdown()
    payload = {
        "benchmark": "pipeline_broadcast",
        "quick": args.quick,
        "bucket_mb": args.bucket_mb,
        "repeats": args.repeats,
        "link": {"bytes": link_bytes, "seconds": link_s, "bytes_per_second": bandwidth},
        "sizes": rows,
        "targets": {"broadcast_over_wire": TARGET_WIRE_RATIO, "object_store_over_broadcast_at_1b": TARGET_SPEEDUP},
    }
    write_result(Path(args.out), payload, command_line("pipeline_broadcast", argv), load_before)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
