"""What the throughput benchmark measures of each trainer: steps/s and generated tokens/s over the
steps after the warm-up, the peak resident set size, and a profile's phases and hot spots.
"""

from __future__ import annotations

import resource
from pathlib import Path


def peak_rss_mib() -> float:
    """Peak resident set size of this process (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def throughput(step_end_times: list[float], step_tokens: list[int], warmup_steps: int, sequences_per_step: int) -> dict:
    """Steps/s and generated tokens/s over the steps after the warm-up.

    The window runs from the end of the last warm-up step to the end of the last step, so it holds
    every timed step's generation, reward, update and the trainer's own overhead between steps."""
    timed_tokens = sum(step_tokens[warmup_steps:])
    timed_steps = len(step_end_times) - warmup_steps
    wall_seconds = step_end_times[-1] - step_end_times[warmup_steps - 1]
    return {
        "timed_steps": timed_steps,
        "wall_seconds": wall_seconds,
        "steps_per_second": timed_steps / wall_seconds,
        "generated_tokens": timed_tokens,
        "generated_tokens_per_second": timed_tokens / wall_seconds,
        "mean_completion_tokens": timed_tokens / (timed_steps * sequences_per_step),
    }


def profile_summary(profiler, steps: int, phase_names: tuple[str, ...], top: int = 25) -> dict:
    """Cumulative seconds of the named phases and the functions with the most own time."""
    import pstats

    stats = pstats.Stats(profiler)
    total = stats.total_tt
    by_own = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    by_cumulative = sorted(stats.stats.items(), key=lambda item: item[1][3], reverse=True)
    phases = {
        name: next(
            (cum for (_, _, n), (_, _, _, cum, _) in by_cumulative if n == name or f"'{name}'" in n), 0.0
        )  # builtins: "<method 'name' ...>"
        for name in phase_names
    }
    hot = [
        {
            "function": f"{Path(file).name}:{line}({name})",
            "calls": calls,
            "own_seconds": own,
            "cumulative_seconds": cumulative,
            "own_fraction": own / total,
        }
        for (file, line, name), (_, calls, own, cumulative, _) in by_own
    ]
    return {
        "profiled_steps": steps,
        "total_seconds": total,
        "phase_cumulative_seconds": phases,
        "hot_spots_by_own_time": hot,
    }
