"""Plans of `scalerl ablate` (and of its alias `scalerl study`): a leave-one-out ablation from
knob=value pairs (or the whole leave-one-out table of scalerl.train.config.presets), a recipe study (the
base plus named presets), or a sweep of one scaling axis over several values.

Every plan is a scalerl.study.study_runs.StudyPlan: one runner, one report, one rule. Its study
seed is the base config's seed (after the `--set`s): seed i of every variant trains with the same
RL seed, and no variant may change a seed (that would break the pairing). Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from scalerl.errors import ConfigError
from scalerl.study.knobs import knob_assignments, knob_label, resolve_knob, split_knob
from scalerl.study.study_runs import StudyPlan, StudyVariant, assignment_slug, no_op_notes, variant_config
from scalerl.train.config.presets import LEAVE_ONE_OUT, PRESETS, preset_config

NAME_BY_ASSIGNMENT = {assignment: name for name, assignment in LEAVE_ONE_OUT.items()}
SEED_FIELDS = ("seed", "model.init_seed")  # the study sets these; a knob on them breaks the pairing


def _check_common(preset: str, seeds: int) -> None:
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}")
    if seeds < 1:
        raise ConfigError(f"--seeds must be >= 1, got {seeds}")


def _check_seed_free(text: str, assignments: Sequence[str]) -> None:
    """A knob may not set the RL seed or the warm start's seed: the study pairs seeds itself."""
    touched = [a.split("=", 1)[0].strip() for a in assignments if a.split("=", 1)[0].strip() in SEED_FIELDS]
    if touched:
        raise ConfigError(
            f"{text}: sets {touched[0]}, which the study sets itself (seed i of every variant "
            "uses the same seeds); use --set seed=N for the study seed"
        )


def _finish(plan: StudyPlan) -> StudyPlan:
    """The study seed from the base config, and notes about variants that cannot change anything."""
    base = next(variant for variant in plan.variants if variant.is_base)
    study_seed = preset_config(base.preset, [*base.overrides, *plan.common_overrides]).seed
    plan = replace(plan, study_seed=int(study_seed))
    configs = {variant.slug: variant_config(plan, variant, 0) for variant in plan.variants}
    slugs = [v.slug for v in plan.variants]
    if len(set(slugs)) != len(slugs):
        raise ConfigError(f"two variants share a directory name: {', '.join(slugs)}")
    return replace(plan, notes=(*plan.notes, *no_op_notes(plan, configs)))


def _keep_only(variants: list[StudyVariant], only: Sequence[str]) -> list[StudyVariant]:
    """Keep the variants named in `only` (slug or name, case-insensitive); the base always stays."""
    wanted = {name.strip().lower() for entry in only for name in entry.split(",") if name.strip()}
    known = {v.slug.lower() for v in variants} | {v.name.lower() for v in variants}
    unknown = sorted(wanted - known)
    if unknown:
        raise ConfigError(f"--only: unknown variant {unknown[0]!r}; choose from {', '.join(v.slug for v in variants)}")
    return [v for v in variants if v.is_base or v.slug.lower() in wanted or v.name.lower() in wanted]


def _base(preset: str) -> StudyVariant:
    return StudyVariant(preset, f"{preset} (base)", preset, (), None, is_base=True)


def _table_variants(preset: str, common_overrides: Sequence[str]) -> tuple[list[StudyVariant], list[str]]:
    """Each entry of the leave-one-out table that changes the base's config (the --set applied to both)."""
    base_config = preset_config(preset, common_overrides)
    variants, notes = [], []
    for name, assignment in LEAVE_ONE_OUT.items():
        if preset_config(preset, [assignment, *common_overrides]) == base_config:
            notes.append(f"{name} ({assignment}) left out: the base ({preset} with the --set) already has it")
            continue
        variants.append(StudyVariant(assignment_slug(assignment), name, preset, (assignment,), assignment))
    return variants, notes


def _knob_variants(preset: str, knobs: Sequence[str], common_overrides: Sequence[str]) -> list[StudyVariant]:
    """One variant per `knob=value`; one that repeats the base or another variant is an error."""
    base_config = preset_config(preset, common_overrides)
    variants: list[StudyVariant] = []
    for text in knobs:
        name, value = split_knob(text)
        assignments = knob_assignments(name, value, base_config)
        _check_seed_free(f"--leave-one-out {text}", assignments)
        label = knob_label(name, value)
        if preset_config(preset, [*assignments, *common_overrides]) == base_config:
            raise ConfigError(
                f"--leave-one-out {text}: the base ({preset} with the --set) already has it, "
                "so this variant would repeat the base"
            )
        slug = assignment_slug(label)
        if slug == preset or slug in {v.slug for v in variants}:
            raise ConfigError(f"--leave-one-out: {text} is given twice (or names the same variant as another)")
        variants.append(StudyVariant(slug, NAME_BY_ASSIGNMENT.get(label, label), preset, assignments, label))
    return variants


def plan_leave_one_out(
    preset: str = "scalerl",
    knobs: Sequence[str] = (),
    *,
    common_overrides: Sequence[str] = (),
    seeds: int = 1,
    only: Sequence[str] = (),
) -> StudyPlan:
    """Base preset, then one variant per `knob=value` (short name or dotted path); no knobs: the
    whole LEAVE_ONE_OUT table (an entry the base already has is left out with a note). A knob that
    leaves the base's config unchanged is an error (it would repeat the base), so is one given twice."""
    _check_common(preset, seeds)
    notes: list[str] = []
    if knobs:
        others = _knob_variants(preset, knobs, common_overrides)
    else:
        others, notes = _table_variants(preset, common_overrides)
    variants = [_base(preset), *others]
    variants = _keep_only(variants, only) if only else variants
    return _finish(StudyPlan(tuple(variants), tuple(common_overrides), int(seeds), tuple(notes), kind="leave-one-out"))


def plan_recipes(
    preset: str = "scalerl",
    recipes: Sequence[str] = (),
    *,
    common_overrides: Sequence[str] = (),
    seeds: int = 1,
    only: Sequence[str] = (),
) -> StudyPlan:
    """The base preset, then each named preset (a whole recipe against the base)."""
    _check_common(preset, seeds)
    unknown = [name for name in recipes if name not in PRESETS]
    if unknown:
        raise ConfigError(f"--recipes: unknown preset {unknown[0]!r}; choose from {', '.join(PRESETS)}")
    names = [name for name in dict.fromkeys(recipes) if name != preset]
    if not names:
        raise ConfigError("--recipes: name at least one preset other than the base")
    variants = [
        _base(preset),
        *(StudyVariant(name, PRESETS[name].description, name, (), f"preset {name}") for name in names),
    ]
    variants = _keep_only(variants, only) if only else variants
    return _finish(StudyPlan(tuple(variants), tuple(common_overrides), int(seeds), kind="recipes"))


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


def plan_sweep(
    preset: str = "scalerl", sweep: str = "", *, common_overrides: Sequence[str] = (), seeds: int = 1
) -> StudyPlan:
    """One variant per value of the swept knob, in the order given; the first is the reference the
    others are classified against (is_base). Directories are named `<knob>-<value>`."""
    _check_common(preset, seeds)
    name, values = parse_sweep(sweep)
    base_config = preset_config(preset, common_overrides)
    variants, configs = [], []
    for index, value in enumerate(values):
        assignments = knob_assignments(name, value, base_config)
        _check_seed_free(f"--sweep {sweep}", assignments)
        label = knob_label(name, value)
        config = preset_config(preset, [*assignments, *common_overrides])
        if config in configs:
            raise ConfigError(
                f"--sweep {sweep}: {name}={value} gives the same config as an earlier value "
                "(a --set overrides the swept field?)"
            )
        configs.append(config)
        slug = assignment_slug(f"{name}={value}")
        variants.append(StudyVariant(slug, label, preset, assignments, label, is_base=index == 0))
    return _finish(StudyPlan(tuple(variants), tuple(common_overrides), int(seeds), kind="sweep", sweep_knob=name))
