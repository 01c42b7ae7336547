"""One home per knob: the registry's specs are what the config validates, lists and trains with.

A toy loss registered here (monkeypatched registry, no other file changed) is selectable with
`--set`, its parameter validated and listed; GRPO's KL coefficient reaches the loss from the config
and changes it by kl_coef * k3, as the formula says.
"""

import copy
import dataclasses
import json
import math

import pytest
import torch
from test_trainer import _rollout, _tiny_model  # noqa: E402  (tests/ is on sys.path)

from scalerl.errors import ConfigError, InputError
from scalerl.rl import registry
from scalerl.rl.config import RLConfig
from scalerl.rl.losses import LossOutput, grpo
from scalerl.rl.registry import BlockSpec, ParamSpec, get_loss
from scalerl.train.batch.packed_rollouts import pack_rollouts
from scalerl.train.config.config_keys import describe_keys
from scalerl.train.config.step_recipe import step_recipe
from scalerl.train.config.train_config import TrainConfig, load_config, save_config
from scalerl.train.train_step import build_optimizer, build_scheduler, train_step


def toy_loss(logprobs, generator_logprobs, advantages, mask, *, scale=1.0):
    """token_loss = -scale * A * logp (plain REINFORCE, scaled)."""
    token_loss = -scale * advantages[:, None] * logprobs * mask
    return LossOutput(token_loss=token_loss, mean_ratio=1.0, clipped_fraction=0.0)


TOY = BlockSpec(
    "toy",
    toy_loss,
    "scaled REINFORCE, for this test",
    (ParamSpec("scale", "toy_scale", 1.0, "toy: factor of the loss", low=0.0, high=10.0),),
)


@pytest.fixture
def toy_registered(monkeypatch):
    monkeypatch.setitem(registry.LOSSES, "toy", TOY)


def test_a_loss_registered_once_is_selectable_validated_and_listed(toy_registered, tmp_path):
    config = TrainConfig().with_overrides(["rl.loss=toy", "rl.toy_scale=2.5"])
    assert config.rl.loss_kwargs() == {"scale": 2.5}
    assert get_loss("toy") is toy_loss
    assert load_config(save_config(config, tmp_path)) == config
    assert json.loads((tmp_path / "config.json").read_text())["rl"]["toy_scale"] == 2.5
    with pytest.raises(ConfigError, match=r"^rl\.toy_scale: must be finite and in \(0, 10\), got 12"):
        TrainConfig().with_overrides(["rl.loss=toy", "rl.toy_scale=12"])
    listed = {key.path: key for key in describe_keys()}
    assert listed["rl.toy_scale"].default == 1.0 and listed["rl.toy_scale"].meaning.startswith("toy: factor")
    assert "toy: scaled REINFORCE" in listed["rl.loss"].meaning


def test_the_toy_loss_trains_through_train_step(toy_registered):
    model, tokenizer = _tiny_model()
    rollouts = [_rollout(model, tokenizer, "3+4=", "7", 1.0, 0), _rollout(model, tokenizer, "3+4=", "8", -1.0, 0)]
    steps = {}
    for scale in (1.0, 3.0):
        config = TrainConfig().with_overrides(["rl.loss=toy", f"rl.toy_scale={scale}", "warmup_steps=0"])
        copy_of_model = copy.deepcopy(model)
        optimizer = build_optimizer(copy_of_model, config.optim)
        steps[scale] = train_step(
            copy_of_model, optimizer, build_scheduler(optimizer, 0), pack_rollouts(rollouts), step_recipe(config)
        )
    assert steps[3.0].loss == pytest.approx(3.0 * steps[1.0].loss) and steps[1.0].loss != 0.0


def test_unknown_names_are_errors_listing_the_registered_choices():
    with pytest.raises(ConfigError, match=r"^rl\.loss: 'ppo' is not one of cispo, dapo, grpo, gspo$"):
        RLConfig(loss="ppo")
    with pytest.raises(ConfigError, match="valid choices: cispo, dapo, grpo, gspo"):
        get_loss("ppo")
    with pytest.raises(ConfigError, match=r"^rl\.foo_eps: no registered loss has this parameter"):
        RLConfig(loss_params={"foo_eps": 1.0})
    with pytest.raises(ConfigError, match="unknown config key 'rl.foo_eps'"):
        TrainConfig().with_overrides(["rl.foo_eps=1"])


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("rl.grpo_kl_coef=-0.1", r"rl\.grpo_kl_coef: must be finite and in \[0, inf\)"),
        ("rl.cispo_eps_max=nan", r"rl\.cispo_eps_max: (must be finite|expected a finite number)"),
        ("rl.gspo_eps_high=inf", r"rl\.gspo_eps_high: (must be finite|expected a finite number)"),
        ("rl.dapo_eps_low=0", r"rl\.dapo_eps_low: must be finite and in \(0, inf\)"),
    ],
)
def test_loss_parameters_are_checked_by_their_spec(assignment, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig().with_overrides([assignment])


def test_legacy_keys_trl_names_and_older_config_files_still_work():
    config = TrainConfig().with_overrides(["rl.loss=dapo", "dapo_eps_high=0.3", "rl.cispo_eps_max=8"])
    assert config.rl.loss_kwargs() == {"eps_low": 0.2, "eps_high": 0.3}
    assert config.rl.loss_params["cispo_eps_max"] == 8.0
    with pytest.raises(ConfigError, match="beta .* needs loss_type grpo or bnpo"):
        TrainConfig().with_overrides(["beta=0.1"])  # TRL's name, on the default loss cispo
    assert TrainConfig().with_overrides(["rl.loss=grpo", "beta=0.1"]).rl.loss_params["grpo_kl_coef"] == 0.1
    # a config.json written before grpo_kl_coef existed loads, the parameter at its default
    older = config.to_dict()
    del older["rl"]["grpo_kl_coef"]
    assert TrainConfig.from_dict(older) == config and config.rl.loss_params["grpo_kl_coef"] == 0.0


def test_grpo_kl_coef_from_the_config_adds_kl_coef_times_k3():
    config = TrainConfig().with_overrides(["rl.loss=grpo", "rl.grpo_kl_coef=0.1"])
    arguments = config.rl.loss_kwargs()
    assert arguments == {"eps": 0.2, "kl_coef": 0.1}
    # on-policy tokens (rho = 1, A = 1): surrogate -1 per token; k3 = e^d - d - 1 with d = ref - logp
    logprobs = torch.full((1, 2), -1.0, dtype=torch.float64, requires_grad=True)
    ref_logprobs = torch.tensor([[-1.5, -0.5]], dtype=torch.float64)
    out = get_loss(config.rl.loss)(
        logprobs,
        logprobs.detach(),
        torch.ones(1, dtype=torch.float64),
        torch.ones(1, 2),
        ref_logprobs=ref_logprobs,
        **arguments,
    )
    k3 = [math.exp(-0.5) + 0.5 - 1.0, math.exp(0.5) - 0.5 - 1.0]
    assert out.token_loss[0].tolist() == pytest.approx([-1.0 + 0.1 * k3[0], -1.0 + 0.1 * k3[1]])


def test_train_step_takes_the_kl_term_against_the_reference_policy():
    model, tokenizer = _tiny_model()
    reference = copy.deepcopy(model)
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    rollouts = [
        _rollout(model, tokenizer, "3+4=", "7", 1.0, 0),
        _rollout(model, tokenizer, "3+4=", "8", -1.0, 0),
        _rollout(model, tokenizer, "5+1=", "6", 1.0, 1),
        _rollout(model, tokenizer, "5+1=", "9", -1.0, 1),
    ]
    reference_rollouts = [
        _rollout(reference, tokenizer, "3+4=", "7", 1.0, 0),
        _rollout(reference, tokenizer, "3+4=", "8", -1.0, 0),
        _rollout(reference, tokenizer, "5+1=", "6", 1.0, 1),
        _rollout(reference, tokenizer, "5+1=", "9", -1.0, 1),
    ]
    losses = {}
    for kl_coef in (0.0, 0.1):
        config = TrainConfig().with_overrides(["rl.loss=grpo", f"rl.grpo_kl_coef={kl_coef}", "warmup_steps=0"])
        policy = copy.deepcopy(model)
        optimizer = build_optimizer(policy, config.optim)
        losses[kl_coef] = train_step(
            policy,
            optimizer,
            build_scheduler(optimizer, 0),
            pack_rollouts(rollouts),
            step_recipe(config),
            reference=reference,
        ).loss
    # prompt aggregation: mean over the two prompts of the mean k3 over their completion tokens
    per_prompt = []
    for group in (0, 1):
        k3 = [
            math.exp(ref - logp) - (ref - logp) - 1.0
            for mine, theirs in zip(rollouts, reference_rollouts)
            if mine.group_index == group
            for logp, ref in zip(mine.generator_logprobs, theirs.generator_logprobs)
        ]
        per_prompt.append(sum(k3) / len(k3))
    assert losses[0.1] - losses[0.0] == pytest.approx(0.1 * sum(per_prompt) / 2, rel=1e-4)
    assert losses[0.1] != losses[0.0]
    config = TrainConfig().with_overrides(["rl.loss=grpo", "rl.grpo_kl_coef=0.1"])
    optimizer = build_optimizer(model, config.optim)
    with pytest.raises(InputError, match="needs the reference policy"):
        train_step(model, optimizer, build_scheduler(optimizer, 0), pack_rollouts(rollouts), step_recipe(config))


def test_every_loss_parameter_has_its_own_config_key_and_a_default_inside_its_bounds():
    keys = [spec.config_key for spec in registry.loss_parameters()]
    assert len(keys) == len(set(keys)) and not set(keys) & {item.name for item in dataclasses.fields(RLConfig)}
    for spec in registry.loss_parameters():
        assert spec.check(spec.default, spec.config_key) == spec.default


def test_grpo_without_kl_is_unchanged_by_the_reference():
    config = TrainConfig().with_overrides(["rl.loss=grpo"])
    assert config.rl.loss_kwargs() == {"eps": 0.2, "kl_coef": 0.0}
    assert not config.rl.needs_reference()
    assert TrainConfig().with_overrides(["rl.loss=grpo", "rl.grpo_kl_coef=0.1"]).rl.needs_reference()
    assert registry.LOSSES["grpo"].resolve() is grpo


def test_a_run_with_kl_holds_its_starting_policy_frozen_as_the_reference(tiny_config, tmp_path):
    from scalerl.train.trainer import open_run, run_one_step

    assert open_run(tiny_config("rl.loss=grpo"), tmp_path / "no-kl", False).reference is None
    run = open_run(tiny_config("rl.loss=grpo", "rl.grpo_kl_coef=0.5", "forecast.enabled=false"), tmp_path / "kl", False)
    starting = [parameter.detach().clone() for parameter in run.model.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(starting, run.reference.parameters()))
    for _ in range(2):
        run_one_step(run)
    assert not any(parameter.requires_grad for parameter in run.reference.parameters())
    assert all(torch.equal(a, b) for a, b in zip(starting, run.reference.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(starting, run.model.parameters()))


def test_the_step_recipe_holds_the_blocks_the_config_names_resolved_once():
    from scalerl.rl import advantages, aggregation, losses

    config = TrainConfig().with_overrides(
        [
            "rl.loss=dapo",
            "rl.dapo_eps_high=0.3",
            "rl.aggregation=sample",
            "rl.advantage_norm=prompt",
            "sampling.temperature=0.7",
            "sampling.length_control=truncate",
        ]
    )
    recipe = step_recipe(config)
    assert recipe.config is config
    assert recipe.loss is losses.dapo and dict(recipe.loss_kwargs) == {"eps_low": 0.2, "eps_high": 0.3}
    assert recipe.aggregation is aggregation.sample_mean
    assert recipe.advantage_normalisation is advantages.normalise_by_prompt_std
    assert not recipe.needs_reference
    assert (recipe.sampling.temperature, recipe.length_control.mode) == (0.7, "truncate")
    kl = step_recipe(TrainConfig().with_overrides(["rl.loss=grpo", "rl.grpo_kl_coef=0.1"]))
    assert kl.loss is grpo and kl.needs_reference and dict(kl.loss_kwargs) == {"eps": 0.2, "kl_coef": 0.1}
