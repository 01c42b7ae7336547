"""The bounded-staleness rule of the asynchronous pipeline: one function admits, waits or drops.

PipelineRL (Piche et al. 2025) and ScaleRL (arXiv 2510.13786, section 4) bound the off-policyness
of asynchronous RL by a maximum lag k: the trainer never takes an optimiser step on data whose
oldest token was produced by weights more than k versions older than its own. Everything in
scalerl that decides whether data is fresh enough goes through `admit_batch`; the rest of this
file is the arithmetic of lags. Pure Python: no torch, no ray.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scalerl.errors import ConfigError, InputError

STALENESS_POLICIES = ("wait", "drop")


class Admission(str, enum.Enum):
    """What the pipeline does with a batch (or a batch it is about to start generating)."""

    ADMIT = "admit"
    WAIT = "wait"
    DROP = "drop"


def policy_lag(trainer_version: int, oldest_policy_version: int) -> int:
    """Lag in optimiser steps: `trainer_version - oldest_policy_version` (>= 0 for real data).

    `trainer_version` is the version of the weights the next optimiser step starts from;
    `oldest_policy_version` is the version that produced the oldest token of the data.
    """
    return int(trainer_version) - int(oldest_policy_version)


def admit_batch(
    oldest_policy_version: int,
    trainer_version: int,
    max_lag: int,
    on_stale: str = "wait",
) -> Admission:
    """Admit data whose oldest token is at most `max_lag` versions behind the trainer.

    Rule (PipelineRL's bound, ScaleRL section 4 with k = max_lag):
        lag = trainer_version - oldest_policy_version
        lag <= max_lag            -> ADMIT
        lag >  max_lag, "wait"    -> WAIT  (do not step on it now; the pipeline holds back)
        lag >  max_lag, "drop"    -> DROP  (discard the data and take the next batch)

    The pipeline asks this question twice with the same rule: before a generator starts a batch
    (with the version it will start from and the latest trainer version that may consume it:
    under "wait" a WAIT keeps the generator idle, which is how the trainer never gets more than
    k steps ahead), and when a finished batch reaches the trainer (a DROP discards it).
    A negative lag (data newer than the trainer) is impossible and raises InputError.
    """
    if on_stale not in STALENESS_POLICIES:
        raise ConfigError(f"pipeline.on_stale must be one of {', '.join(STALENESS_POLICIES)}, got {on_stale!r}")
    if int(max_lag) < 0:
        raise ConfigError(f"pipeline.max_lag must be >= 0, got {max_lag}")
    lag = policy_lag(trainer_version, oldest_policy_version)
    if lag < 0:
        raise InputError(
            f"data from policy version {oldest_policy_version} is newer than the trainer's version {trainer_version}"
        )
    if lag <= int(max_lag):
        return Admission.ADMIT
    return Admission.WAIT if on_stale == "wait" else Admission.DROP


def latest_consumer_version(steps_committed: int, batches_outstanding: int) -> int:
    """Highest trainer version that can consume a batch started now.

    With `steps_committed` optimiser steps handed to the trainer (its version once they finish)
    and `batches_outstanding` other batches already generating or waiting, a new batch is consumed
    after at most all of those: at version <= steps_committed + batches_outstanding (no drops).
    Used as `trainer_version` in the dispatch-time call of `admit_batch`.
    """
    return int(steps_committed) + int(batches_outstanding)


@dataclass(frozen=True)
class LagStats:
    """Policy lag of one batch, in optimiser steps, measured when the trainer consumes it."""

    mean: float  # mean over every completion token of (trainer_version - token's version)
    max: int  # trainer_version - the batch's oldest token version
    oldest_policy_version: int


def batch_lag_stats(token_policy_versions: Sequence[Sequence[int]], trainer_version: int) -> LagStats:
    """Per-token lag statistics of a batch.

    mean = sum_i sum_t (v_trainer - v_{i,t}) / sum_i T_i ;  max = v_trainer - min_{i,t} v_{i,t}.
    Sequences with no completion token count for nothing; a batch with no tokens raises.
    """
    versions = [int(v) for sequence in token_policy_versions for v in sequence]
    if not versions:
        raise InputError("cannot measure the policy lag of a batch without completion tokens")
    oldest = min(versions)
    mean_lag = sum(int(trainer_version) - v for v in versions) / len(versions)
    return LagStats(mean=float(mean_lag), max=policy_lag(trainer_version, oldest), oldest_policy_version=oldest)


def packed_lag_stats(token_versions: np.ndarray, trainer_version: int) -> LagStats:
    """batch_lag_stats of a packed batch's flat token versions (PackedRollouts.versions), in
    one vectorised pass: mean = (N * v_trainer - sum_t v_t) / N, max = v_trainer - min_t v_t
    over its N completion tokens (the same numbers: integer sums, one division)."""
    if token_versions.size == 0:
        raise InputError("cannot measure the policy lag of a batch without completion tokens")
    count, oldest = int(token_versions.size), int(token_versions.min())
    mean_lag = (count * int(trainer_version) - int(token_versions.sum())) / count
    return LagStats(mean=float(mean_lag), max=policy_lag(trainer_version, oldest), oldest_policy_version=oldest)


def oldest_version(token_policy_versions: Sequence[Sequence[int]], fallback: int) -> int:
    """Oldest token version over the batch; `fallback` (the start version) if it has no tokens."""
    versions = [int(v) for sequence in token_policy_versions for v in sequence]
    return min(versions) if versions else int(fallback)
