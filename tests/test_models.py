"""Tiny model, character tokenizer, local loading and the FP32 LM head."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from scalerl.errors import ConfigError, InputError
from scalerl.models.char_tokenizer import build_char_tokenizer, char_vocabulary
from scalerl.models.forward import policy_logits, positions_from_mask, teacher_forced_logprobs, token_logprobs
from scalerl.models.policy import (
    TinyModelSpec,
    build_tiny_model,
    count_parameters,
    load_policy,
    resolve_dtype,
    save_model,
)

SMALL = TinyModelSpec(num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_positions=64)
TEXT = "12+47+30=<think>12+47=59;59+30=89</think>89"


def test_char_tokenizer_round_trips_text_and_keeps_think_tags_whole():
    tokenizer = build_char_tokenizer()
    ids = tokenizer(TEXT)["input_ids"]
    assert ids[0] == tokenizer.bos_token_id
    assert tokenizer.decode(ids, skip_special_tokens=True) == TEXT
    # one token per character, the two tags one token each, plus <bos>
    assert len(ids) == len(TEXT) - len("<think>") - len("</think>") + 2 + 1
    assert tokenizer.convert_tokens_to_ids("</think>") == char_vocabulary()["</think>"]
    assert tokenizer.pad_token_id == 0 and tokenizer.padding_side == "left"


def test_saved_tokenizer_loads_with_autotokenizer(tmp_path):
    tokenizer = build_char_tokenizer()
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    assert loaded(TEXT)["input_ids"] == tokenizer(TEXT)["input_ids"]
    assert (loaded.eos_token_id, loaded.pad_token_id, loaded.bos_token_id) == (
        tokenizer.eos_token_id,
        tokenizer.pad_token_id,
        tokenizer.bos_token_id,
    )
    batch = loaded(["1+2=", "10+20="], padding=True)
    assert batch["attention_mask"][0][:2] == [0, 0]  # left padding


def test_default_tiny_model_is_about_half_a_million_parameters():
    model, tokenizer = build_tiny_model()
    assert 300_000 < count_parameters(model) < 700_000
    assert model.config.vocab_size == len(tokenizer)


def test_saved_model_loads_with_automodel_and_gives_identical_logits(tmp_path):
    model, tokenizer = build_tiny_model(SMALL, seed=3)
    save_model(model, tokenizer, tmp_path / "policy")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "policy", local_files_only=True)
    batch = tokenizer(["12+3=", "1+1="], padding=True, return_tensors="pt")
    expected = policy_logits(model, batch["input_ids"], batch["attention_mask"])
    assert torch.equal(policy_logits(loaded, batch["input_ids"], batch["attention_mask"]), expected)
    reloaded, reloaded_tokenizer = load_policy(tmp_path / "policy")
    assert torch.equal(policy_logits(reloaded, batch["input_ids"], batch["attention_mask"]), expected)
    assert reloaded_tokenizer(TEXT)["input_ids"] == tokenizer(TEXT)["input_ids"]


def test_model_init_is_deterministic_under_seed_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    first, _ = build_tiny_model(SMALL, seed=7)
    after = torch.rand(1)
    second, _ = build_tiny_model(SMALL, seed=7)
    third, _ = build_tiny_model(SMALL, seed=8)
    assert torch.equal(before, after)
    assert torch.equal(first.lm_head.weight, second.lm_head.weight)
    assert not torch.equal(first.lm_head.weight, third.lm_head.weight)


def test_fp32_head_gives_float32_logits_from_a_bf16_body():
    model, tokenizer = build_tiny_model(SMALL, dtype="bfloat16")
    batch = tokenizer(["12+3="], return_tensors="pt")
    fp32 = policy_logits(model, batch["input_ids"], batch["attention_mask"], fp32_head=True)
    native = policy_logits(model, batch["input_ids"], batch["attention_mask"], fp32_head=False)
    assert fp32.dtype == torch.float32 and native.dtype == torch.bfloat16
    assert torch.allclose(fp32, native.float(), atol=0.1)


def test_fp32_head_on_a_float32_body_matches_the_models_own_forward():
    model, tokenizer = build_tiny_model(SMALL)
    batch = tokenizer(["12+3=", "1+1="], padding=True, return_tensors="pt")
    positions = positions_from_mask(batch["attention_mask"])
    own = model(**batch, position_ids=positions).logits
    assert torch.allclose(policy_logits(model, batch["input_ids"], batch["attention_mask"]), own, atol=1e-6)


def test_positions_from_left_padded_mask():
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    assert positions_from_mask(mask).tolist() == [[0, 0, 0, 1], [0, 1, 2, 3]]


def test_token_logprobs_is_log_softmax_at_the_token():
    logits = torch.tensor([[[1.0, 2.0, 3.0]]])
    expected = 2.0 - torch.log(torch.exp(torch.tensor([1.0, 2.0, 3.0])).sum())
    assert torch.allclose(token_logprobs(logits, torch.tensor([[1]])), expected.reshape(1, 1))


def test_teacher_forced_logprobs_score_each_token_given_its_prefix():
    model, tokenizer = build_tiny_model(SMALL)
    batch = tokenizer(["12+3="], return_tensors="pt")
    logprobs = teacher_forced_logprobs(model, batch["input_ids"], batch["attention_mask"])
    logits = model(**batch).logits
    expected = torch.log_softmax(logits[0, 2], dim=-1)[batch["input_ids"][0, 3]]
    assert logprobs.shape == (1, batch["input_ids"].shape[1] - 1)
    assert torch.isclose(logprobs[0, 2], expected, atol=1e-5)


def test_loading_errors_are_clear(tmp_path):
    with pytest.raises(InputError, match="no config.json"):
        load_policy(tmp_path / "missing")
    with pytest.raises(ConfigError, match="dtype"):
        resolve_dtype("float8")
