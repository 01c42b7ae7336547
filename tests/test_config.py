import json
from dataclasses import dataclass, field

import pytest

from scalerl.errors import ConfigError
from scalerl.train.config import field_values, key_paths, overrides
from scalerl.train.config.presets import LEAVE_ONE_OUT, PRESETS, preset_config
from scalerl.train.config.train_config import (
    TrainConfig,
    load_config,
    parse_assignment,
    save_config,
)


@pytest.mark.parametrize(
    ("assignment", "field_name"),
    [
        ("rl.loss=ppo", "rl.loss"),
        ("rl.aggregation=batch", "rl.aggregation"),
        ("rl.advantage_norm=group", "rl.advantage_norm"),
        ("sampling.length_control=cut", "sampling.length_control"),
        ("optim.lr=-1", "optim.lr"),
        ("optim.adam_beta2=1.0", "optim.adam_beta2"),
        ("rl.npr_threshold=1.5", "rl.npr_threshold"),
        ("max_steps=0", "max_steps"),
        ("dtype=float16", "dtype"),
        ("sampling.thinking_budget_max=10", "sampling.thinking_budget_max"),
    ],
)
def test_bad_value_names_the_field(assignment, field_name):
    with pytest.raises(ConfigError) as error:
        TrainConfig().with_overrides([assignment])
    assert str(error.value).startswith(field_name + ":")


def test_bad_choice_lists_allowed_values():
    with pytest.raises(ConfigError, match="cispo, dapo, grpo, gspo"):
        TrainConfig().with_overrides(["rl.loss=ppo"])


def test_json_round_trip_is_identical(tmp_path):
    config = preset_config("dapo", ["optim.lr=3e-4", "max_steps=7", "model.fp32_head=false"])
    path = save_config(config, tmp_path)
    assert path.name == "config.json"
    assert json.loads(path.read_text())["rl"]["loss"] == "dapo"
    assert load_config(tmp_path) == config
    assert load_config(path) == config


def test_set_parses_bool_float_int_and_nested_paths():
    config = TrainConfig().with_overrides(
        [
            "rl.zero_variance_filter=false",
            "npr=off",
            "optim.lr=2.5e-4",
            "max_steps=1e3",
            "sampling.prompts_per_step=12",
            "model.path=/models/x",
            "tensorboard=yes",
        ]
    )
    assert config.rl.zero_variance_filter is False and config.rl.npr is False
    assert config.optim.lr == 2.5e-4
    assert config.max_steps == 1000 and isinstance(config.max_steps, int)
    assert config.sampling.prompts_per_step == 12
    assert config.model.path == "/models/x"
    assert config.tensorboard is True


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("npr=maybe", "rl.npr: expected a boolean"),
        ("max_steps=2.5", "max_steps: expected an integer"),
        ("optim.lr=fast", "optim.lr: expected a number"),
        ("no_equals_sign", "key=value"),
    ],
)
def test_set_rejects_unparsable_values(assignment, message):
    with pytest.raises(ConfigError, match=message):
        parse_assignment(assignment)


def test_unknown_key_lists_close_matches():
    with pytest.raises(ConfigError, match=r"unknown config key 'rl\.los'; did you mean rl\.loss"):
        parse_assignment("rl.los=cispo")
    with pytest.raises(ConfigError, match="optim.lr"):
        parse_assignment("lrr=0.1")


def test_from_dict_rejects_unknown_and_mistyped_keys():
    values = TrainConfig().to_dict()
    values["optim"]["momentum"] = 0.9
    with pytest.raises(ConfigError, match="optim.momentum"):
        TrainConfig.from_dict(values)
    values = TrainConfig().to_dict()
    values["max_steps"] = "ten"
    with pytest.raises(ConfigError, match="max_steps: expected an integer"):
        TrainConfig.from_dict(values)


def test_presets_differ_from_scalerl_where_the_recipes_differ():
    scalerl = preset_config("scalerl")
    assert (scalerl.rl.loss, scalerl.rl.aggregation, scalerl.rl.advantage_norm) == ("cispo", "prompt", "batch")
    assert scalerl.rl.zero_variance_filter and scalerl.rl.npr and scalerl.model.fp32_head
    assert scalerl.rl.npr_threshold == 0.9
    assert scalerl.sampling.length_control == "interrupt"
    grpo = preset_config("grpo")
    assert (grpo.rl.loss, grpo.rl.aggregation, grpo.rl.advantage_norm) == ("grpo", "sample", "prompt")
    assert not grpo.rl.zero_variance_filter and not grpo.rl.npr
    assert grpo.sampling.length_control == "truncate"
    dapo = preset_config("dapo")
    assert (dapo.rl.loss, dapo.rl.aggregation, dapo.sampling.length_control) == ("dapo", "token", "penalty")
    assert {"gspo", "minimax", "magistral"} <= set(PRESETS)


def test_each_leave_one_out_flips_exactly_one_field():
    base = preset_config("scalerl").to_dict()
    for assignment in LEAVE_ONE_OUT.values():
        flipped = preset_config("scalerl", [assignment]).to_dict()
        changed = [
            (section, key)
            for section, values in flipped.items()
            if isinstance(values, dict)
            for key in values
            if values[key] != base[section][key]
        ]
        assert len(changed) == 1, assignment


def test_unknown_preset_lists_presets():
    with pytest.raises(ConfigError, match="scalerl, grpo"):
        preset_config("ppo")


def test_torch_threads_knob_is_validated_and_round_trips(tmp_path):
    from scalerl.errors import ConfigError
    from scalerl.train.config.train_config import TrainConfig

    config = TrainConfig().with_overrides(["torch_threads=1"])
    assert config.torch_threads == 1
    assert TrainConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ConfigError, match="torch_threads"):
        TrainConfig().with_overrides(["torch_threads=-2"])


def test_greedy_validation_needs_one_sample_per_prompt_and_evaluates_at_temperature_zero():
    from scalerl.train.held_out import validation_sampling

    with pytest.raises(ConfigError, match="eval_samples_per_prompt=1, not 4"):
        TrainConfig().with_overrides(["eval_greedy=true"])
    greedy = TrainConfig().with_overrides(["eval_greedy=true", "eval_samples_per_prompt=1", "sampling.temperature=0.7"])
    assert validation_sampling(greedy).temperature == 0.0
    assert validation_sampling(TrainConfig().with_overrides(["sampling.temperature=0.7"])).temperature == 0.7
    assert TrainConfig.from_dict(greedy.to_dict()) == greedy


@dataclass(frozen=True)
class _Inner:
    rate: float = 0.5


@dataclass(frozen=True)
class _Root:
    inner: _Inner = field(default_factory=_Inner)
    steps: int = 3


def test_keys_values_and_overrides_read_any_config_dataclass():
    assert field_values.build_config(_Root, {"inner": {"rate": 1}, "steps": 4}) == _Root(_Inner(1.0), 4)
    values = {"inner": {"rate": 0.5}, "steps": 3}
    assert overrides.apply_assignments(_Root, values, ["rate=0.25"]) == {"inner": {"rate": 0.25}, "steps": 3}
    assert values == {"inner": {"rate": 0.5}, "steps": 3}
    assert key_paths.field_paths(_Root) == ["inner.rate", "steps"]
    with pytest.raises(ConfigError, match=r"unknown config key 'stepz'; did you mean steps\?"):
        field_values.build_config(_Root, {"stepz": 1})
    assert key_paths.config_field(TrainConfig, "rl.cispo_eps_max") is None  # a loss parameter: its spec
