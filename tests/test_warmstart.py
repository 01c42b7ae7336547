"""Supervised warm-start: its loss, early stop on the pass-rate probe, determinism and cache."""

import pytest
import torch

import scalerl.train.warmstart as warmstart_module
from scalerl.errors import ConfigError
from scalerl.models.policy import TinyModelSpec, build_tiny_model
from scalerl.tasks.arithmetic import ArithmeticTask, TaskExample
from scalerl.tasks.config import TaskConfig
from scalerl.train.warmstart import (
    WarmStartSettings,
    demonstration_ids,
    supervised_loss,
    warm_start,
    warm_start_cached,
)

SPEC = TinyModelSpec(num_layers=1, hidden_size=64, num_heads=2, intermediate_size=128, max_positions=64)
EASY = TaskConfig(num_operands=2, max_digits=1, num_train_prompts=40, num_val_prompts=10)
QUICK = WarmStartSettings(batch_size=32, learning_rate=1e-2, probe_every=20, probe_prompts=10,
                          probe_samples=4, max_new_tokens=24, target_band=(0.05, 1.0))


@pytest.fixture(autouse=True)
def single_thread():
    """Tiny matrices: one thread is faster, and far faster when the cores are shared."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
