"""Rollout generation: determinism, the on-policy log-prob identity, stops, forced interruption,
the in-flight weight-update hook and sampling filters (the pass-rate evaluation: test_held_out)."""

import copy

import numpy as np
import pytest
import torch
from fixed_logits import SMALL, constant_logits_model

from scalerl.errors import ConfigError, InputError
from scalerl.models.forward import teacher_forced_logprobs
from scalerl.models.policy import build_tiny_model
from scalerl.tasks.rollout import LengthControl, Rollout, SamplingSettings
from scalerl.train import generation
from scalerl.train.generation import gumbel_noise, left_pad, sample_with_noise, should_compact, top_p_filter
from scalerl.train.step_rollouts import generate_rollouts

PROMPTS = ["12+47+30=", "5+6=", "123+4+56+7="]
TRUNCATE = LengthControl(mode="truncate")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _generate(
    model,
    tokenizer,
    *,
    seed=0,
    max_new_tokens=24,
    length_control=TRUNCATE,
    hook=None,
    num_generations=3,
    prompts=PROMPTS,
    fp32_head=True,
):
    return generate_rollouts(
        model,
        tokenizer,
        prompts,
        list(range(10, 10 + len(prompts))),
        num_generations=num_generations,
        sampling=SamplingSettings(max_new_tokens=max_new_tokens, fp32_head=fp32_head),
        length_control=length_control,
        torch_generator=torch.Generator().manual_seed(seed),
        weight_update_hook=hook,
    )


@pytest.fixture(scope="module")
def policy():
    return build_tiny_model(SMALL, seed=1)


def test_same_generator_seed_gives_the_same_rollouts(policy):
    model, tokenizer = policy
    first, second = _generate(model, tokenizer, seed=5), _generate(model, tokenizer, seed=5)
    assert first == second
    assert first != _generate(model, tokenizer, seed=6)


def test_rollouts_are_grouped_by_prompt(policy):
    model, tokenizer = policy
    rollouts = _generate(model, tokenizer)
    assert [r.group_index for r in rollouts] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert [r.prompt_index for r in rollouts] == [10, 10, 10, 11, 11, 11, 12, 12, 12]
    assert rollouts[3].prompt_token_ids == tuple(tokenizer("5+6=")["input_ids"])
    assert all(r.reward == 0.0 for r in rollouts)


def test_generator_logprobs_equal_a_fresh_teacher_forced_pass(policy):
    model, tokenizer = policy
    budgets = LengthControl(thinking_budget_min=4, thinking_budget_max=9)
    rollouts = _generate(model, tokenizer, max_new_tokens=30, length_control=budgets)
    assert any(r.interrupted for r in rollouts)  # forced tokens are covered too
    for rollout in rollouts:
        ids = torch.tensor([rollout.prompt_token_ids + rollout.completion_token_ids])
        with torch.no_grad():
            logprobs = teacher_forced_logprobs(model, ids, torch.ones_like(ids))
        recorded = torch.tensor(rollout.generator_logprobs)
        assert torch.allclose(logprobs[0, -len(recorded) :], recorded, atol=1e-5)


def test_fp32_head_shrinks_generator_trainer_mismatch_in_bf16():
    """Generator: bf16 body (an inference engine); trainer: a float32 copy of the same weights.
    With the FP32 head on both, bf16 rounding of the logits no longer adds to the mismatch."""
    generator_model, tokenizer = build_tiny_model(SMALL, seed=2, dtype="bfloat16")
    with torch.no_grad():
        generator_model.lm_head.weight.mul_(30)  # trained models have large logits (~10)
    trainer_model = copy.deepcopy(generator_model).float()
    mismatch = {}
    for fp32_head in (True, False):
        rollouts = _generate(generator_model, tokenizer, max_new_tokens=20, fp32_head=fp32_head, num_generations=4)
        sequences = [r.prompt_token_ids + r.completion_token_ids for r in rollouts]
        ids, mask = left_pad(sequences, tokenizer.pad_token_id)
        with torch.no_grad():
            trainer = teacher_forced_logprobs(trainer_model, ids, mask, fp32_head=fp32_head)
        errors = [
            (trainer[row, -r.num_completion_tokens :] - torch.tensor(r.generator_logprobs)).abs()
            for row, r in enumerate(rollouts)
        ]
        mismatch[fp32_head] = torch.cat(errors).mean().item()
    assert mismatch[True] < 0.85 * mismatch[False]


def test_eos_stops_a_sequence_and_is_not_truncated():
    _, tokenizer = build_tiny_model(SMALL)
    model = constant_logits_model(tokenizer, {"<eos>": 30.0})
    rollouts = _generate(model, tokenizer)
    assert all(r.completion_token_ids == (tokenizer.eos_token_id,) for r in rollouts)
    assert all(not r.truncated and r.completion_text == "" for r in rollouts)


def test_sequences_without_eos_are_cut_and_flagged_truncated():
    _, tokenizer = build_tiny_model(SMALL)
    model = constant_logits_model(tokenizer, {"<eos>": -30.0, "</think>": -30.0})
    rollouts = _generate(model, tokenizer, max_new_tokens=7)
    assert all(r.truncated and r.num_completion_tokens == 7 for r in rollouts)
    assert not any(r.interrupted for r in rollouts)


def test_mixed_stops_are_consistent(policy):
    _, tokenizer = policy
    model = constant_logits_model(tokenizer, {"<eos>": 3.0})  # p(eos) ~ 0.16 per step
    rollouts = _generate(model, tokenizer, max_new_tokens=10, num_generations=8)
    assert {r.truncated for r in rollouts} == {True, False}
    for r in rollouts:
        ends_with_eos = r.completion_token_ids[-1] == tokenizer.eos_token_id
        assert r.truncated == (not ends_with_eos)
        assert r.truncated == (r.num_completion_tokens == 10) or not r.truncated
        assert tokenizer.eos_token_id not in r.completion_token_ids[:-1]


def test_forced_interruption_inserts_the_phrase_at_the_sampled_budget():
    _, tokenizer = build_tiny_model(SMALL)
    model = constant_logits_model(tokenizer, {"<eos>": -30.0, "</think>": -30.0})
    control = LengthControl(thinking_budget_min=5, thinking_budget_max=9, interruption_phrase="!!</think>")
    rollouts = _generate(model, tokenizer, max_new_tokens=20, length_control=control, num_generations=6)
    phrase_ids = tuple(tokenizer("!!</think>", add_special_tokens=False)["input_ids"])
    budgets = set()
    for r in rollouts:
        assert r.interrupted
        budget = next(i for i in range(len(r.loss_mask)) if r.loss_mask[i] == 0)
        budgets.add(budget)
        assert 5 <= budget <= 9
        assert r.completion_token_ids[budget : budget + 3] == phrase_ids
        assert r.loss_mask == (1,) * budget + (0,) * 3 + (1,) * (20 - budget - 3)
        assert "!!</think>" in r.completion_text
    assert len(budgets) > 1  # budgets are drawn per sequence


def test_no_interruption_once_thinking_has_ended():
    _, tokenizer = build_tiny_model(SMALL)
    model = constant_logits_model(tokenizer, {"<eos>": -30.0, "</think>": 30.0})
    control = LengthControl(thinking_budget_min=3, thinking_budget_max=3)
    rollouts = _generate(model, tokenizer, max_new_tokens=8, length_control=control)
    assert not any(r.interrupted for r in rollouts)
    assert all(set(r.loss_mask) == {1} for r in rollouts)


def test_weight_update_hook_changes_versions_of_later_tokens_only(policy):
    model, tokenizer = build_tiny_model(SMALL, seed=1)
    reference = _generate(model, tokenizer, max_new_tokens=12)
    calls = []

    def hook():
        calls.append(len(calls) + 1)
        if len(calls) == 5:  # before decoding step 5: tokens 0..4 are already sampled
            with torch.no_grad():
                model.lm_head.weight.mul_(3.0)
            return 7
        return None

    updated = _generate(model, tokenizer, max_new_tokens=12, hook=hook)
    assert len(calls) == max(r.num_completion_tokens for r in updated) - 1
    for before, after in zip(reference, updated):
        n = after.num_completion_tokens
        assert after.token_policy_versions == (0,) * min(5, n) + (7,) * max(0, n - 5)
        assert after.completion_token_ids[:5] == before.completion_token_ids[:5]
        assert after.generator_logprobs[:5] == before.generator_logprobs[:5]
    assert any(r.generator_logprobs[5:] != s.generator_logprobs[5:] for r, s in zip(updated, reference))
    assert min(r.oldest_policy_version for r in updated) == 0


def test_policy_version_argument_is_recorded(policy):
    model, tokenizer = policy
    rollouts = generate_rollouts(
        model,
        tokenizer,
        ["1+1="],
        [0],
        num_generations=2,
        sampling=SamplingSettings(max_new_tokens=4),
        length_control=TRUNCATE,
        torch_generator=torch.Generator().manual_seed(0),
        policy_version=3,
    )
    assert all(set(r.token_policy_versions) == {3} for r in rollouts)


def test_top_p_keeps_the_smallest_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    assert torch.isfinite(top_p_filter(logits, 0.6)).tolist() == [[True, True, False]]
    assert torch.isfinite(top_p_filter(logits, 0.5)).tolist() == [[True, False, False]]
    assert torch.equal(top_p_filter(logits, 1.0), logits)


def test_left_pad_aligns_real_tokens_right():
    ids, mask = left_pad([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_bad_arguments_raise_input_error(policy):
    model, tokenizer = policy
    with pytest.raises(InputError, match="prompt indices"):
        generate_rollouts(
            model,
            tokenizer,
            ["1+1="],
            [0, 1],
            num_generations=1,
            sampling=SamplingSettings(),
            length_control=TRUNCATE,
            torch_generator=torch.Generator(),
        )


def test_rollout_defaults_validation_and_staleness():
    rollout = Rollout(
        prompt_index=0,
        group_index=0,
        prompt_token_ids=(1,),
        completion_token_ids=(7, 8, 2),
        generator_logprobs=(-1.0, -2.0, -0.5),
        token_policy_versions=(4, 5, 5),
        reward=0.0,
        truncated=False,
        interrupted=False,
        completion_text="78",
    )
    assert rollout.loss_mask == (1, 1, 1)
    assert rollout.oldest_policy_version == 4
    assert rollout.with_reward(1).reward == 1.0 and rollout.reward == 0.0
    with pytest.raises(InputError, match="token_policy_versions has 2 entries for 3"):
        Rollout(
            prompt_index=0,
            group_index=0,
            prompt_token_ids=(1,),
            completion_token_ids=(7, 8, 2),
            generator_logprobs=(-1.0, -2.0, -0.5),
            token_policy_versions=(4, 5),
            reward=0.0,
            truncated=False,
            interrupted=False,
            completion_text="78",
        )


def test_sampling_and_length_settings_are_validated():
    with pytest.raises(ConfigError, match="top_p"):
        SamplingSettings(top_p=0.0)
    with pytest.raises(ConfigError, match="temperature"):
        SamplingSettings(temperature=float("nan"))
    with pytest.raises(ConfigError, match="interrupt, truncate, penalty"):
        LengthControl(mode="cut")
    with pytest.raises(ConfigError, match="thinking budgets"):
        LengthControl(thinking_budget_min=10, thinking_budget_max=5)
    with pytest.raises(ConfigError, match="must end with"):
        LengthControl(interruption_phrase="stop now")


def test_gumbel_max_sampling_follows_the_softmax():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    generator = torch.Generator().manual_seed(3)
    draws = 20000
    noise = gumbel_noise(draws, 4, generator)
    tokens = sample_with_noise(logits.expand(draws, 4), SamplingSettings(), noise)
    frequencies = torch.bincount(tokens, minlength=4).double() / draws
    expected = torch.softmax(logits[0].double(), dim=-1)
    # 4 standard errors of a binomial proportion at 20k draws is < 0.014
    assert torch.allclose(frequencies, expected, atol=0.014)
    top_p = sample_with_noise(logits.expand(draws, 4), SamplingSettings(top_p=0.5), noise)
    assert set(top_p.tolist()) == {0}


def test_temperature_zero_is_greedy_whatever_the_noise():
    logits = torch.tensor([[0.1, 2.0, 1.9, -1.0], [3.0, -1.0, 2.9, 0.0]])
    noise = gumbel_noise(2, 4, torch.Generator().manual_seed(0)) * 100.0  # noise that would flip a sample
    greedy = SamplingSettings(temperature=0.0)
    assert sample_with_noise(logits, greedy, noise).tolist() == [1, 0]
    assert sample_with_noise(logits, SamplingSettings(), noise).tolist() != [1, 0]


def test_greedy_rollouts_repeat_for_any_generator_seed(policy):
    model, tokenizer = policy
    greedy = SamplingSettings(max_new_tokens=12, temperature=0.0)
    first, second = (
        generate_rollouts(
            model,
            tokenizer,
            PROMPTS,
            [0, 1, 2],
            num_generations=2,
            sampling=greedy,
            length_control=TRUNCATE,
            torch_generator=torch.Generator().manual_seed(s),
        )
        for s in (1, 2)
    )
    assert [r.completion_token_ids for r in first] == [r.completion_token_ids for r in second]
    # both generations of a prompt are the argmax path
    assert first[0].completion_token_ids == first[1].completion_token_ids


def test_negative_temperature_is_a_config_error():
    with pytest.raises(ConfigError, match="temperature must be >= 0"):
        SamplingSettings(temperature=-0.5)


def test_should_compact_waits_for_an_eighth_of_the_batch():
    assert not should_compact(0, 64)
    assert not should_compact(7, 64)
    assert should_compact(8, 64)
    assert should_compact(1, 3)


def test_finished_rows_leave_the_batch_without_changing_the_rollouts(policy, monkeypatch):
    _, tokenizer = policy
    model = constant_logits_model(tokenizer, {"<eos>": 3.0})  # sequences stop at scattered steps
    batch_sizes = []
    real_forward = generation.policy_forward

    def recording_forward(model, input_ids, *args, **kwargs):
        batch_sizes.append(input_ids.shape[0])
        return real_forward(model, input_ids, *args, **kwargs)

    monkeypatch.setattr(generation, "policy_forward", recording_forward)
    compacted = _generate(model, tokenizer, max_new_tokens=12, num_generations=8)
    shrinking = list(batch_sizes)
    monkeypatch.setattr(generation, "should_compact", lambda finished, decoding: False)
    batch_sizes.clear()
    full = _generate(model, tokenizer, max_new_tokens=12, num_generations=8)
    assert set(batch_sizes) == {24}
    assert shrinking[0] == 24 and shrinking[-1] < 24 and shrinking == sorted(shrinking, reverse=True)
    for a, b in zip(compacted, full):
        assert a.completion_token_ids == b.completion_token_ids
        assert a.truncated == b.truncated
        assert a.generator_logprobs == pytest.approx(b.generator_logprobs, abs=1e-5)


def _packed_fields_equal(a, b):
    return all(
        np.array_equal(getattr(a, name), getattr(b, name)) and getattr(a, name).dtype == getattr(b, name).dtype
        for name in a.__dataclass_fields__
    )


@pytest.mark.parametrize("mode", ["truncate", "interrupt", "eos"])
def test_packed_generation_equals_packing_the_rollouts(policy, mode):
    """generate_packed reads the decoder's token grid: field for field (dtype included) what
    pack_rollouts gives for generate_rollouts' Rollouts with the same generator seed, with ragged
    lengths (EOS stops), forced interruption phrases, an in-flight version change and the same
    generator state after."""
    from scalerl.train.batch.packed_rollouts import pack_rollouts
    from scalerl.train.step_rollouts import generate_packed

    model, tokenizer = policy
    if mode == "eos":
        model = constant_logits_model(tokenizer, {"<eos>": 1.5})
    control = (
        LengthControl(thinking_budget_min=3, thinking_budget_max=8, interruption_phrase="!!</think>")
        if mode == "interrupt"
        else TRUNCATE
    )
    results = []
    for packed in (False, True):
        calls = []

        def hook():
            calls.append(1)
            return 4 if len(calls) == 6 else None

        generator = torch.Generator().manual_seed(3)
        kwargs = dict(
            num_generations=4,
            sampling=SamplingSettings(max_new_tokens=16),
            length_control=control,
            torch_generator=generator,
            policy_version=2,
            weight_update_hook=hook,
        )
        indices = list(range(10, 10 + len(PROMPTS)))
        batch = (
            generate_packed(model, tokenizer, PROMPTS, indices, **kwargs)[0]
            if packed
            else pack_rollouts(generate_rollouts(model, tokenizer, PROMPTS, indices, **kwargs))
        )
        results.append((batch, generator.get_state()))
    (expected, state_a), (got, state_b) = results
    assert _packed_fields_equal(got, expected) and torch.equal(state_a, state_b)
    if mode == "eos":
        assert (
            len(set(np.diff(got.completion_offsets).tolist())) > 1
        )  # ragged: EOS ended sequences at different lengths
    if mode == "interrupt":
        assert got.interrupted.any() and (got.loss_mask == 0).any()
    assert set(got.versions.tolist()) == {2, 4}
