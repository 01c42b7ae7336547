"""Benchmark: what handing a batch of rollouts to another actor costs, as Python tuples and packed
into arrays (scalerl.train.batch.packed_rollouts), and the pipeline's per-step overhead with the packed path.

1. The hand-off of TrainConfig's default batch (32 prompts x 16 generations, 64 completion
   tokens): a Ray actor call that receives the batch and turns it into Rollouts, timed from the
   call to its return, as the trainer receives a step's batch; the list of Rollouts (pickled
   object by object) against a PackedRollouts (numpy buffers, out of band), plus the packing
   (generator side) and unpacking (trainer side) on their own.
2. The default-batch cell of benchmarks/pipeline_efficiency.py (async k = 8, 1:1, one generator,
   simulated devices, T = 0.15 s): the step's excess over its bound and the trainer's hand-off
   between two steps, with the code as it is.

Prints a table and writes benchmarks/results/pipeline_transport.json. A script, not a test.

    python -m benchmarks.pipeline_transport            # ~2 minutes on 2 cores
    python -m benchmarks.pipeline_transport --quick    # smoke run
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import RESULTS_DIR, command_line, write_result

RESULTS = RESULTS_DIR / "pipeline_transport.json"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--generations", type=int, default=16)
    parser.add_argument("--completion-tokens", type=int, default=64)
    parser.add_argument("--prompt-tokens", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=30, help="timed hand-offs per form")
    parser.add_argument("--train-seconds", type=float, default=0.15, help="T of the pipeline cell")
    parser.add_argument("--intervals", type=int, default=16, help="timed steps of the pipeline cell")
    parser.add_argument("--no-cell", action="store_true", help="only the hand-off, not the pipeline cell")
    parser.add_argument("--workdir", default="runs/bench_pipeline_transport")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 repeats, a short cell")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.intervals = 3, 4
    return args


def batch_of_rollouts(prompts: int, generations: int, completion_tokens: int, prompt_tokens: int, seed: int = 0):
    """A realistic batch: random token ids, float64 log-probs, a version change mid-sequence,
    a few forced tokens, a completion text per sequence."""
    import numpy as np

    from scalerl.tasks.rollout import Rollout

    rng = np.random.default_rng(seed)
    rollouts = []
    for group in range(prompts):
        prompt = tuple(int(t) for t in rng.integers(3, 40, prompt_tokens))
        for _ in range(generations):
            length = int(rng.integers(completion_tokens // 2, completion_tokens + 1))
            cut = int(rng.integers(0, length + 1))
            rollouts.append(
                Rollout(
                    prompt_index=group,
                    group_index=group,
                    prompt_token_ids=prompt,
                    completion_token_ids=tuple(int(t) for t in rng.integers(3, 40, length)),
                    generator_logprobs=tuple(float(x) for x in -rng.exponential(1.0, length)),
                    token_policy_versions=(4,) * cut + (5,) * (length - cut),
                    reward=float(rng.choice([-1.0, 1.0])),
                    truncated=length == completion_tokens,
                    interrupted=False,
                    completion_text="x" * length,
                    loss_mask=tuple(int(m) for m in rng.random(length) > 0.05),
                )
            )
    return rollouts


def handoff_ms(rollouts, repeats: int, generations: int) -> dict:
    """Median ms of an actor call that receives the batch and makes Rollouts of it, per form;
    and of packing and unpacking alone, in this process."""
    import ray

    from scalerl.train.batch.packed_rollouts import pack_rollouts, unpack_rollouts

    @ray.remote(num_cpus=0)
    class Receiver:
        def take(self, batch) -> int:
            return len(list(batch) if isinstance(batch, list) else unpack_rollouts(batch))

    receiver = Receiver.remote()
    ray.get(receiver.take.remote([]))
    forms = {"tuples": lambda: list(rollouts), "packed": lambda: pack_rollouts(rollouts)}
    timings = {name: [] for name in forms}
    for _ in range(repeats):
        for name, make in forms.items():
            batch = make()
            started = time.perf_counter()
            assert ray.get(receiver.take.remote(batch)) == len(rollouts)
            timings[name].append(time.perf_counter() - started)
    ray.kill(receiver)
    return {
        "handoff_ms": {name: 1e3 * statistics.median(t) for name, t in timings.items()},
        "cpu_ms": cpu_ms(rollouts, repeats, generations),
        "packed_bytes": pack_rollouts(rollouts).num_bytes,
    }


def decoded_grid(rollouts, generations: int):
    """The batch as the decoder records it: a TokenGrid holding every rollout's completion, and
    the per-prompt / per-sequence fields pack_decoded takes."""
    from scalerl.train.batch.packed_rollouts import TokenGrid

    width = max(r.num_completion_tokens for r in rollouts)
    grid = TokenGrid.empty(len(rollouts), width)
    for column in range(width):
        rows = [i for i, r in enumerate(rollouts) if r.num_completion_tokens > column]
        grid.write(
            rows,
            [rollouts[i].completion_token_ids[column] for i in rows],
            [rollouts[i].generator_logprobs[column] for i in rows],
            0,
            [rollouts[i].loss_mask[column] for i in rows],
        )
        grid.versions[rows, column] = [rollouts[i].token_policy_versions[column] for i in rows]
    prompts = [r.prompt_token_ids for r in rollouts[::generations]]
    fields = {
        "prompt_ids": prompts,
        "prompt_indices": [r.prompt_index for r in rollouts[::generations]],
        "num_generations": generations,
        "texts": [r.completion_text for r in rollouts],
        "truncated": [r.truncated for r in rollouts],
        "interrupted": [r.interrupted for r in rollouts],
    }
    return grid, fields


def cpu_ms(rollouts, repeats: int, generations: int) -> dict:
    """Median CPU ms (this process's, so a busy shared machine inflates it less than wall time)
    of each side of a hand-off: the sender's pickling (tuples) or packing + pickling (packed),
    the receiver's unpickling (tuples) or unpickling + unpacking (packed); and packing the same
    batch from the decoder's record (pack_decoded, what the pipeline's generator does)."""
    import pickle

    from scalerl.train.batch.packed_rollouts import pack_decoded, pack_rollouts, unpack_rollouts

    grid, fields = decoded_grid(rollouts, generations)

    def from_grid():
        return pack_decoded(
            grid,
            fields["prompt_ids"],
            fields["prompt_indices"],
            fields["num_generations"],
            fields["texts"],
            truncated=fields["truncated"],
            interrupted=fields["interrupted"],
        )

    decoded = from_grid()
    expected = pack_rollouts(rollouts)
    import numpy as np

    if not all(
        np.array_equal(getattr(decoded, name), getattr(expected, name))
        for name in expected.__dataclass_fields__
        if name != "reward"
    ):
        raise AssertionError("packing from the decoder's grid differs from packing the Rollouts")

    def clock(work) -> float:
        times = []
        for _ in range(repeats):
            started = time.process_time()
            work()
            times.append(time.process_time() - started)
        return 1e3 * statistics.median(times)

    tuples = pickle.dumps(list(rollouts), protocol=5)
    packed = pack_rollouts(rollouts)
    buffers: list = []
    packed_pickle = pickle.dumps(packed, protocol=5, buffer_callback=buffers.append)
    return {
        "tuples_send": clock(lambda: pickle.dumps(list(rollouts), protocol=5)),
        "tuples_receive": clock(lambda: pickle.loads(tuples)),
        "pack": clock(lambda: pack_rollouts(rollouts)),
        "pack_decoded": clock(from_grid),
        "packed_send": clock(
            lambda: pickle.dumps(pack_rollouts(rollouts), protocol=5, buffer_callback=lambda _b: None)
        ),
        "packed_forward": clock(lambda: pickle.dumps(packed, protocol=5, buffer_callback=lambda _b: None)),
        "unpack": clock(lambda: unpack_rollouts(packed)),
        "packed_receive": clock(lambda: unpack_rollouts(pickle.loads(packed_pickle, buffers=buffers))),
    }


def default_batch_cell(args) -> dict:
    """pipeline_efficiency's default-batch cell (async k = 8, 1:1, one generator, 32 x 16 x 64)."""
    from benchmarks.pipeline_efficiency import DEFAULT_BATCH, run_cell
    from benchmarks.pipeline_efficiency_report import overhead

    cell = run_cell(
        {"mode": "async", "k": 8, "ratio": 1, "generators": 1},
        args,
        Path(args.workdir),
        DEFAULT_BATCH,
        args.completion_tokens,
    )
    return {"cell": cell, "overhead": overhead(cell, None)}


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ["RAY_worker_niceness"] = "0"
    import ray

    load_before = os.getloadavg()
    ray.init(
        num_cpus=max(2, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    try:
        rollouts = batch_of_rollouts(args.prompts, args.generations, args.completion_tokens, args.prompt_tokens)
        handoff = handoff_ms(rollouts, args.repeats, args.generations)
        cell = None if args.no_cell else default_batch_cell(args)
    finally:
        ray.shutdown()
    payload = {
        "benchmark": "pipeline_transport",
        "quick": args.quick,
        "batch": {
            "prompts": args.prompts,
            "generations": args.generations,
            "completion_tokens_max": args.completion_tokens,
            "prompt_tokens": args.prompt_tokens,
            "sequences": len(rollouts),
            "completion_tokens": sum(r.num_completion_tokens for r in rollouts),
        },
        "repeats": args.repeats,
        **handoff,
        "default_batch": cell,
    }
    cpu = handoff["cpu_ms"]
    print(
        f"hand-off of {len(rollouts)} rollouts (actor call, wall): tuples {handoff['handoff_ms']['tuples']:.1f} ms, "
        f"packed {handoff['handoff_ms']['packed']:.1f} ms ({handoff['packed_bytes'] / 1e6:.2f} MB)"
    )
    print("CPU ms: " + ", ".join(f"{name} {value:.2f}" for name, value in cpu.items()))
    if cell:
        over = cell["overhead"]
        print(
            f"default-batch cell: {over['step_ms']:.1f} ms per step against a {over['bound_ms']:.0f} ms bound "
            f"({100 * over['excess_share']:.1f} % over); trainer hand-off {over['trainer_gap_ms'] or 0:.1f} ms, "
            f"publication {over['publish_ms']:.1f} ms, driver bookkeeping "
            f"{over['bookkeeping_ms_off_critical_path']:.1f} ms"
        )
    write_result(Path(args.out), payload, command_line("pipeline_transport", argv), load_before)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
