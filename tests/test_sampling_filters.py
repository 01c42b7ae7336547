"""Top-k and the CTRL repetition penalty in the generator: known answers on hand-made logits rows
and on models whose next-token logits are fixed."""

import pytest
import torch
from fixed_logits import SMALL, constant_logits_model

from scalerl.errors import ConfigError
from scalerl.models.forward import teacher_forced_logprobs
from scalerl.models.policy import build_tiny_model
from scalerl.tasks.rollout import LengthControl, SamplingSettings
from scalerl.train.generation import apply_repetition_penalty, gumbel_noise, sample_with_noise, top_k_filter
from scalerl.train.step_rollouts import generate_rollouts

TRUNCATE = LengthControl(mode="truncate")
INF = float("inf")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _generate(model, tokenizer, prompts, sampling, seed=0, num_generations=2):
    return generate_rollouts(
        model,
        tokenizer,
        prompts,
        list(range(len(prompts))),
        num_generations=num_generations,
        sampling=sampling,
        length_control=TRUNCATE,
        torch_generator=torch.Generator().manual_seed(seed),
    )


def test_top_k_keeps_the_k_largest_logits_and_their_ties():
    logits = torch.tensor([[0.5, 3.0, -1.0, 2.0, 2.0], [1.0, 0.0, 4.0, -2.0, 3.0]])
    assert top_k_filter(logits, 2).tolist() == [[-INF, 3.0, -INF, 2.0, 2.0], [-INF, -INF, 4.0, -INF, 3.0]]
    assert top_k_filter(logits, 0) is logits  # off
    assert top_k_filter(logits, 5) is logits


def test_top_k_samples_only_among_the_k_most_likely():
    logits = torch.tensor([[0.5, 3.0, -1.0, 2.9, 0.0]]).expand(2000, 5)
    noise = gumbel_noise(2000, 5, torch.Generator().manual_seed(3))
    picked = sample_with_noise(logits, SamplingSettings(top_k=2), noise)
    assert set(picked.tolist()) == {1, 3}
    assert set(sample_with_noise(logits, SamplingSettings(), noise).tolist()) == {0, 1, 2, 3, 4}


def test_top_k_one_is_greedy_decoding_with_the_policys_logprobs():
    model, tokenizer = build_tiny_model(SMALL, seed=1)
    prompts = ["12+47+30=", "5+6="]
    greedy = _generate(model, tokenizer, prompts, SamplingSettings(max_new_tokens=12, temperature=0.0))
    for seed in (1, 2):
        top_1 = _generate(model, tokenizer, prompts, SamplingSettings(max_new_tokens=12, top_k=1), seed=seed)
        assert [r.completion_token_ids for r in top_1] == [r.completion_token_ids for r in greedy]
        # recorded log-probs: the untruncated policy's (log 1 = 0 would be the truncated one's)
        assert [r.generator_logprobs for r in top_1] == [r.generator_logprobs for r in greedy]
        assert all(lp < 0 for r in top_1 for lp in r.generator_logprobs)


def test_repetition_penalty_is_the_ctrl_rule_on_a_hand_made_row():
    logits = torch.tensor([[2.0, -1.0, 0.5, 3.0, 0.0, -4.0]])
    seen = torch.tensor([[True, True, False, False, True, False]])
    # seen and positive: divided; seen and negative (or 0): multiplied; unseen: unchanged
    expected = [[1.0, -2.0, 0.5, 3.0, 0.0, -4.0]]
    assert apply_repetition_penalty(logits, seen, 2.0).tolist() == expected
    assert apply_repetition_penalty(logits, seen, 0.5).tolist() == [[4.0, -0.5, 0.5, 3.0, 0.0, -4.0]]
    assert apply_repetition_penalty(logits, seen, 1.0) is logits


def test_repetition_penalty_steers_greedy_decoding_by_prompt_and_completion_tokens():
    _, tokenizer = build_tiny_model(SMALL)
    logits = {"7": 3.0, "8": 2.5, "<eos>": -30.0, "</think>": -30.0}
    model = constant_logits_model(tokenizer, logits)
    penalised = SamplingSettings(max_new_tokens=5, temperature=0.0, repetition_penalty=2.0)
    seven, eight = tokenizer.convert_tokens_to_ids("7"), tokenizer.convert_tokens_to_ids("8")
    # "5+6=": 7 (3.0) first; 7 seen -> 1.5 < 2.5: 8; both seen: 1.5 > 1.25: 7 from then on
    rollout = _generate(model, tokenizer, ["5+6="], penalised, num_generations=1)[0]
    assert rollout.completion_token_ids == (seven, eight, seven, seven, seven)
    # a 7 in the prompt is penalised from the first token on
    rollout_7 = _generate(model, tokenizer, ["7+1="], penalised, num_generations=1)[0]
    assert rollout_7.completion_token_ids == (eight, seven, seven, seven, seven)
    # without the penalty: 7 always; log-probs are the unpenalised policy's either way
    plain = _generate(
        model, tokenizer, ["5+6="], SamplingSettings(max_new_tokens=5, temperature=0.0), num_generations=1
    )
    assert plain[0].completion_token_ids == (seven,) * 5
    log_probs = torch.log_softmax(model.lm_head.weight[:, 0].float(), dim=-1)
    assert rollout.generator_logprobs == pytest.approx([log_probs[t].item() for t in rollout.completion_token_ids])


def test_bad_top_k_and_repetition_penalty_are_config_errors():
    with pytest.raises(ConfigError, match="top_k must be >= 0"):
        SamplingSettings(top_k=-1)
    with pytest.raises(ConfigError, match="repetition_penalty must be > 0"):
        SamplingSettings(repetition_penalty=0.0)


def test_max_prompt_length_keeps_the_last_tokens_of_a_longer_prompt():
    settings = SamplingSettings(max_prompt_length=3)
    assert settings.cut_prompt([5, 6, 7, 8, 9]) == [7, 8, 9]
    assert settings.cut_prompt([5, 6]) == [5, 6]
    assert SamplingSettings().cut_prompt([5, 6, 7, 8, 9]) == [5, 6, 7, 8, 9]  # 0: no limit
    with pytest.raises(ConfigError, match="max_prompt_length must be >= 0"):
        SamplingSettings(max_prompt_length=-1)


def test_a_cut_prompt_is_what_the_policy_sees_and_trains_on():
    model, tokenizer = build_tiny_model(SMALL, seed=1)
    full_ids = tuple(tokenizer("12+47+30=")["input_ids"])  # BOS and 9 characters
    sampling = SamplingSettings(max_new_tokens=8, max_prompt_length=4)
    rollouts = _generate(model, tokenizer, ["12+47+30="], sampling, seed=4)
    for rollout in rollouts:
        assert rollout.prompt_token_ids == full_ids[-4:]  # "30=" and the '+' before it, no BOS
        ids = torch.tensor([rollout.prompt_token_ids + rollout.completion_token_ids])
        with torch.no_grad():  # the recorded log-probs are those given the cut prompt alone
            logprobs = teacher_forced_logprobs(model, ids, torch.ones_like(ids))
        recorded = torch.tensor(rollout.generator_logprobs)
        assert torch.allclose(logprobs[0, -len(recorded) :], recorded, atol=1e-5)
    uncut = _generate(model, tokenizer, ["12+47+30="], SamplingSettings(max_new_tokens=8), seed=4)
    assert uncut[0].prompt_token_ids == full_ids
