"""The ideal throughput of each pipeline mode when generators and trainer run on separate devices.

Pure arithmetic, no torch, no ray: the benchmark (benchmarks/pipeline_efficiency.py) divides a
measured step rate by these bounds to get the pipeline's overlap efficiency. Notation: one
optimiser step consumes one batch; `generate_seconds` (G) is the time one generator needs for a
whole step's batch, `train_seconds` (T) the trainer's time for one optimiser step, n the number of
generators, k the maximum policy lag (PipelineRL, ScaleRL arXiv 2510.13786 section 4).
"""

from __future__ import annotations

import math

from scalerl.errors import InputError


def _check(generate_seconds: float, train_seconds: float, num_generators: int = 1) -> None:
    if not (generate_seconds > 0 and train_seconds > 0):
        raise InputError(f"step times must be > 0, got G={generate_seconds}, T={train_seconds}")
    if int(num_generators) < 1:
        raise InputError(f"need at least one generator, got {num_generators}")


def sync_step_seconds(generate_seconds: float, train_seconds: float) -> float:
    """Synchronous RL: generation then training, nothing overlaps.

    t_sync = G + T
    """
    _check(generate_seconds, train_seconds)
    return float(generate_seconds + train_seconds)


def async_step_seconds(generate_seconds: float, train_seconds: float, num_generators: int) -> float:
    """Perfect overlap with n generators (PipelineRL with unbounded lag): the slower side sets
    the pace.

        t_async = max(G / n, T)
    """
    _check(generate_seconds, train_seconds, num_generators)
    return float(max(generate_seconds / int(num_generators), train_seconds))


def lag_limited_step_seconds(generate_seconds: float, train_seconds: float, max_lag: int) -> float:
    """The pace a lag bound k allows by itself.

    The dispatch rule admits a new batch only while at most k + 1 batches are between dispatch
    and the publication of the version trained on them, and each batch spends at least G + T
    there, so by Little's law

        t_lag >= (G + T) / (k + 1)       (k = 0: the synchronous G + T)
    """
    _check(generate_seconds, train_seconds)
    if int(max_lag) < 0:
        raise InputError(f"max_lag must be >= 0, got {max_lag}")
    return float((generate_seconds + train_seconds) / (int(max_lag) + 1))


def async_lag_step_seconds(generate_seconds: float, train_seconds: float, num_generators: int, max_lag: int) -> float:
    """The asynchronous pipeline's bound with both limits:

    t = max(G / n, T, (G + T) / (k + 1))
    """
    return max(
        async_step_seconds(generate_seconds, train_seconds, num_generators),
        lag_limited_step_seconds(generate_seconds, train_seconds, max_lag),
    )


def offpolicy_step_seconds(
    generate_seconds: float, train_seconds: float, num_generators: int, offpolicy_steps: int
) -> float:
    """PPO-off-policy-k: each round generates k batches with one version (split over n
    generators), then takes k optimiser steps; the two phases never overlap.

        t_round = k G / n + k T   ->   t_step = G / n + T    (k cancels)
    """
    _check(generate_seconds, train_seconds, num_generators)
    if int(offpolicy_steps) < 1:
        raise InputError(f"offpolicy_steps must be >= 1, got {offpolicy_steps}")
    return float(generate_seconds / int(num_generators) + train_seconds)


def trainer_saturated(generate_seconds: float, train_seconds: float, num_generators: int) -> bool:
    """True when n generators produce batches at least as fast as the trainer uses them:
    G / n <= T (more generators cannot speed the asynchronous pipeline up)."""
    _check(generate_seconds, train_seconds, num_generators)
    return generate_seconds / int(num_generators) <= train_seconds * (1 + 1e-9)


def generators_to_saturate(generate_seconds: float, train_seconds: float) -> int:
    """Smallest n with G / n <= T:  n* = ceil(G / T)."""
    _check(generate_seconds, train_seconds)
    return max(1, math.ceil(generate_seconds / train_seconds - 1e-9))


def efficiency(measured_step_seconds: float, bound_step_seconds: float) -> float:
    """Measured throughput over the bound's:  (1 / t_measured) / (1 / t_bound) = t_bound / t_measured."""
    if not (measured_step_seconds > 0 and bound_step_seconds > 0):
        raise InputError("step times must be > 0")
    return float(bound_step_seconds / measured_step_seconds)


def weight_bytes_per_step(num_parameters: int, bytes_per_parameter: int, num_generators: int) -> dict[str, int]:
    """Bytes one new policy version moves through Ray's object store.

    The trainer puts the version once (P b bytes, b = bytes per parameter); every generator
    that takes it fetches one copy (at most n P b; a generator that skips a version, or shares
    the node's object store with the trainer, moves less):

        put = P b ;  fetched <= n P b ;  total <= (n + 1) P b
    """
    if int(num_parameters) < 1 or int(bytes_per_parameter) < 1 or int(num_generators) < 1:
        raise InputError("parameters, bytes per parameter and generators must be >= 1")
    put = int(num_parameters) * int(bytes_per_parameter)
    fetched = put * int(num_generators)
    return {"put": put, "fetched": fetched, "total": put + fetched}
