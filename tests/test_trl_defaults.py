"""A TRL GRPOConfig means TRL's run: the keys it leaves out take TRL's defaults (trl 1.16:
loss_type dapo, scale_rewards group, epsilon 0.2, beta 0, ...), gradient_accumulation_steps runs
micro-batches with the whole batch's gradient, harmless keys pass with a note, schedulers map to
optim.lr_schedule, every refused key is named in one message, TRL names work as overrides."""

import copy
import math

import pytest
import torch
from cli_invocation import invoke

from scalerl.errors import ConfigError
from scalerl.models.forward import teacher_forced_logprobs
from scalerl.models.policy import TinyModelSpec, build_tiny_model
from scalerl.rl.advantages import compute_advantages
from scalerl.tasks.rollout import Rollout
from scalerl.train.batch.packed_rollouts import pack_rollouts
from scalerl.train.config.config_io import read_config_file
from scalerl.train.config.step_recipe import step_recipe
from scalerl.train.config.train_config import TrainConfig, config_from_file
from scalerl.train.config.trl_config import TRL_DEFAULTS, trl_notes
from scalerl.train.train_step import build_optimizer, build_scheduler, lr_factor, train_step

MINIMAL_TRL_YAML = "learning_rate: 2.0e-6\nper_device_train_batch_size: 4\nnum_generations: 4\nmax_steps: 20\n"


def _config(tmp_path, text):
    path = tmp_path / "grpo.yaml"
    path.write_text(text)
    return config_from_file(path)


def test_trl_defaults_are_the_installed_trls():
    trl = pytest.importorskip("trl")
    import dataclasses

    fields = {item.name: item.default for item in dataclasses.fields(trl.GRPOConfig)}
    for key, value in TRL_DEFAULTS.items():
        assert fields[key] == value, key


def test_a_trl_yaml_without_loss_type_trains_trls_default_loss_and_normalisation(tmp_path):
    config = _config(tmp_path, MINIMAL_TRL_YAML)
    assert (config.rl.loss, config.rl.aggregation, config.rl.advantage_norm) == ("dapo", "token", "prompt_sample_std")
    assert (config.rl.loss_params["dapo_eps_low"], config.rl.loss_params["dapo_eps_high"]) == (0.2, 0.2)
    assert not config.rl.zero_variance_filter and not config.rl.npr and not config.model.fp32_head
    assert (config.optim.lr, config.optim.adam_eps, config.optim.weight_decay, config.optim.warmup_steps) == (
        2e-6,
        1e-8,
        0.0,
        0,
    )
    assert (config.optim.lr_schedule, config.sampling.max_new_tokens, config.seed) == ("linear", 512, 42)
    assert (config.sampling.length_control, config.config_defaults) == ("truncate", "trl")
    # a scalerl YAML naming a shared leaf (temperature) is not a TRL file: the preset's defaults stay
    ours = _config(tmp_path, "temperature: 0.9\n")
    assert (ours.rl.loss, ours.config_defaults, ours.sampling.temperature) == ("cispo", "scalerl", 0.9)


def test_trls_group_normalisation_by_hand():
    """TRL: A = (r - mean_g) / (sample std_g + 1e-4). Group [1, 0, 0, 0]: mean 1/4, sample std
    sqrt((9/16 + 3/16) / 3) = 1/2; group [1, 1]: std 0, A = 0."""
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    got = compute_advantages(rewards, groups, "prompt_sample_std")
    expected = torch.tensor([0.75, -0.25, -0.25, -0.25, 0.0, 0.0], dtype=torch.float64) / (0.5 + 1e-4)
    assert torch.allclose(got, expected, atol=1e-12, rtol=0)


SPEC = TinyModelSpec(num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_positions=64)


def _rollouts(model, groups=4, per_group=4):
    generator = torch.Generator().manual_seed(3)
    rollouts = []
    for index in range(groups * per_group):
        prompt_length, completion_length = 2 + index % 3, 3 + (index * 5) % 7
        ids = torch.randint(4, model.config.vocab_size, (prompt_length + completion_length,), generator=generator)
        with torch.no_grad():
            own = teacher_forced_logprobs(model, ids[None], torch.ones_like(ids[None]), fp32_head=False)[0]
        noise = 0.3 * torch.randn(completion_length, generator=generator, dtype=torch.float64)
        rollouts.append(
            Rollout(
                prompt_index=index // per_group,
                group_index=index // per_group,
                prompt_token_ids=tuple(ids[:prompt_length].tolist()),
                completion_token_ids=tuple(ids[prompt_length:].tolist()),
                generator_logprobs=tuple((own[prompt_length - 1 :] + noise).tolist()),
                token_policy_versions=(0,) * completion_length,
                reward=float((index * 7) % 3 == 0),
                truncated=False,
                interrupted=False,
                completion_text="",
                loss_mask=(1,) * completion_length,
            )
        )
    return pack_rollouts(rollouts)


def _gradient(model, rollouts, config):
    optimizer = build_optimizer(model, config.optim)
    train_step(model, optimizer, build_scheduler(optimizer, 0), rollouts, step_recipe(config))
    return [parameter.grad.clone() for parameter in model.parameters()]


def test_gradient_accumulation_gives_the_whole_batch_gradient_a_quarter_at_a_time(tmp_path):
    config = _config(
        tmp_path,
        "per_device_train_batch_size: 4\ngradient_accumulation_steps: 4\nnum_generations: 4\n"
        "max_completion_length: 16\nmax_grad_norm: 1.0e+9\n",
    )
    # 16 completions per step (4 prompts x 4), 4 per forward/backward pass
    assert (config.sampling.prompts_per_step, config.train.micro_batch_size) == (4, 4)
    base, _ = build_tiny_model(SPEC, seed=0, dtype=torch.float64)
    rollouts = _rollouts(base)
    whole = _gradient(copy.deepcopy(base), rollouts, config.with_overrides(["train.micro_batch_size=0"]))
    accumulated = _gradient(copy.deepcopy(base), rollouts, config)
    scale = max(float(g.abs().max()) for g in whole)
    assert scale > 1e-4
    for expected, got in zip(whole, accumulated):
        assert torch.allclose(got, expected, atol=1e-9 * scale, rtol=0)


def test_harmless_keys_pass_with_a_note_and_schedulers_map(tmp_path):
    text = (
        MINIMAL_TRL_YAML + "logging_steps: 5\nuse_vllm: false\nfp16: false\nlr_scheduler_type: cosine\n"
        "warmup_ratio: 0.1\nsave_strategy: steps\neval_strategy: steps\noptim: adamw_torch\n"
        "gradient_checkpointing: true\n"
    )
    config = _config(tmp_path, text)
    assert (config.optim.lr_schedule, config.optim.warmup_steps, config.train.gradient_checkpointing) == (
        "cosine",
        2,
        True,
    )  # ceil(0.1 * 20)
    assert config.optim.lr == 2e-6  # scalerl's optim section untouched by TRL's optim key
    notes = trl_notes(read_config_file(tmp_path / "grpo.yaml"), True)
    assert notes[0].startswith("a TRL GRPOConfig: keys it leaves out take TRL's defaults (")
    assert "loss_type dapo" in notes[0] and "learning_rate" not in notes[0]
    assert "logging_steps: accepted, scalerl logs every step" in notes


def test_every_refused_key_is_named_in_one_message(tmp_path):
    with pytest.raises(ConfigError) as caught:
        _config(
            tmp_path,
            "learning_rate: 1.0e-6\nnum_train_epochs: 3\nuse_vllm: true\nlr_scheduler_type: polynomial\n"
            "optim: sgd\nlearnin_rate: 2\n",
        )
    message = str(caught.value)
    for fragment in (
        "learnin_rate",
        "num_train_epochs (",
        "use_vllm: True",
        "lr_scheduler_type: 'polynomial'",
        "optim: 'sgd'",
    ):
        assert fragment in message


def test_trl_names_are_overrides():
    config = TrainConfig().with_overrides(
        ["learning_rate=2e-6", "loss_type=grpo", "lr_scheduler_type=cosine", "num_generations=4"]
    )
    assert (config.optim.lr, config.rl.loss, config.rl.aggregation, config.optim.lr_schedule) == (
        2e-6,
        "grpo",
        "sample",
        "cosine",
    )
    assert config.sampling.generations_per_prompt == 4
    with pytest.raises(ConfigError, match="use_vllm"):
        TrainConfig().with_overrides(["use_vllm=true"])


@pytest.mark.parametrize(
    ("step", "schedule", "expected"),
    [
        (0, "linear", 0.5),
        (1, "linear", 1.0),
        (6, "linear", 0.5),
        (10, "linear", 0.0),
        (12, "linear", 0.0),
        (6, "cosine", 0.5),
        (4, "cosine", 0.5 * (1 + math.cos(math.pi / 4))),
        (10, "cosine", 0.0),
        (9, "constant", 1.0),
    ],
)
def test_lr_schedules_after_a_warm_up_of_two_steps_over_ten(step, schedule, expected):
    assert lr_factor(step, 2, schedule, 10) == pytest.approx(expected, abs=1e-12)


def test_the_cli_says_which_defaults_a_trl_file_took(tmp_path, monkeypatch):
    import scalerl.train.trainer as trainer

    def stop(config, out, **_):
        raise ConfigError("stopped before training")

    monkeypatch.setattr(trainer, "train", stop)
    path = tmp_path / "grpo.yaml"
    path.write_text(MINIMAL_TRL_YAML + "logging_steps: 5\n")
    result = invoke("train", "--config", path, "--out", tmp_path / "run")
    assert "note: " in result.output and "TRL's defaults" in result.output
    assert "logging_steps: accepted" in result.output


def test_device_auto_is_cuda_when_torch_sees_one(monkeypatch):
    from scalerl.train.run_setup import with_device_resolved

    config = TrainConfig().with_overrides(["device=auto"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert with_device_resolved(config).device == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert with_device_resolved(config).device == "cuda"
    assert with_device_resolved(TrainConfig()).device == "cpu"
    with pytest.raises(ConfigError, match="auto"):
        TrainConfig().with_overrides(["device=gpu"])
