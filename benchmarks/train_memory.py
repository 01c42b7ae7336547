"""Peak memory of one training step against the batch size at a fixed micro-batch, the chunked
log-prob path against materialised logits at a 32k vocabulary, and the step's throughput with and
without micro-batches.

    python -m benchmarks.train_memory            # built-in model 8..512 sequences, 100M model 8..32
    python -m benchmarks.train_memory --quick    # 100M model 8 and 16 sequences, fewer timed steps, one round

Every measurement runs in a fresh Python process (`--child`), so one measurement's freed memory
never hides the next one's peak. Memory is the process's resident set on CPU: the peak during
the measured call (Linux VmHWM, reset through /proc/self/clear_refs just before it) and that peak
minus the resident set just before it (what the call itself added: activations, logits,
gradients), with glibc returning freed tensors to the system at once (CHILD_ENV). The memory measurements run `--jobs` processes at a time (a process's resident set
is its own); the timed ones run alone, the unbatched and micro-batched step alternating over
`--rounds` rounds (the ratio reported is the median of the rounds' ratios). The step measured is the second one: the first allocates AdamW's state and the
gradients on a two-sequence batch. The "100M" model is a freshly initialised Llama-style model
(hidden 768, 8 layers, intermediate 2048, vocabulary 32,000: 106 M parameters), float32.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks.common import RESULTS_DIR, command_line, write_result

RESULT_FILE = RESULTS_DIR / "train_memory.json"
MODELS = {
    "builtin": {"prompt_tokens": 16, "completion_tokens": 48},
    "100M": {
        "prompt_tokens": 8,
        "completion_tokens": 8,
        "hidden": 768,
        "layers": 8,
        "heads": 12,
        "intermediate": 2048,
        "vocab": 32000,
    },
}
GROUP_SIZE = 8
# glibc keeps freed blocks below its dynamic mmap threshold (up to 32 MiB) in the heap, so the
# resident set would count tensors already freed; a fixed 128 KiB threshold returns them.
CHILD_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072"}


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def _measure(call) -> dict:
    """Peak resident set during `call()` and what it added to the resident set before it, MiB."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # reset VmHWM to the current resident set
    before = _rss_kib("VmRSS")
    started = time.perf_counter()
    call()
    seconds = time.perf_counter() - started
    peak = _rss_kib("VmHWM")
    return {"peak_mib": peak / 1024, "added_mib": (peak - before) / 1024, "seconds": seconds}


def _model(name: str):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from scalerl.models.policy import build_tiny_model

    if name == "builtin":
        return build_tiny_model(seed=0)[0]
    shape = MODELS[name]
    config = LlamaConfig(
        vocab_size=shape["vocab"],
        hidden_size=shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["heads"],
        intermediate_size=shape["intermediate"],
        max_position_embeddings=256,
        tie_word_embeddings=False,
        pad_token_id=0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return LlamaForCausalLM(config)


def _rollouts(count: int, vocab: int, prompt_tokens: int, completion_tokens: int, seed: int):
    """`count` random sequences in groups of GROUP_SIZE, rewards alternating +1 / -1 (no group is
    filtered), completion lengths ragged between half and all of completion_tokens."""
    import random

    from scalerl.tasks.rollout import Rollout

    rng = random.Random(seed)
    rollouts = []
    for index in range(count):
        length = rng.randint(max(1, completion_tokens // 2), completion_tokens)
        rollouts.append(
            Rollout(
                prompt_index=index // GROUP_SIZE,
                group_index=index // GROUP_SIZE,
                prompt_token_ids=tuple(rng.randrange(4, vocab) for _ in range(prompt_tokens)),
                completion_token_ids=tuple(rng.randrange(4, vocab) for _ in range(length)),
                generator_logprobs=tuple(-rng.uniform(5, 11) for _ in range(length)),
                token_policy_versions=(0,) * length,
                reward=1.0 if index % 2 else -1.0,
                truncated=False,
                interrupted=False,
                completion_text="",
            )
        )
    return rollouts


def child_step(spec: dict) -> dict:
    """One measured train_step of spec["batch"] sequences (spec: model, batch, micro_batch_size,
    logprob_chunk_size, timed_steps)."""
    import torch

    from scalerl.train.batch.packed_rollouts import pack_rollouts
    from scalerl.train.config.step_recipe import step_recipe
    from scalerl.train.config.train_config import TrainConfig
    from scalerl.train.train_step import build_optimizer, build_scheduler, train_step

    torch.set_num_threads(spec.get("threads", 1))
    model = _model(spec["model"])
    shape = MODELS[spec["model"]]
    vocab = model.config.vocab_size
    config = TrainConfig().with_overrides(
        [
            f"train.micro_batch_size={spec['micro_batch_size']}",
            f"train.logprob_chunk_size={spec['logprob_chunk_size']}",
            "warmup_steps=0",
            "rl.min_kept_prompts=1",
        ]
    )
    optimizer = build_optimizer(model, config.optim)
    scheduler = build_scheduler(optimizer, 0)
    recipe = step_recipe(config)
    train_step(
        model, optimizer, scheduler, pack_rollouts(_rollouts(2, vocab, 4, 4, seed=1)), recipe
    )  # AdamW state, grads
    rollouts = pack_rollouts(
        _rollouts(spec["batch"], vocab, shape["prompt_tokens"], shape["completion_tokens"], seed=2)
    )
    optimizer.zero_grad(set_to_none=False)
    result = _measure(lambda: train_step(model, optimizer, scheduler, rollouts, recipe))
    seconds = [result["seconds"]]
    for _ in range(spec.get("timed_steps", 0)):
        started = time.perf_counter()
        train_step(model, optimizer, scheduler, rollouts, recipe)
        seconds.append(time.perf_counter() - started)
    tokens = int(rollouts.prompt_offsets[-1] + rollouts.completion_offsets[-1])
    return {
        **result,
        "step_seconds": seconds,
        "tokens": tokens,
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def child_logprobs(spec: dict) -> dict:
    """Log-probs of spec["sequences"] x spec["length"] tokens through a spec["vocab"] LM head from
    fixed hidden states, forward and backward, chunked (logprob_chunk_size) or materialised (0)."""
    import torch

    from scalerl.models.forward import hidden_token_logprobs

    torch.set_num_threads(spec.get("threads", 1))
    generator = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(spec["hidden"], spec["vocab"], bias=False)
    holder = type("Holder", (), {"get_output_embeddings": lambda self: head})()
    hidden = torch.randn(spec["sequences"], spec["length"], spec["hidden"], generator=generator, requires_grad=True)
    tokens = torch.randint(0, spec["vocab"], (spec["sequences"], spec["length"]), generator=generator)

    def forward_backward():
        logprobs, _ = hidden_token_logprobs(
            holder, hidden, tokens, fp32_head=True, chunk_size=spec["logprob_chunk_size"]
        )
        logprobs.sum().backward()

    head.weight.grad = torch.zeros_like(head.weight)  # the gradient buffers exist before the measure
    hidden.grad = torch.zeros_like(hidden)
    return _measure(forward_backward)


def _run_child(kind: str, spec: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.train_memory", "--child", kind, json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=3600,
        env={**os.environ, **CHILD_ENV},
    )
    if done.returncode != 0:
        raise SystemExit(f"error: the {kind} measurement {spec} failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{kind} {spec}: {', '.join(f'{k}={v}' for k, v in result.items() if k != 'step_seconds')}", flush=True)
    return {**spec, **result}


def _flatness(rows: list[dict], key: str) -> float:
    """max / min of `key` over the rows: 1.0 is perfectly flat."""
    values = [row[key] for row in rows]
    return max(values) / min(values)


def alternating_throughput(rounds: int, timed: int, micro_batch_size: int) -> dict[str, list[dict]]:
    """{label: one child's row per round}: the unbatched and the micro-batched step, each in its
    own process, alone, their order swapped every round, so that a slow spell of the shared
    machine falls on both (one pair gave 0.95x and 0.82x on the same quiet machine)."""
    pair = (("unbatched", 0), ("micro-batched", micro_batch_size))
    rows = {label: [] for label, _ in pair}
    for index in range(rounds):
        for label, micro in pair if index % 2 == 0 else pair[::-1]:
            rows[label].append(
                _run_child(
                    "step",
                    {
                        "model": "builtin",
                        "batch": 64,
                        "micro_batch_size": micro,
                        "logprob_chunk_size": 0,
                        "timed_steps": timed,
                    },
                )
            )
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer batch sizes and timed steps")
    parser.add_argument("--micro-batch-size", type=int, default=8)
    parser.add_argument("--chunk", type=int, default=8, help="train.logprob_chunk_size of the memory rows")
    parser.add_argument("--jobs", type=int, default=2, help="memory measurements run at once")
    parser.add_argument(
        "--rounds", type=int, default=None, help="alternating rounds of the throughput pair (default 5; quick 1)"
    )
    parser.add_argument("--out", default=str(RESULT_FILE))
    parser.add_argument("--child", nargs=2, metavar=("KIND", "SPEC"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, spec = args.child
        print(json.dumps((child_step if kind == "step" else child_logprobs)(json.loads(spec))))
        return
    load_before = os.getloadavg()
    batches = {"builtin": [8, 32, 128, 512], "100M": [8, 16] if args.quick else [8, 16, 32]}
    head = {"sequences": args.micro_batch_size, "length": 256, "hidden": 768, "vocab": 32000}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        memory_jobs = {
            name: [
                pool.submit(
                    _run_child,
                    "step",
                    {
                        "model": name,
                        "batch": batch,
                        "micro_batch_size": args.micro_batch_size,
                        "logprob_chunk_size": args.chunk,
                    },
                )
                for batch in sizes
            ]
            for name, sizes in batches.items()
        }
        logprob_jobs = {
            label: pool.submit(_run_child, "logprobs", {**head, "logprob_chunk_size": chunk})
            for label, chunk in (("materialised", 0), ("chunked", 16))
        }
        memory = {name: [job.result() for job in jobs] for name, jobs in memory_jobs.items()}
        logprobs = {label: job.result() for label, job in logprob_jobs.items()}
    timed = 3 if args.quick else 7
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 5)
    throughput = alternating_throughput(rounds, timed, args.micro_batch_size)
    round_medians = {
        label: [statistics.median(row["step_seconds"][1:]) for row in rows] for label, rows in throughput.items()
    }
    ratios = [unbatched / micro for unbatched, micro in zip(round_medians["unbatched"], round_medians["micro-batched"])]
    medians = {label: statistics.median(values) for label, values in round_medians.items()}
    summary = {
        "peak_flatness": {name: _flatness(rows, "peak_mib") for name, rows in memory.items()},
        "added_flatness": {name: _flatness(rows, "added_mib") for name, rows in memory.items()},
        "logprob_memory_ratio": logprobs["materialised"]["added_mib"] / logprobs["chunked"]["added_mib"],
        "micro_vs_unbatched_throughput": statistics.median(ratios),
        "throughput_ratio_by_round": ratios,
    }
    payload = {
        "setup": {
            "child_env": CHILD_ENV,
            "micro_batch_size": args.micro_batch_size,
            "logprob_chunk_size": args.chunk,
            "group_size": GROUP_SIZE,
            "models": MODELS,
            "logprob_head": head,
            "quick": args.quick,
            "throughput_batch": 64,
            "timed_steps": timed,
            "throughput_rounds": rounds,
            "threads": 1,
        },
        "memory": memory,
        "logprobs": logprobs,
        "throughput": throughput,
        "median_step_seconds": medians,
        "summary": summary,
    }
    path = write_result(args.out, payload, command_line("train_memory", argv), load_before)
    print(json.dumps(summary, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
