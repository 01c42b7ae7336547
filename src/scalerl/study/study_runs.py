"""The runner of `scalerl ablate` (and its alias `scalerl study`): the plan's data types, each
(variant, seed) run's config and directory, and training them (skipping finished runs, resuming
interrupted ones), after preparing the warm start they share; the report is
scalerl.study.ablate_analysis.

Paired design (common random numbers): seed i of every variant trains with the RL seed
`rl_seed(study_seed, i)` (prompt order and sampling noise), whatever the variant, and every run
starts from the warm start of its model/task configuration (model.init_seed, never the RL seed),
recorded by digest in DIR/<variant>/[seed-<i>/]warm_start.json.

Orchestration only. Importing this module is cheap (no torch): the trainer is imported when a
variant is trained. The plan is written to DIR/study_plan.json so `--report-only` finds the runs.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from scalerl.errors import ConfigError, InputError
from scalerl.study.run_curves import ReportRun
from scalerl.train.config.presets import preset_config
from scalerl.train.config.train_config import CONFIG_FILE_NAME, TrainConfig, load_config
from scalerl.train.records.metrics_log import METRICS_FILE_NAME, read_rows

PLAN_FILE_NAME = "study_plan.json"
# Fields a finished or interrupted run may differ in from the study's config and still be reused:
# none of them changes what the run learns (thread count, logging, live forecast, length).
REUSABLE_DIFFERENCES = (
    "max_steps",
    "tensorboard",
    "wandb",
    "wandb_project",
    "wandb_run_name",
    "torch_threads",
    "forecast",
)


@dataclass(frozen=True)
class StudyVariant:
    """One run of the study: a preset plus its own overrides; `knob` names what it flips."""

    slug: str
    name: str
    preset: str
    overrides: tuple[str, ...]
    knob: str | None
    is_base: bool = False


@dataclass(frozen=True)
class StudyPlan:
    """The variants (base first) and the settings shared by all of them."""

    variants: tuple[StudyVariant, ...]
    common_overrides: tuple[str, ...] = ()
    seeds: int = 1
    notes: tuple[str, ...] = ()
    kind: str = "leave-one-out"  # "leave-one-out", "recipes" or "sweep"
    sweep_knob: str | None = None  # the swept knob's name, for kind "sweep"
    study_seed: int = 0  # seed i of every variant trains with rl_seed(study_seed, i)

    @property
    def rl_seeds(self) -> list[int]:
        return [rl_seed(self.study_seed, index) for index in range(self.seeds)]

    def to_dict(self) -> dict:
        return {
            "variants": [asdict(v) for v in self.variants],
            "common_overrides": list(self.common_overrides),
            "seeds": self.seeds,
            "notes": list(self.notes),
            "kind": self.kind,
            "sweep_knob": self.sweep_knob,
            "study_seed": self.study_seed,
        }

    @classmethod
    def from_dict(cls, values: dict) -> StudyPlan:
        variants = tuple(StudyVariant(**{**v, "overrides": tuple(v["overrides"])}) for v in values["variants"])
        kind = str(values.get("kind", "leave-one-out"))
        return cls(
            variants,
            tuple(values["common_overrides"]),
            int(values["seeds"]),
            tuple(values["notes"]),
            "leave-one-out" if kind == "study" else kind,
            values.get("sweep_knob"),
            int(values.get("study_seed", 0)),
        )

    def design(self) -> dict:
        """The paired design as the report's JSON records it."""
        return {
            "study_seed": self.study_seed,
            "rl_seeds": self.rl_seeds,
            "rule": "seed i of every variant: RL seed study_seed + i; one warm start per model/task config",
        }


def rl_seed(study_seed: int, seed_index: int) -> int:
    """The RL seed (prompt order, sampling noise) of seed `seed_index` of every variant:
    study_seed + seed_index. It depends on the study and the index, never on the variant."""
    return int(study_seed) + int(seed_index)


def assignment_slug(assignment: str) -> str:
    """'rl.loss=dapo' -> 'loss-dapo': the field's leaf name and the value, safe as a directory name."""
    key, _, value = assignment.partition("=")
    text = f"{key.strip().rsplit('.', 1)[-1]}-{value.strip()}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "variant"


def no_op_notes(plan: StudyPlan, configs: dict[str, TrainConfig]) -> list[str]:
    """Warn about an ablation that cannot change anything with the study's settings: without an
    FP32 LM head the logits are in the model's dtype, so in float32 the head is FP32 either way."""
    return [
        f"{v.slug}: dtype is float32, so the LM head computes in FP32 either way and this variant "
        "repeats the base; add --set dtype=bfloat16 for the FP32-head ablation to matter"
        for v in plan.variants
        if v.knob == "model.fp32_head=false" and configs[v.slug].dtype == "float32"
    ]


def variant_config(plan: StudyPlan, variant: StudyVariant, seed_index: int) -> TrainConfig:
    """Preset, then the variant's knob, then the study's `--set`s; the RL seed is
    rl_seed(plan.study_seed, seed_index), the same for every variant."""
    config = preset_config(variant.preset, [*variant.overrides, *plan.common_overrides])
    return config.with_overrides([f"seed={rl_seed(plan.study_seed, seed_index)}"])


def variant_run_dirs(out_dir: str | Path, plan: StudyPlan, variant: StudyVariant) -> list[Path]:
    """DIR/<slug>/ for one seed; DIR/<slug>/seed-<k>/ for k = 0..seeds-1 otherwise."""
    root = Path(out_dir) / variant.slug
    return [root] if plan.seeds == 1 else [root / f"seed-{k}" for k in range(plan.seeds)]


def config_differences(saved: TrainConfig, wanted: TrainConfig) -> list[str]:
    """Top-level config fields that differ, except those a reused run may differ in."""
    saved_values, wanted_values = saved.to_dict(), wanted.to_dict()
    return [
        key for key in wanted_values if key not in REUSABLE_DIFFERENCES and saved_values.get(key) != wanted_values[key]
    ]


def run_status(run_dir: str | Path, config: TrainConfig) -> str:
    """'absent' (no config.json), 'finished' (metrics reached max_steps, or the pool emptied) or
    'partial' (to resume). A run trained with another config is refused, not silently reused."""
    run_dir = Path(run_dir)
    if not (run_dir / CONFIG_FILE_NAME).exists():
        return "absent"
    changed = config_differences(load_config(run_dir), config)
    if changed:
        raise ConfigError(
            f"{run_dir} holds a run with a different config ({', '.join(changed)}): "
            "use another --out or the same --set as before"
        )
    rows = read_rows(run_dir / METRICS_FILE_NAME)
    if rows and (rows[-1]["step"] >= config.max_steps or rows[-1].get("pool_size") == 0):
        return "finished"
    return "partial"


def write_plan(plan: StudyPlan, out_dir: str | Path) -> Path:
    """DIR/study_plan.json, written atomically."""
    path = Path(out_dir) / PLAN_FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    temp_path = path.with_suffix(".json.tmp")
    temp_path.write_text(json.dumps(plan.to_dict(), indent=2) + "\n")
    os.replace(temp_path, path)
    return path


def read_plan(out_dir: str | Path) -> StudyPlan:
    path = Path(out_dir) / PLAN_FILE_NAME
    if not path.is_file():
        raise InputError(
            f"no study in {out_dir}: {PLAN_FILE_NAME} is missing (run `scalerl ablate --out "
            f"{out_dir} --leave-one-out` first)"
        )
    try:
        return StudyPlan.from_dict(json.loads(path.read_text()))
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise InputError(f"{path} is not a study plan: {error}") from None


def report_runs(plan: StudyPlan, out_dir: str | Path) -> list[ReportRun]:
    """The plan's variants as the report reads them (one metrics.jsonl per seed)."""
    return [
        ReportRun(
            v.slug, v.name, v.knob, v.is_base, tuple(d / METRICS_FILE_NAME for d in variant_run_dirs(out_dir, plan, v))
        )
        for v in plan.variants
    ]


@dataclass(frozen=True)
class Job:
    """One training run of the study: a variant, a seed, its directory, config and status."""

    variant: StudyVariant
    seed_index: int
    run_dir: Path
    config: TrainConfig
    status: str


def plan_jobs(plan: StudyPlan, out_dir: str | Path) -> list[Job]:
    """Every (variant, seed) with its status, decided before anything trains."""
    jobs = []
    for variant in plan.variants:
        for seed_index, run_dir in enumerate(variant_run_dirs(out_dir, plan, variant)):
            config = variant_config(plan, variant, seed_index)
            jobs.append(Job(variant, seed_index, run_dir, config, run_status(run_dir, config)))
    return jobs


TrainFunction = Callable[..., object]


class StudyProgress:
    """Rich progress on stderr: one line for the study (variant k of n) and one for the steps of
    the variant being trained (last train reward and validation pass rate)."""

    def __init__(self, total_jobs: int, *, enabled: bool = True):
        self._enabled, self._total = enabled, total_jobs
        self._progress = self._study_task = self._steps_task = None
        self._last_val: float | None = None

    def __enter__(self) -> StudyProgress:
        if self._enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                MofNCompleteColumn(),
                BarColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[info]}"),
                console=Console(stderr=True),
            )
            self._progress.start()
            self._study_task = self._progress.add_task("study", total=self._total, info="")
        return self

    def start_job(self, number: int, label: str, status: str, max_steps: int) -> None:
        action = {"finished": "finished, skipped", "partial": "resuming", "absent": "training"}[status]
        self._last_val = None
        if self._progress is None:
            return
        self._progress.update(
            self._study_task, description=f"variant {number} of {self._total}", info=f"{label} ({action})"
        )
        if self._steps_task is not None:
            self._progress.remove_task(self._steps_task)
        self._steps_task = self._progress.add_task(
            f"  {label} step", total=max_steps, completed=max_steps if status == "finished" else 0, info=""
        )

    def row(self, row: dict) -> None:
        """Trainer callback: one metrics row was logged."""
        if row.get("val_pass_rate") is not None:
            self._last_val = row["val_pass_rate"]
        if self._progress is None:
            return
        parts = [] if row.get("train_reward") is None else [f"reward {row['train_reward']:+.3f}"]
        parts += [] if self._last_val is None else [f"val pass rate {self._last_val:.3f}"]
        self._progress.update(self._steps_task, completed=row["step"], info="  ".join(parts))

    def finish_job(self) -> None:
        if self._progress is not None:
            self._progress.advance(self._study_task)

    def __exit__(self, *exc_info) -> None:
        if self._progress is not None:
            self._progress.stop()


@dataclass(frozen=True)
class RayOptions:
    """`--parallel`: one Ray task per run with `cpus_per_run` CPUs; `address` joins a cluster
    ("" starts a local Ray with `total_cpus` CPUs, 0 meaning all of this machine's)."""

    cpus_per_run: float = 1.0
    address: str = ""
    total_cpus: int = 0

    def __post_init__(self) -> None:
        if not self.cpus_per_run > 0:
            raise ConfigError(f"--cpus-per-run must be > 0, got {self.cpus_per_run:g}")
        if self.total_cpus < 0:
            raise ConfigError(f"--ray-cpus must be >= 0, got {self.total_cpus}")


def job_label(plan: StudyPlan, job: Job) -> str:
    return job.variant.slug if plan.seeds == 1 else f"{job.variant.slug} seed {job.seed_index}"


def run_study(
    plan: StudyPlan,
    out_dir: str | Path,
    *,
    show_progress: bool = True,
    train_fn: TrainFunction | None = None,
    ray_options: RayOptions | None = None,
    log: Callable[[str], None] = print,
    warm_start_fn: Callable | None = None,
) -> list[Job]:
    """Prepare the shared warm start(s), then train every job: finished ones skipped, partial ones
    resumed, absent ones started; in order here, or all at once on Ray when `ray_options` is given
    (scalerl.distributed.study_ray).

    `train_fn(config, run_dir, resume=, show_progress=, on_row=)` defaults to the trainer's
    `train`; `warm_start_fn(config) -> record | None` to scalerl.study.shared_start.shared_warm_start
    when the trainer trains (a custom `train_fn` without a `warm_start_fn` records none).
    Returns the jobs with the status each had before this call."""
    write_plan(plan, out_dir)
    jobs = plan_jobs(plan, out_dir)
    if warm_start_fn is None and train_fn is None:
        from scalerl.study.shared_start import shared_warm_start as warm_start_fn
    if warm_start_fn is not None:
        from scalerl.study.shared_start import record_warm_starts

        record_warm_starts(jobs, warm_start_fn, log=log)
    if ray_options is not None:
        from scalerl.distributed.study_ray import run_jobs_on_ray

        pending = [job for job in jobs if job.status != "finished"]
        skipped = len(jobs) - len(pending)
        log(f"{len(pending)} runs to train on Ray ({skipped} finished, skipped)")
        run_jobs_on_ray(pending, [job_label(plan, job) for job in pending], ray_options, log=log, train_fn=train_fn)
        return jobs
    if train_fn is None:
        from scalerl.train.trainer import train as train_fn
    with StudyProgress(len(jobs), enabled=show_progress) as progress:
        for number, job in enumerate(jobs, start=1):
            progress.start_job(number, job_label(plan, job), job.status, job.config.max_steps)
            if job.status != "finished":
                result = train_fn(
                    job.config, job.run_dir, resume=job.status == "partial", show_progress=False, on_row=progress.row
                )
                if getattr(result, "interrupted", False):
                    raise KeyboardInterrupt  # Ctrl-C checkpointed this run: stop the study (a rerun resumes)
            progress.finish_job()
    return jobs
