"""`--config` in TRL's and hydra's language: a flat GRPOConfig YAML, TOML, dotted YAML keys,
trailing `key=value` overrides, `--report-to all`, thinking budgets that follow max_new_tokens,
and every unknown key listed at once."""

import pytest
from cli_invocation import assert_one_line_error, invoke

from scalerl.cli.train import build_train_config, logging_assignments
from scalerl.errors import ConfigError
from scalerl.train.config.step_recipe import sampling_settings
from scalerl.train.config.train_config import TrainConfig, config_from_file

TRL_YAML = """\
output_dir: out/qwen-grpo
learning_rate: 1.0e-6
per_device_train_batch_size: 16
gradient_accumulation_steps: 2
num_generations: 8
max_completion_length: 32
beta: 0.04
loss_type: grpo
epsilon: 0.25
scale_rewards: batch
num_train_epochs: 1
max_steps: 50
temperature: 0.9
top_k: 20
repetition_penalty: 1.1
seed: 3
report_to: all
bf16: true
save_steps: 25
"""


def test_a_trl_grpo_config_yaml_maps_each_key_to_ours(tmp_path):
    path = tmp_path / "grpo.yaml"
    path.write_text(TRL_YAML)
    config = config_from_file(path)
    expected = TrainConfig().with_overrides(
        [
            "optim.lr=1e-6",
            "sampling.prompts_per_step=4",  # 16 * 2 completions / 8 per prompt
            "sampling.generations_per_prompt=8",
            "sampling.max_new_tokens=32",
            "rl.loss=grpo",
            "rl.aggregation=sample",
            "rl.grpo_eps=0.25",
            "rl.grpo_kl_coef=0.04",
            "rl.advantage_norm=batch",
            "max_steps=50",
            "sampling.temperature=0.9",
            "sampling.top_k=20",
            "sampling.repetition_penalty=1.1",
            "seed=3",
            "tensorboard=true",
            "wandb=true",
            "dtype=bfloat16",
            "checkpoint_every=25",
            "train.micro_batch_size=16",  # gradient_accumulation_steps 2: micro-batches of per_device_train_batch_size
            # the keys the file leaves out take TRL's defaults, and the run TRL's behaviour
            "optim.warmup_steps=0",
            "optim.adam_eps=1e-8",
            "optim.weight_decay=0",
            "optim.lr_schedule=linear",
            "optim.grad_clip=1",
            "sampling.top_p=1",
            "rl.zero_variance_filter=false",
            "rl.npr=false",
            "sampling.length_control=truncate",
            "model.fp32_head=false",
            "config_defaults=trl",
        ]
    )
    assert config == expected
    assert (config.sampling.thinking_budget_min, config.sampling.thinking_budget_max) == (20, 24)  # 5/8, 3/4 of 32


def test_trl_top_k_none_is_off_and_sampling_keys_reach_the_generator(tmp_path):
    path = tmp_path / "sampling.yaml"
    path.write_text("top_k: null\nrepetition_penalty: 1.3\n")
    settings = sampling_settings(config_from_file(path))
    assert (settings.top_k, settings.repetition_penalty) == (0, 1.3)
    path.write_text("top_k: 4\n")
    assert sampling_settings(config_from_file(path)).top_k == 4
    path.write_text("max_prompt_length: 256\n")
    assert sampling_settings(config_from_file(path)).max_prompt_length == 256
    path.write_text("max_prompt_length: null\n")
    assert sampling_settings(config_from_file(path)).max_prompt_length == 0  # no limit


def test_trl_loss_types_carry_trl_clipping(tmp_path):
    path = tmp_path / "dapo.yaml"
    path.write_text("loss_type: dapo\nepsilon_high: 0.28\n")
    config = config_from_file(path)
    assert (config.rl.loss, config.rl.aggregation) == ("dapo", "token")
    assert (config.rl.loss_params["dapo_eps_low"], config.rl.loss_params["dapo_eps_high"]) == (0.2, 0.28)
    path.write_text("loss_type: cispo\nepsilon_high: 5.0\n")
    assert config_from_file(path).rl.loss_params["cispo_eps_max"] == 5.0
    path.write_text("importance_sampling_level: sequence\nepsilon: 3.0e-4\nepsilon_high: 4.0e-4\n")
    config = config_from_file(path)
    assert config.rl.loss == "gspo" and config.rl.loss_params["gspo_eps_high"] == 4e-4


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        (
            "learnin_rate: 1\nrl.los: cispo\nnum_generatons: 3\nrl: {aggregaton: token}\n",
            [
                "unknown config keys 'learnin_rate' (did you mean learning_rate?)",
                "'rl.los' (did you mean rl.loss?)",
                "'num_generatons' (did you mean num_generations",
                "'rl.aggregaton' (did you mean rl.aggregation?)",
            ],
        ),
        ("num_train_epochs: 3\nuse_vllm: true\n", ["num_train_epochs (", "set max_steps", "use_vllm: True ("]),
        (
            "per_device_train_batch_size: 6\nnum_generations: 4\n",
            ["6 completions", "not a multiple of num_generations = 4"],
        ),
        ("loss_type: dr_grpo\n", ["loss_type 'dr_grpo'", "grpo, bnpo, dapo, cispo"]),
        ("report_to: [comet_ml]\n", ["report_to takes all, none"]),
    ],
)
def test_trl_keys_without_a_counterpart_are_refused_all_at_once(tmp_path, text, fragments):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        config_from_file(path)
    assert str(caught.value).startswith(f"{path}: ")
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_dotted_yaml_keys_and_toml_files_are_read_as_nested_ones(tmp_path):
    dotted = tmp_path / "dotted.yaml"
    dotted.write_text("rl.loss: dapo\noptim.lr: 2e-5\nsampling:\n  max_new_tokens: 32\n")  # 2e-5: YAML reads text
    toml = tmp_path / "run.toml"
    toml.write_text("max_steps = 7\n[rl]\nloss = 'dapo'\n[optim]\nlr = 2e-5\n[sampling]\nmax_new_tokens = 32\n")
    expected = TrainConfig().with_overrides(["rl.loss=dapo", "optim.lr=2e-5", "sampling.max_new_tokens=32"])
    assert config_from_file(dotted) == expected
    assert config_from_file(toml) == expected.with_overrides(["max_steps=7"])


def test_thinking_budgets_follow_max_new_tokens_unless_set():
    sampling = TrainConfig().with_overrides(["sampling.max_new_tokens=32"]).sampling
    assert (sampling.thinking_budget_min, sampling.thinking_budget_max, sampling.penalty_cache_tokens) == (20, 24, 8)
    sampling = TrainConfig().with_overrides(["sampling.max_new_tokens=32", "thinking_budget_max=30"]).sampling
    assert (sampling.thinking_budget_min, sampling.thinking_budget_max) == (20, 30)
    assert TrainConfig().with_overrides(["sampling.max_new_tokens=256"]).sampling.thinking_budget_max == 192


def test_report_to_all_and_none():
    assert logging_assignments(False, False, None, None, "all") == ["tensorboard=True", "wandb=True"]
    assert logging_assignments(False, False, None, None, "none") == ["tensorboard=False", "wandb=False"]
    with pytest.raises(ConfigError, match="--report-to takes all, none"):
        logging_assignments(False, False, None, None, "all,comet")


def test_hydra_style_overrides_after_the_options_and_output_dir_as_the_run_directory(tmp_path, monkeypatch):
    import scalerl.train.trainer as trainer

    seen = {}

    def fake_train(config, out, **_):
        seen.update(config=config, out=out)
        raise ConfigError("stopped before training")

    monkeypatch.setattr(trainer, "train", fake_train)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "grpo.yaml"
    path.write_text(TRL_YAML)
    result = invoke("train", "--config", path, "rl.loss=cispo", "++optim.lr=1e-5", "+max_steps=9")
    assert_one_line_error(result, "stopped before training")
    assert seen["out"].as_posix() == "out/qwen-grpo"
    config = seen["config"]
    assert (config.rl.loss, config.optim.lr, config.max_steps) == ("cispo", 1e-5, 9)
    assert config == build_train_config(None, ["rl.loss=cispo", "optim.lr=1e-5", "max_steps=9"], None, None, None, path)


def test_cli_errors_for_configs_are_one_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("rl.loss: dapo\n")
    assert_one_line_error(invoke("train", "--config", path), "missing the run directory", "--out")
    assert_one_line_error(
        invoke("train", "--out", tmp_path / "run", "rl.los=cispo"), "unknown config key 'rl.los'; did you mean rl.loss?"
    )
    assert_one_line_error(invoke("train", "--out", tmp_path / "run", "rl.loss"), "expected key=value")
    assert not (tmp_path / "run").exists()


def test_the_trl_yaml_is_a_valid_grpo_config_and_the_batch_matches_trls(tmp_path):
    """TRL itself accepts the file's keys, and one optimiser step takes the prompts TRL's
    generation batch holds: generation_batch_size / num_generations."""
    yaml = pytest.importorskip("yaml")
    trl = pytest.importorskip("trl")
    values = {key: value for key, value in yaml.safe_load(TRL_YAML).items() if key not in ("bf16", "report_to")}
    trl_config = trl.GRPOConfig(**values, use_cpu=True, report_to=[])
    path = tmp_path / "grpo.yaml"
    path.write_text(TRL_YAML)
    config = config_from_file(path)
    assert config.sampling.prompts_per_step == trl_config.generation_batch_size // trl_config.num_generations
    assert (config.optim.lr, config.max_steps, config.rl.loss_params["grpo_kl_coef"]) == (
        trl_config.learning_rate,
        trl_config.max_steps,
        trl_config.beta,
    )


@pytest.mark.slow  # two tiny training steps: ~20 s
def test_a_trl_yaml_and_a_verl_parquet_train_unchanged(tmp_path, monkeypatch):
    pd = pytest.importorskip("pandas")
    import json

    pairs = [(x % 9, (x * 7) % 9) for x in range(48)]
    pd.DataFrame(
        [
            {
                "data_source": "arith",
                "prompt": f"{a}+{b}=",
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                "extra_info": {"split": "train" if i < 40 else "test", "index": i},
            }
            for i, (a, b) in enumerate(pairs)
        ]
    ).to_parquet(tmp_path / "arith.parquet")
    (tmp_path / "grpo.yaml").write_text(
        "output_dir: out/grpo\nlearning_rate: 1.0e-2\nper_device_train_batch_size: 9\n"
        "num_generations: 3\nmax_completion_length: 16\nloss_type: dapo\nmax_steps: 2\n"
        "eval_steps: 1\nsave_steps: 2\nreport_to: none\n"
    )
    monkeypatch.chdir(tmp_path)
    result = invoke(
        "train",
        "--config",
        "grpo.yaml",
        "--task",
        "arith.parquet",
        "--no-progress",
        "model.num_layers=1",
        "model.hidden_size=32",
        "model.num_heads=2",
        "model.warmstart_steps=0",
        "eval_prompts=4",
        "eval_samples_per_prompt=2",
    )
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "out" / "grpo" / "config.json").read_text())
    assert (saved["sampling"]["prompts_per_step"], saved["rl"]["loss"], saved["model"]["num_layers"]) == (3, "dapo", 1)
    rows = [json.loads(line) for line in (tmp_path / "out" / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows if "val_pass_rate" in row] == [0, 1, 2]
