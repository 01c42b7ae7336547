"""Memory-bounded steps: micro-batches accumulate the whole batch's gradient (every loss x every
aggregation, ragged lengths, a filtered group, forced tokens), chunked log-probs equal the plain
ones, and transformers' gradient checkpointing changes nothing but memory."""

import copy

import pytest
import torch

from scalerl.models.forward import hidden_token_logprobs, policy_hidden, teacher_forced_logprobs
from scalerl.models.policy import TinyModelSpec, build_tiny_model
from scalerl.rl.registry import get_aggregation
from scalerl.tasks.rollout import Rollout
from scalerl.train.batch.packed_rollouts import pack_rollouts
from scalerl.train.config.step_recipe import step_recipe
from scalerl.train.config.train_config import TrainConfig
from scalerl.train.parallel.data_parallel import AccumulatedStats, aggregation_token_weights, micro_batch_slices
from scalerl.train.train_step import build_optimizer, build_scheduler, train_step

SPEC = TinyModelSpec(num_layers=2, hidden_size=32, num_heads=2, intermediate_size=64, max_positions=64)
# (prompt length, completion length, reward, group); group 1 has one reward only: the
# zero-variance filter drops it. Lengths are ragged within and across groups.
SHAPES = [
    (3, 7, 1.0, 0),
    (5, 2, -1.0, 0),
    (4, 9, -1.0, 0),
    (6, 4, 1.0, 1),
    (2, 6, 1.0, 1),
    (7, 1, -1.0, 2),
    (3, 5, 1.0, 2),
    (4, 8, 1.0, 2),
    (5, 3, 1.0, 3),
    (2, 10, -1.0, 3),
]


def _model():
    model, _ = build_tiny_model(SPEC, seed=0, dtype=torch.float64)
    return model


def _rollouts(model):
    """Random token sequences; generator log-probs near the model's own (so some ratios clip) and
    one forced token (loss mask 0) in the longest completion."""
    generator = torch.Generator().manual_seed(1)
    rollouts = []
    for prompt_length, completion_length, reward, group in SHAPES:
        ids = torch.randint(4, model.config.vocab_size, (prompt_length + completion_length,), generator=generator)
        with torch.no_grad():
            own = teacher_forced_logprobs(model, ids[None], torch.ones_like(ids[None]), fp32_head=False)[0]
        noise = 0.3 * torch.randn(completion_length, generator=generator, dtype=torch.float64)
        loss_mask = tuple(0 if completion_length == 10 and t == 4 else 1 for t in range(completion_length))
        rollouts.append(
            Rollout(
                prompt_index=group,
                group_index=group,
                prompt_token_ids=tuple(ids[:prompt_length].tolist()),
                completion_token_ids=tuple(ids[prompt_length:].tolist()),
                generator_logprobs=tuple((own[prompt_length - 1 :] + noise).tolist()),
                token_policy_versions=(0,) * completion_length,
                reward=reward,
                truncated=False,
                interrupted=False,
                completion_text="",
                loss_mask=loss_mask,
            )
        )
    return rollouts


def _gradients_of_one_step(model, rollouts, config, reference):
    optimizer = build_optimizer(model, config.optim)
    stats = train_step(
        model,
        optimizer,
        build_scheduler(optimizer, 0),
        pack_rollouts(rollouts),
        step_recipe(config),
        reference=reference,
    )
    return stats, [parameter.grad.clone() for parameter in model.parameters()]


@pytest.mark.parametrize("aggregation", ["prompt", "sample", "token"])
@pytest.mark.parametrize("loss", ["cispo", "dapo", "grpo", "gspo"])
def test_micro_batches_accumulate_the_whole_batch_gradient(loss, aggregation):
    base = _model()
    rollouts = _rollouts(base)
    options = [
        f"rl.loss={loss}",
        f"rl.aggregation={aggregation}",
        "model.fp32_head=false",
        "rl.zero_variance_filter=true",
        "optim.grad_clip=1e9",
        "warmup_steps=0",
    ]
    if loss == "grpo":
        options.append("rl.grpo_kl_coef=0.1")
    whole_config = TrainConfig().with_overrides(options)
    reference = _model()
    with torch.no_grad():
        for parameter in reference.parameters():  # a reference that differs from the policy
            parameter.mul_(0.9)
    whole_stats, whole = _gradients_of_one_step(copy.deepcopy(base), rollouts, whole_config, reference)
    assert whole_stats.updated and (whole_stats.kept_prompts, whole_stats.total_prompts) == (3, 4)
    for micro, chunk in ((1, 0), (2, 3), (3, 4)):
        config = whole_config.with_overrides([f"train.micro_batch_size={micro}", f"train.logprob_chunk_size={chunk}"])
        stats, accumulated = _gradients_of_one_step(copy.deepcopy(base), rollouts, config, reference)
        scale = max(float(g.abs().max()) for g in whole)
        assert scale > 1e-4  # a real gradient, not zeros on both sides
        for expected, got in zip(whole, accumulated):
            torch.testing.assert_close(got, expected, rtol=0, atol=1e-6 * scale)
        assert stats.loss == pytest.approx(whole_stats.loss, abs=1e-9)
        assert stats.entropy == pytest.approx(whole_stats.entropy, rel=1e-9)
        assert stats.grad_norm == pytest.approx(whole_stats.grad_norm, rel=1e-9)
        assert stats.kept_sequences == whole_stats.kept_sequences == 8


def test_aggregation_weights_reproduce_each_aggregation():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.float64)
    groups = torch.tensor([0, 0, 1, 2])
    token_loss = torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for name in ("prompt", "sample", "token"):
        aggregation = get_aggregation(name)
        weights = aggregation_token_weights(aggregation, mask, groups)
        assert float((weights * token_loss).sum()) == pytest.approx(float(aggregation(token_loss, mask, groups)))
        assert torch.all(weights[mask == 0] == 0)
    token = aggregation_token_weights(get_aggregation("token"), mask, groups)
    assert torch.allclose(token[mask == 1], torch.full((8,), 1 / 8, dtype=torch.float64))
    prompt = aggregation_token_weights(get_aggregation("prompt"), mask, groups)
    # two groups with tokens (group 1 is empty): group 0's 4 tokens and group 2's 4 tokens
    assert torch.allclose(prompt[0, :3], torch.full((3,), 1 / 8, dtype=torch.float64))
    assert torch.allclose(prompt[3], torch.full((4,), 1 / 8, dtype=torch.float64))


def test_micro_batch_slices_cover_the_batch_once():
    assert micro_batch_slices(7, 3) == [slice(0, 3), slice(3, 6), slice(6, 7)]
    assert micro_batch_slices(7, 0) == [slice(0, 7)]
    assert micro_batch_slices(0, 4) == []
    stats = AccumulatedStats()
    stats.add(loss=0.5, entropy_sum=6.0, tokens=3, mean_ratio=1.0, clipped_fraction=0.0)
    stats.add(loss=0.25, entropy_sum=2.0, tokens=1, mean_ratio=2.0, clipped_fraction=1.0)
    assert (stats.loss, *stats.means()) == (0.75, 2.0, 1.25, 0.25)


@pytest.mark.parametrize("fp32_head", [True, False])
def test_chunked_logprobs_and_their_gradients_equal_the_plain_ones(fp32_head):
    model, _ = build_tiny_model(SPEC, seed=0)
    ids = torch.randint(4, model.config.vocab_size, (3, 11), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    mask[0, :3] = 0  # a left-padded row

    def logprobs_and_gradient(chunk_size):
        model.zero_grad(set_to_none=True)
        hidden = policy_hidden(model, ids, mask)[:, :-1]
        logprobs, entropy = hidden_token_logprobs(model, hidden, ids[:, 1:], fp32_head=fp32_head, chunk_size=chunk_size)
        (logprobs * torch.linspace(-1, 1, 10)).sum().backward()
        return logprobs.detach(), entropy, [p.grad.clone() for p in model.parameters()]

    plain, plain_entropy, plain_grads = logprobs_and_gradient(0)
    expected = teacher_forced_logprobs(model, ids, mask, fp32_head=fp32_head)
    torch.testing.assert_close(plain, expected.detach(), rtol=1e-6, atol=1e-6)
    for chunk_size in (1, 3, 4):
        chunked, entropy, grads = logprobs_and_gradient(chunk_size)
        torch.testing.assert_close(chunked, plain, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(entropy, plain_entropy, rtol=1e-6, atol=1e-6)
        for expected_grad, grad in zip(plain_grads, grads):
            torch.testing.assert_close(grad, expected_grad, rtol=1e-5, atol=1e-6)


class _ScaledHead(torch.nn.Linear):
    """Not a plain linear layer: the chunked path falls back to a checkpoint per chunk."""

    def forward(self, hidden):
        return 2.0 * super().forward(hidden)


def _head_holder(head):
    return type("Holder", (), {"get_output_embeddings": lambda self: head})()


@pytest.mark.parametrize(
    "dtype, fp32_head, head_class, frozen",
    [
        (torch.float64, False, torch.nn.Linear, False),
        (torch.float32, True, torch.nn.Linear, False),
        (torch.bfloat16, True, torch.nn.Linear, False),
        (torch.float32, True, torch.nn.Linear, True),
        (torch.float64, False, _ScaledHead, False),
    ],
)
def test_chunked_head_gradients_equal_autograd_with_bias_dtypes_and_frozen_weights(
    dtype, fp32_head, head_class, frozen
):
    generator = torch.Generator().manual_seed(3)
    head = head_class(8, 50, bias=True).to(dtype)
    head.weight.requires_grad_(not frozen)
    holder = _head_holder(head)
    hidden = torch.randn(2, 7, 8, generator=generator).to(dtype).requires_grad_(True)
    tokens = torch.randint(0, 50, (2, 7), generator=generator)
    weights = torch.linspace(-1, 1, 14).reshape(2, 7)

    def run(chunk_size):
        for tensor in (hidden, head.weight, head.bias):
            tensor.grad = None
        logprobs, entropy = hidden_token_logprobs(holder, hidden, tokens, fp32_head=fp32_head, chunk_size=chunk_size)
        (logprobs * weights.to(logprobs.dtype)).sum().backward()
        grads = [None if t.grad is None else t.grad.clone() for t in (hidden, head.weight, head.bias)]
        return logprobs.detach(), entropy, grads

    plain, plain_entropy, plain_grads = run(0)
    assert plain_grads[0].abs().max() > 1e-3 and (plain_grads[1] is None) == frozen
    for chunk_size in (2, 3):
        logprobs, entropy, grads = run(chunk_size)
        assert logprobs.dtype == plain.dtype and not entropy.requires_grad
        torch.testing.assert_close(logprobs, plain, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(entropy, plain_entropy, rtol=1e-6, atol=1e-6)
        for expected, got in zip(plain_grads, grads):
            assert (expected is None) == (got is None)
            if expected is not None:
                assert got.dtype == expected.dtype
                torch.testing.assert_close(
                    got, expected, **({} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-6})
                )
    with torch.no_grad():
        logprobs, _ = hidden_token_logprobs(holder, hidden, tokens, fp32_head=fp32_head, chunk_size=3)
    assert not logprobs.requires_grad
    torch.testing.assert_close(logprobs, plain, rtol=1e-6, atol=1e-6)


def test_gradient_checkpointing_switches_transformers_on_and_keeps_the_gradient():
    base = _model()
    rollouts = _rollouts(base)
    plain = TrainConfig().with_overrides(["model.fp32_head=false", "optim.grad_clip=1e9"])
    checkpointed_model = copy.deepcopy(base)
    _, expected = _gradients_of_one_step(copy.deepcopy(base), rollouts, plain, None)
    _, got = _gradients_of_one_step(
        checkpointed_model, rollouts, plain.with_overrides(["train.gradient_checkpointing=true"]), None
    )
    assert (
        getattr(checkpointed_model, "is_activation_checkpointing", None) or checkpointed_model.is_gradient_checkpointing
    )
    for expected_grad, grad in zip(expected, got):
        torch.testing.assert_close(grad, expected_grad, rtol=0, atol=1e-12)
