"""Supervised warm-start: its loss, early stop on the pass-rate probe, determinism and cache."""

import pytest
import torch

import scalerl.train.warmstart as warmstart_module
from scalerl.errors import ConfigError
from scalerl.models.policy import TinyModelSpec, build_tiny_model
from scalerl.tasks.arithmetic import ArithmeticTask
from scalerl.tasks.config import TaskConfig
from scalerl.tasks.types import TaskExample
from scalerl.train.warmstart import (
    WarmStartSettings,
    demonstration_ids,
    supervised_loss,
    warm_start,
    warm_start_cached,
)

SPEC = TinyModelSpec(num_layers=1, hidden_size=64, num_heads=2, intermediate_size=128, max_positions=64)
EASY = TaskConfig(num_operands=2, max_digits=1, num_train_prompts=40, num_val_prompts=10)
QUICK = WarmStartSettings(
    batch_size=32,
    learning_rate=1e-2,
    probe_every=20,
    probe_prompts=10,
    probe_samples=4,
    max_new_tokens=24,
    target_band=(0.05, 1.0),
)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_demonstration_ids_are_prompt_then_worked_solution_then_eos():
    _, tokenizer = build_tiny_model(SPEC)
    prompt_ids, completion_ids = demonstration_ids(tokenizer, TaskExample("1+2=", "3", "<think>1+2=3</think>3"))
    assert tokenizer.decode(prompt_ids) == "<bos>1+2="
    assert tokenizer.decode(completion_ids) == "<think>1+2=3</think>3<eos>"
    _, answer_only = demonstration_ids(tokenizer, TaskExample("q", "42"))
    assert tokenizer.decode(answer_only) == "42<eos>"


def test_supervised_loss_is_the_mean_nll_of_completion_tokens():
    model, tokenizer = build_tiny_model(SPEC, seed=4)
    examples = [TaskExample("1+2=", "3", "<think>1+2=3</think>3"), TaskExample("12+30=", "42", "42")]
    total, count = 0.0, 0
    for example in examples:  # one unpadded sequence at a time, by hand
        prompt_ids, completion_ids = demonstration_ids(tokenizer, example)
        ids = torch.tensor([prompt_ids + completion_ids])
        log_probs = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
        for position in range(len(prompt_ids), ids.shape[1]):
            total -= log_probs[position - 1, ids[0, position]].item()
            count += 1
    assert supervised_loss(model, tokenizer, examples).item() == pytest.approx(total / count, abs=1e-5)


def test_warm_start_reaches_a_nonzero_pass_rate_on_an_easy_task_and_stops_early():
    model, tokenizer = build_tiny_model(SPEC)
    task = ArithmeticTask(EASY)
    result = warm_start(model, tokenizer, task, 200, QUICK)
    assert result.pass_rate >= 0.05 and result.reached_band
    assert result.steps_run < 200 and result.steps_run == result.probe_history[-1][0]
    assert all(rate < 0.05 for _, rate in result.probe_history[:-1])


def test_warm_start_is_deterministic_under_its_seed():
    task = ArithmeticTask(EASY)
    settings = WarmStartSettings(batch_size=8, probe_prompts=2, probe_samples=1, max_new_tokens=8)
    weights = []
    for _ in range(2):
        model, tokenizer = build_tiny_model(SPEC)
        warm_start(model, tokenizer, task, 3, settings)
        weights.append(model.lm_head.weight.detach().clone())
    assert torch.equal(weights[0], weights[1])


def test_cached_warm_start_is_loaded_instead_of_recomputed(tmp_path, monkeypatch):
    task = ArithmeticTask(EASY)
    settings = WarmStartSettings(batch_size=8, probe_prompts=2, probe_samples=1, max_new_tokens=8)
    model, tokenizer = build_tiny_model(SPEC)
    trained, _, first = warm_start_cached(tmp_path, model, tokenizer, task, 3, settings)
    assert len([p for p in tmp_path.iterdir() if not p.name.startswith(".")]) == 1

    def must_not_train(*args, **kwargs):
        raise AssertionError("warm_start ran although a cached result exists")

    monkeypatch.setattr(warmstart_module, "warm_start", must_not_train)
    fresh, _ = build_tiny_model(SPEC)
    loaded, loaded_tokenizer, second = warm_start_cached(tmp_path, fresh, tokenizer, task, 3, settings)
    assert second == first
    assert torch.equal(loaded.lm_head.weight, trained.lm_head.weight)
    assert loaded_tokenizer("1+2=")["input_ids"] == tokenizer("1+2=")["input_ids"]
    other_seed, _ = build_tiny_model(SPEC, seed=1)
    with pytest.raises(AssertionError, match="warm_start ran"):
        warm_start_cached(tmp_path, other_seed, tokenizer, task, 3, settings)


def test_bad_settings_raise_config_error():
    with pytest.raises(ConfigError, match="target_band"):
        WarmStartSettings(target_band=(0.3, 0.1))
    with pytest.raises(ConfigError, match="batch_size"):
        WarmStartSettings(batch_size=0)


# --- one warm start per model/task configuration: its key and its record ------------------------


@pytest.fixture
def warm_config(tiny_config, tmp_path):
    """warm_config(*overrides): the tiny run with a 2-step warm start, cached under tmp_path."""
    return lambda *overrides: tiny_config(
        "model.warmstart_steps=2", "model.warmstart_probe_every=50", f"model.warmstart_cache_dir={tmp_path}", *overrides
    )


def record_of(config):
    from scalerl.train.run_setup import build_task, fresh_policy
    from scalerl.train.warmstart_config import warm_start_for_config

    model, tokenizer = fresh_policy(config)
    return warm_start_for_config(config, model, tokenizer, build_task(config))[2]


def key_of(config) -> str:
    """The warm-start cache key of a run config, without warm-starting."""
    from scalerl.train.run_setup import build_task, fresh_policy
    from scalerl.train.warmstart import warm_start_cache_key
    from scalerl.train.warmstart_config import warm_start_settings

    model, _ = fresh_policy(config)
    return warm_start_cache_key(model, build_task(config), config.model.warmstart_steps, warm_start_settings(config))


def test_every_rl_seed_shares_one_warm_start_and_a_warm_start_setting_changes_the_key(warm_config, tmp_path):
    base = record_of(warm_config())
    other_rl_seed = record_of(warm_config("seed=7", "rl.loss=dapo"))
    assert other_rl_seed == base  # same key, same weights (by digest)
    assert len([p for p in tmp_path.iterdir() if not p.name.startswith(".")]) == 1
    assert key_of(warm_config("seed=7")) == base.key
    for setting in ("model.init_seed=1", "model.warmstart_stop_pass_rate=0.2", "task.num_train_prompts=41"):
        assert key_of(warm_config(setting)) != base.key, setting


def test_the_built_policy_is_the_recorded_warm_start(warm_config):
    from scalerl.train.run_setup import build_policy, build_task
    from scalerl.train.warmstart import weights_digest

    config = warm_config("seed=3")
    model, _ = build_policy(config, build_task(config))
    assert weights_digest(model) == record_of(warm_config()).weights_sha256


def test_the_warm_start_runs_on_one_thread_whatever_the_run_uses(tmp_path, monkeypatch):
    seen = []
    real = warmstart_module.warm_start

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(warmstart_module, "warm_start", recording)
    torch.set_num_threads(2)
    task = ArithmeticTask(EASY)
    model, tokenizer = build_tiny_model(SPEC)
    settings = WarmStartSettings(batch_size=8, probe_prompts=2, probe_samples=1, max_new_tokens=8)
    warm_start_cached(tmp_path, model, tokenizer, task, 2, settings)
    assert seen == [warmstart_module.WARM_START_THREADS] and torch.get_num_threads() == 2


def test_behaviour_dump_ignores_comments_docstrings_and_layout_but_not_code():
    from scalerl.train.warmstart import behaviour_dump

    plain = "def f(x):\n    return x + 1\n"
    annotated = (
        '"""Module doc."""\n# a comment\n\n\ndef f(x):  # why\n    """Doc."""\n    return (x +\n            1)\n'
    )
    assert behaviour_dump(annotated) == behaviour_dump(plain)
    assert behaviour_dump("def f(x):\n    return x + 2\n") != behaviour_dump(plain)
    # a string statement after the first one is code, not a docstring
    assert behaviour_dump("def f(x):\n    return x + 1\n    'tail'\n") != behaviour_dump(plain)


@pytest.fixture
def copied_package(tmp_path, monkeypatch):
    """A copy of the scalerl sources that the code digest reads instead of the real ones."""
    import shutil

    copy = tmp_path / "scalerl"
    shutil.copytree(warmstart_module.PACKAGE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(warmstart_module, "PACKAGE_ROOT", copy)
    warmstart_module.warm_start_code_digest.cache_clear()
    yield copy
    warmstart_module.warm_start_code_digest.cache_clear()


def code_digest(*modules: str) -> str:
    warmstart_module.warm_start_code_digest.cache_clear()
    return warmstart_module.warm_start_code_digest(*modules)


def append(path, text: str) -> None:
    with open(path, "a") as handle:
        handle.write(text)


def test_code_digest_keeps_its_value_on_comment_and_docstring_edits(copied_package):
    before = code_digest()
    append(copied_package / "rl" / "registry.py", "\n# a comment\n")
    policy = copied_package / "models" / "policy.py"
    source = policy.read_text()
    first_docstring_end = source.index('"""', 3) + 3
    policy.write_text('"""Another module docstring."""' + source[first_docstring_end:])
    assert code_digest() == before


def test_code_digest_covers_the_warm_start_code_and_not_the_rl_losses(copied_package):
    before = code_digest()
    append(copied_package / "rl" / "losses.py", "\nEDITED = 1\n")  # RL maths: not part of the warm start
    assert code_digest() == before
    for covered in (
        "train/generation.py",
        "models/policy.py",
        "rl/registry.py",
        "tasks/rollout.py",
        "train/warmstart.py",
    ):
        append(copied_package / covered, "\nEDITED = 1\n")
        after = code_digest()
        assert after != before, covered
        before = after


def test_the_cache_key_covers_the_task_module_the_probe_rewards_with(copied_package):
    task = ArithmeticTask(EASY)
    model, _ = build_tiny_model(SPEC)
    before = warmstart_module.warm_start_cache_key(model, task, 3, QUICK)
    append(copied_package / "tasks" / "arithmetic.py", "\n# a comment\n")
    warmstart_module.warm_start_code_digest.cache_clear()
    assert warmstart_module.warm_start_cache_key(model, task, 3, QUICK) == before
    append(copied_package / "tasks" / "arithmetic.py", "\nEDITED = 1\n")
    warmstart_module.warm_start_code_digest.cache_clear()
    assert warmstart_module.warm_start_cache_key(model, task, 3, QUICK) != before
