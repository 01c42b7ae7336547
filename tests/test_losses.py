"""Each loss equals its formula computed by hand, in value and in gradient; plus diagnostics."""

import math

import pytest
import torch

from scalerl.errors import ConfigError, InputError
from scalerl.rl.advantages import compute_advantages
from scalerl.rl.aggregation import prompt_mean
from scalerl.rl.losses import cispo, dapo, grpo, gspo
from scalerl.rl.registry import LOSSES, get_loss, loss_kwargs
from scalerl.rl.stats import importance_ratio_stats, masked_mean, token_entropy


def _inputs(log_ratios, logprob_value=-0.7):
    """logprobs all equal to `logprob_value`; generator log-probs set so log rho = log_ratios."""
    log_ratios = torch.tensor(log_ratios, dtype=torch.float64)
    logprobs = torch.full_like(log_ratios, logprob_value).requires_grad_(True)
    generator_logprobs = logprobs.detach() - log_ratios
    return logprobs, generator_logprobs


def _grad(loss_output, logprobs):
    (gradient,) = torch.autograd.grad(loss_output.token_loss.sum(), logprobs)
    return gradient


def test_cispo_value_and_gradient_truncate_the_weight_above_eps_max():
    # rho = 2 (below eps_max = 4), 6 (above), 0.5; last token is padding.
    logprobs, generator_logprobs = _inputs([[math.log(2.0), math.log(6.0)], [math.log(0.5), 0.0]])
    advantages = torch.tensor([1.5, -2.0], dtype=torch.float64)
    mask = torch.tensor([[1, 1], [1, 0]])
    out = cispo(logprobs, generator_logprobs, advantages, mask, eps_max=4.0)

    weights = torch.tensor([[2.0, 4.0], [0.5, 0.0]], dtype=torch.float64)
    token_advantages = torch.tensor([[1.5, 1.5], [-2.0, -2.0]], dtype=torch.float64)
    expected_loss = -weights * token_advantages * -0.7
    assert torch.allclose(out.token_loss, expected_loss)
    # gradient of -sg(min(rho, eps)) * A * logp is -min(rho, eps) * A (rho itself is not differentiated)
    assert torch.allclose(_grad(out, logprobs), -weights * token_advantages)
    assert out.clipped_fraction == pytest.approx(1 / 3)
    assert out.mean_ratio == pytest.approx((2.0 + 6.0 + 0.5) / 3)


def test_cispo_eps_max_is_configurable():
    logprobs, generator_logprobs = _inputs([[math.log(6.0)]])
    out = cispo(logprobs, generator_logprobs, torch.ones(1, dtype=torch.float64), torch.ones(1, 1), eps_max=8.0)
    assert _grad(out, logprobs).item() == pytest.approx(-6.0)
    assert out.clipped_fraction == 0.0


def test_dapo_clips_asymmetrically_and_grpo_symmetrically():
    # Positive advantage, rho = 1.25: inside DAPO's 1 + 0.28, outside GRPO's 1 + 0.2.
    logprobs, generator_logprobs = _inputs([[math.log(1.25)]])
    advantages = torch.tensor([2.0], dtype=torch.float64)
    mask = torch.ones(1, 1)
    dapo_out = dapo(logprobs, generator_logprobs, advantages, mask, eps_low=0.2, eps_high=0.28)
    grpo_out = grpo(logprobs, generator_logprobs, advantages, mask, eps=0.2, kl_coef=0.0)
    assert dapo_out.token_loss.item() == pytest.approx(-1.25 * 2.0)
    assert _grad(dapo_out, logprobs).item() == pytest.approx(-1.25 * 2.0)  # d rho / d logp = rho
    assert grpo_out.token_loss.item() == pytest.approx(-1.2 * 2.0)
    assert _grad(grpo_out, logprobs).item() == 0.0
    assert (dapo_out.clipped_fraction, grpo_out.clipped_fraction) == (0.0, 1.0)


def test_dapo_token_by_token_against_hand_computed_surrogate():
    rhos = [1.5, 0.75, 0.75, 1.3]
    advantages_per_token = [1.0, 1.0, -1.0, -1.0]
    logprobs, generator_logprobs = _inputs([[math.log(r)] for r in rhos])
    advantages = torch.tensor(advantages_per_token, dtype=torch.float64)
    out = dapo(logprobs, generator_logprobs, advantages, torch.ones(4, 1), eps_low=0.2, eps_high=0.28)
    # min(rho A, clip(rho, 0.8, 1.28) A) by hand:
    expected_objective = [1.28, 0.75, -0.8, -1.3]
    expected_grad = [0.0, -0.75, 0.0, 1.3]  # zero where the clipped branch is active
    assert out.token_loss[:, 0].tolist() == pytest.approx([-v for v in expected_objective])
    assert _grad(out, logprobs)[:, 0].tolist() == pytest.approx(expected_grad)
    assert out.clipped_fraction == pytest.approx(0.5)


def test_grpo_k3_kl_term():
    logprobs, generator_logprobs = _inputs([[0.0, 0.0]], logprob_value=-1.0)
    ref_logprobs = torch.tensor([[-1.5, -0.5]], dtype=torch.float64)
    advantages = torch.tensor([1.0], dtype=torch.float64)
    out = grpo(
        logprobs, generator_logprobs, advantages, torch.ones(1, 2), eps=0.2, kl_coef=0.1, ref_logprobs=ref_logprobs
    )
    diff = ref_logprobs - (-1.0)
    kl = diff.exp() - diff - 1.0
    assert torch.allclose(out.token_loss, -1.0 + 0.1 * kl)
    # d/dlogp [-rho A + beta (exp(ref - logp) - (ref - logp) - 1)] = -A + beta (1 - exp(ref - logp))
    assert torch.allclose(_grad(out, logprobs), -1.0 + 0.1 * (1.0 - diff.exp()))
    with pytest.raises(InputError, match="ref_logprobs"):
        grpo(logprobs, generator_logprobs, advantages, torch.ones(1, 2), eps=0.2, kl_coef=0.1)


def test_gspo_uses_the_sequence_mean_of_log_ratios():
    # seq 0: token log-ratios +-1e-3 are each outside [1 - 3e-4, 1 + 4e-4] but their mean is 0;
    # the third token is padding holding garbage that must be ignored.
    # seq 1: mean log-ratio 1e-3 -> s = e^1e-3 > 1 + 4e-4, clipped for a positive advantage.
    logprobs, generator_logprobs = _inputs([[1e-3, -1e-3, 5.0], [1e-3, 1e-3, 1e-3]])
    generator_logprobs[0, 2] = -math.inf
    advantages = torch.tensor([2.0, 3.0], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    out = gspo(logprobs, generator_logprobs, advantages, mask, eps_low=3e-4, eps_high=4e-4)

    expected = torch.tensor([[-2.0, -2.0, 0.0], [-(1 + 4e-4) * 3.0] * 3], dtype=torch.float64)
    assert torch.allclose(out.token_loss, expected)
    # Per-token gradient of the sequence-mean loss -J_i: -s_i A_i / |y_i|, times |y_i| tokens carrying it.
    gradient = _grad(out, logprobs)
    assert torch.allclose(gradient[0], torch.tensor([-2.0, -2.0, 0.0], dtype=torch.float64))
    assert torch.all(gradient[1] == 0.0)
    assert out.clipped_fraction == pytest.approx(0.5)
    assert out.mean_ratio == pytest.approx((1.0 + math.exp(1e-3)) / 2)


def test_padding_garbage_never_leaks_into_losses_or_gradients():
    logprobs = torch.tensor([[-0.5, math.nan]], dtype=torch.float64, requires_grad=True)
    generator_logprobs = torch.tensor([[-0.4, -math.inf]], dtype=torch.float64)
    mask = torch.tensor([[True, False]])
    for name in LOSSES:
        out = get_loss(name)(
            logprobs, generator_logprobs, torch.tensor([1.0], dtype=torch.float64), mask, **LOSSES[name].kwargs({})
        )
        gradient = _grad(out, logprobs)
        assert torch.isfinite(out.token_loss).all(), name
        assert out.token_loss[0, 1] == 0.0 and gradient[0, 1] == 0.0, name
        assert torch.isfinite(gradient).all() and gradient[0, 0] != 0.0, name


def test_registry_resolves_names_and_rejects_unknown_ones():
    assert get_loss("cispo") is cispo and get_loss("gspo") is gspo
    with pytest.raises(ConfigError, match="cispo, dapo, grpo, gspo"):
        get_loss("ppo")
    # values by config key: another loss's keys are ignored, missing ones take the spec's default
    assert loss_kwargs("dapo", {"cispo_eps_max": 5, "dapo_eps_high": 0.3}) == {"eps_low": 0.2, "eps_high": 0.3}
    assert loss_kwargs("cispo", {"cispo_eps_max": 8}) == {"eps_max": 8.0}


def test_bad_shapes_and_eps_raise_clear_errors():
    logprobs, generator_logprobs = _inputs([[0.0, 0.0]])
    with pytest.raises(InputError, match="advantages"):
        cispo(logprobs, generator_logprobs, torch.ones(3), torch.ones(1, 2), eps_max=4.0)
    with pytest.raises(InputError, match="mask"):
        dapo(logprobs, generator_logprobs, torch.ones(1), torch.ones(2, 2), eps_low=0.2, eps_high=0.28)
    with pytest.raises(ConfigError, match="eps_max"):
        cispo(logprobs, generator_logprobs, torch.ones(1), torch.ones(1, 2), eps_max=0.0)


def test_masked_mean_and_token_entropy():
    values = torch.tensor([[1.0, 3.0, math.inf], [2.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert masked_mean(values, mask).item() == pytest.approx(2.0)
    assert masked_mean(values, mask, dim=1).tolist() == pytest.approx([2.0, 2.0])
    # Uniform over 4 tokens: entropy log 4; one-hot-ish: ~0. Padding position holds nan logits.
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [100.0, 0.0, 0.0, 0.0], [math.nan] * 4]], dtype=torch.bfloat16)
    entropy = token_entropy(logits, torch.tensor([[1, 1, 0]]))
    assert entropy.dtype == torch.float32
    assert entropy.item() == pytest.approx(math.log(4) / 2, abs=1e-4)


def test_importance_ratio_stats():
    logprobs, generator_logprobs = _inputs([[math.log(2.0), math.log(0.5), 7.0]])
    stats = importance_ratio_stats(logprobs, generator_logprobs, torch.tensor([[1, 1, 0]]))
    assert stats["ratio_mean"] == pytest.approx(1.25)
    assert (stats["ratio_min"], stats["ratio_max"]) == pytest.approx((0.5, 2.0))
    # k3 = rho - 1 - log rho, averaged
    assert stats["generator_kl"] == pytest.approx(((1 - math.log(2)) + (-0.5 + math.log(2))) / 2)


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
def test_one_gradient_step_favours_positive_advantage_sequences(loss_name):
    # A free per-token logit table as the "policy": after one SGD step on the aggregated loss, the
    # tokens of the positive-advantage sequence gain log-probability and the negative ones lose.
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5, requires_grad=True)
    tokens = torch.tensor([[1, 2, 3], [4, 0, 1]])
    mask = torch.ones(2, 3)
    advantages = compute_advantages(torch.tensor([1.0, -1.0]), torch.tensor([0, 0]), "batch")

    def token_logprobs():
        return torch.log_softmax(logits, dim=-1).gather(-1, tokens[..., None]).squeeze(-1)

    before = token_logprobs().detach()
    out = get_loss(loss_name)(token_logprobs(), before, advantages, mask, **LOSSES[loss_name].kwargs({}))
    prompt_mean(out.token_loss, mask, torch.tensor([0, 0])).backward()
    with torch.no_grad():
        logits -= 0.1 * logits.grad
    change = token_logprobs().detach() - before
    assert torch.all(change[0] > 0) and torch.all(change[1] < 0)
