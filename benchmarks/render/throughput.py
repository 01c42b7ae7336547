"""Markdown rendering of the trainer-throughput benchmark's report (pure functions on its dict)."""

from __future__ import annotations

TOKENS_PER_SECOND_TARGET = 2.0  # scalerl / TRL generated tokens per second


NOTES = """How to read this:
- "scalerl" runs the trainer configured to do exactly TRL's work (every sequence trained, plain
  truncation, token-level loss, symmetric clip 0.2, group-std advantages): the like-for-like ratio.
- "scalerl (ScaleRL recipe)" is the ScaleRL preset as shipped: its zero-variance filter drops the
  groups whose rewards are all equal before the forward/backward pass. With beta = 0 those groups
  have zero advantage, so their gradient is zero in TRL too; TRL still pays for them.
- Generated tokens are the real completion tokens up to and including EOS (no padding), counted
  from the rollouts (scalerl) and from the completion ids handed to the reward function (TRL).
- The machine's 2 CPU cores are shared with other work: rounds alternate the order of the
  trainers and the median round is shown; every round's rate is in the JSON."""


def markdown_table(results: dict) -> str:
    lines = [
        "| trainer | steps/s | generated tokens/s | mean tokens/step | peak RSS (MiB) | mean train reward |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['steps_per_second']:.2f} | {r['generated_tokens_per_second']:.0f} | "
            f"{r['generated_tokens'] / r['timed_steps']:.0f} | {r['peak_rss_mib']:.0f} | "
            f"{r['mean_train_reward']:+.3f} |"
        )
    return "\n".join(lines)


def hot_spots_markdown(trainer: str, profile: dict, top: int = 12) -> str:
    lines = [
        f"cProfile of {profile['profiled_steps']} {trainer} steps ({profile['total_seconds']:.2f} s):",
        "",
        "| phase | cumulative s |",
        "|---|---|",
    ]
    lines += [f"| {name} | {seconds:.2f} |" for name, seconds in profile["phase_cumulative_seconds"].items()]
    lines += ["", "| function | calls | own s | share |", "|---|---|---|---|"]
    lines += [
        f"| `{h['function']}` | {h['calls']} | {h['own_seconds']:.2f} | {h['own_fraction']:.0%} |"
        for h in profile["hot_spots_by_own_time"][:top]
    ]
    return "\n".join(lines)


def recipe_ratio_sentence(report: dict) -> str:
    ratio = report.get("recipe_tokens_per_second_ratio")
    if ratio is None:
        return ""
    return (
        f" With the ScaleRL recipe (zero-variance filter): **{ratio:.2f}x** generated tokens per "
        f"second (per round: {_rounded(report['rounds_recipe_tokens_per_second_ratio'])})."
    )


def _rounded(values: list[float]) -> str:
    return ", ".join(f"{value:.2f}" for value in values)


def report_markdown(report: dict) -> str:
    setup = report["setup"]
    parts = [
        "# Trainer throughput: scalerl vs TRL GRPOTrainer",
        "",
        f"{setup['prompts']} prompts x {setup['generations']} generations per step, max "
        f"{setup['max_new_tokens']} new tokens, {setup['timed_steps']} timed steps after "
        f"{setup['warmup_steps']} warm-up steps, {setup['threads']} torch thread(s), CPU, "
        f"start: {setup['start']}, scalerl recipe: {setup['recipe']}; each trainer in its own "
        f"process, {setup['rounds']} round(s) in alternating order, the median round shown.",
        "",
        markdown_table(report["results"]),
        "",
        f"**scalerl / TRL generated tokens per second: {report['tokens_per_second_ratio']:.2f}x** "
        f"(median of the per-round ratios {_rounded(report['rounds_tokens_per_second_ratio'])}; "
        f"target >= {TOKENS_PER_SECOND_TARGET:.0f}x: {'met' if report['target_met'] else 'not met'}); "
        f"ratio of the median rounds: {report['ratio_of_median_rounds']:.2f}x tokens/s, "
        f"{report['steps_per_second_ratio']:.2f}x steps/s." + recipe_ratio_sentence(report),
        "",
        f"Load average (1, 5, 15 min) before: {report['machine']['load_average_before']}, after: "
        f"{report['machine']['load_average_after']} on {report['machine']['cpus']} CPUs (shared).",
    ]
    parts += ["", NOTES]
    for trainer, profile in report["profiles"].items():
        parts += ["", f"## Where {trainer}'s time goes", "", hot_spots_markdown(trainer, profile)]
    return "\n".join(parts) + "\n"
