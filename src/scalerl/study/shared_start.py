"""The warm start a study's runs share: prepared once per model/task configuration before any run
trains (in this process, so parallel runs never race to build it), and recorded by digest in each
run directory (DIR/<variant>/[seed-<i>/]warm_start.json) for the report to check.

Torch and the trainer are imported only when a warm start is prepared.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from scalerl.study.run_curves import WARM_START_RECORD
from scalerl.train.config.train_config import TrainConfig

WarmStartFunction = Callable[[TrainConfig], "dict | None"]


def shared_warm_start(config: TrainConfig) -> dict | None:
    """The record (cache key, weights sha256, steps, probe pass rate) of the warm start `config`
    starts from, computed or loaded from the cache; None for a model that is not warm-started."""
    from scalerl.models.policy import BUILTIN_MODEL

    if config.model.path != BUILTIN_MODEL or config.model.warmstart_steps == 0:
        return None
    from scalerl.train.run_setup import build_task, fresh_policy
    from scalerl.train.warmstart_config import warm_start_for_config

    model, tokenizer = fresh_policy(config)
    return warm_start_for_config(config, model, tokenizer, build_task(config))[2].to_dict()


def warm_start_signature(config: TrainConfig) -> str:
    """Configs equal in what the warm start depends on (warm_start_inputs: model, task, dtype,
    device, generation length) share one warm start, whatever their RL seed and RL knobs."""
    from scalerl.train.warmstart_config import warm_start_inputs

    return json.dumps(warm_start_inputs(config), sort_keys=True, default=str)


def _write_record(run_dir: Path, record: dict) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / WARM_START_RECORD
    temp_path = path.with_name(path.name + ".tmp")
    temp_path.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(temp_path, path)


def record_warm_starts(
    jobs: Sequence, warm_start_fn: WarmStartFunction = shared_warm_start, log: Callable[[str], None] = print
) -> dict[str, dict | None]:
    """Prepare the warm start of every job that will train (absent, or partial without a record)
    once per distinct configuration, and write its record into the job's run directory. A partial
    run keeps the record it started with. Returns {signature: record}."""
    records: dict[str, dict | None] = {}
    for job in jobs:
        if job.status == "finished" or (job.status == "partial" and (job.run_dir / WARM_START_RECORD).exists()):
            continue
        signature = warm_start_signature(job.config)
        if signature not in records:
            records[signature] = warm_start_fn(job.config)
            record = records[signature]
            if record is not None:
                log(
                    f"warm start {record['key']} (weights sha256 {record['weights_sha256'][:12]}) for "
                    f"{job.variant.slug}"
                )
        if records[signature] is not None:
            _write_record(job.run_dir, records[signature])
    return records
