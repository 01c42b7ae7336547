"""Plans of `scalerl ablate`: a leave-one-out ablation from knob=value pairs (or the whole
leave-one-out table of scalerl.train.presets), or a sweep of one scaling axis over several values.

Both are scalerl.study.study_runs.StudyPlan objects, so `scalerl ablate` shares the study's runner
(skip finished runs, resume partial ones) and run directories. Torch-free.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from scalerl.errors import ConfigError
from scalerl.study.knobs import knob_assignments, knob_label, resolve_knob, split_knob
from scalerl.train.presets import LEAVE_ONE_OUT, PRESETS, preset_config
from scalerl.study.study_runs import StudyPlan, StudyVariant, assignment_slug, no_op_notes, plan_study, variant_config

NAME_BY_ASSIGNMENT = {assignment: name for name, assignment in LEAVE_ONE_OUT.items()}


def _check_common(preset: str, seeds: int) -> None:
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}")
    if seeds < 1:
        raise ConfigError(f"--seeds must be >= 1, got {seeds}")


def _with_no_op_notes(plan: StudyPlan) -> StudyPlan:
    configs = {variant.slug: variant_config(plan, variant, 0) for variant in plan.variants}
    return replace(plan, notes=(*plan.notes, *no_op_notes(plan, configs)))


def plan_leave_one_out(preset: str = "scalerl", knobs: Sequence[str] = (), *,
                       common_overrides: Sequence[str] = (), seeds: int = 1) -> StudyPlan:
    """Base preset, then one variant per `knob=value` (short name or dotted path); no knobs: the
    whole LEAVE_ONE_OUT table. A knob that leaves the base's config unchanged is an error (it would
    repeat the base), so is a knob given twice."""
    _check_common(preset, seeds)
    if not knobs:
        plan = plan_study(preset, leave_one_out=True, common_overrides=common_overrides, seeds=seeds)
        return replace(plan, kind="leave-one-out")
    base_config = preset_config(preset, common_overrides)
    base = StudyVariant(preset, f"{preset} (base)", preset, (), None, is_base=True)
    variants = [base]
    for text in knobs:
        name, value = split_knob(text)
        assignments = knob_assignments(name, value, base_config)
        label = knob_label(name, value)
        if preset_config(preset, [*assignments, *common_overrides]) == base_config:
            raise ConfigError(f"--leave-one-out {text}: the base ({preset} with the --set) already has it, "
                              "so this variant would repeat the base")
        slug = assignment_slug(label)
        if slug in {v.slug for v in variants}:
            raise ConfigError(f"--leave-one-out: {text} is given twice (or names the same variant as another)")
        variants.append(StudyVariant(slug, NAME_BY_ASSIGNMENT.get(label, label), preset, assignments, label))
    plan = StudyPlan(tuple(variants), tuple(common_overrides), int(seeds), kind="leave-one-out")
    return _with_no_op_notes(plan)


def parse_sweep(text: str) -> tuple[str, list[str]]:
    """'batch_prompts=8,16,32' -> ('batch_prompts', ['8', '16', '32']); at least two distinct values."""
    name, values_text = split_knob(text, "--sweep")
    resolve_knob(name)
    values = [value.strip() for value in values_text.split(",") if value.strip()]
    if len(values) < 2:
        raise ConfigError(f"--sweep {text}: give at least two values, e.g. {name}=8,16,32")
    if len(set(values)) != len(values):
        raise ConfigError(f"--sweep {text}: a value is repeated")
    return name, values


def plan_sweep(preset: str = "scalerl", sweep: str = "", *, common_overrides: Sequence[str] = (),
               seeds: int = 1) -> StudyPlan:
    """One variant per value of the swept knob, in the order given; the first is the reference the
    others are classified against (is_base). Directories are named `<knob>-<value>`."""
    _check_common(preset, seeds)
    name, values = parse_sweep(sweep)
    base_config = preset_config(preset, common_overrides)
    variants, configs = [], []
    for index, value in enumerate(values):
        assignments = knob_assignments(name, value, base_config)
        label = knob_label(name, value)
        config = preset_config(preset, [*assignments, *common_overrides])
        if config in configs:
            raise ConfigError(f"--sweep {sweep}: {name}={value} gives the same config as an earlier value "
                              "(a --set overrides the swept field?)")
        configs.append(config)
        slug = assignment_slug(f"{name}={value}")
        variants.append(StudyVariant(slug, label, preset, assignments, label, is_base=index == 0))
    return StudyPlan(tuple(variants), tuple(common_overrides), int(seeds), kind="sweep", sweep_knob=name)
