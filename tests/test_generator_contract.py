"""The generator interface contract (tests/generator_contract.py) on CPU: a fake
rollout backend with vLLM's interface passes it, broken outputs are caught, and the generator
worker's vLLM path (backend swapped for the fake) answers a request within the contract."""

import dataclasses

import pytest
from generator_contract import batch_violations, check, rollout_violations

from scalerl.distributed.messages import GeneratedBatch, GenerationRequest
from scalerl.errors import ScaleRLError
from scalerl.tasks.rollout import Rollout
from scalerl.train.batch.packed_rollouts import pack_rollouts, unpack_rollouts


class FakeRolloutBackend:
    """VllmRolloutBackend's interface with deterministic output: prompts x G -> rollouts (packed) whose
    last two tokens are a forced phrase (log-prob 0, loss_mask 0), reward 0.0 (scored later)."""

    def __init__(self, model_path="fake", sampling=None, length_control=None):
        self.tokenizer = None
        self.loaded_versions = []

    def load_snapshot(self, snapshot):
        self.loaded_versions.append(snapshot.version)

    def generate(self, prompts, prompt_indices, *, num_generations, seed, policy_version):
        rollouts = []
        for group, (prompt, index) in enumerate(zip(prompts, prompt_indices)):
            for j in range(num_generations):
                sampled = 5 + (seed + j) % 2
                rollouts.append(
                    Rollout(
                        prompt_index=int(index),
                        group_index=group,
                        prompt_token_ids=tuple(ord(c) % 50 for c in prompt) or (0,),
                        completion_token_ids=(5,) * (sampled + 2),
                        generator_logprobs=(-0.5,) * sampled + (0.0, 0.0),
                        token_policy_versions=(policy_version,) * (sampled + 2),
                        reward=0.0,
                        truncated=False,
                        interrupted=True,
                        completion_text="4",
                        loss_mask=(1,) * sampled + (0, 0),
                    )
                )
        return pack_rollouts(rollouts)


def _fake_rollouts(version=3):
    return unpack_rollouts(
        FakeRolloutBackend().generate(
            ["1+1=", "2+2=", "3+3="], [7, 2, 9], num_generations=2, seed=0, policy_version=version
        )
    )


def test_fake_backend_meets_the_contract():
    assert rollout_violations(_fake_rollouts(), [7, 2, 9], 2, min_version=3, max_version=3) == []


@pytest.mark.parametrize(
    "breakage, message",
    [
        (lambda rs: rs[:-1], "expected 6 rollouts"),
        (lambda rs: [rs[1], rs[0], *rs[2:]], None),  # still grouped: same group, same prompt
        (lambda rs: [rs[2], rs[1], rs[0], *rs[3:]], "group/prompt"),
        (lambda rs: [dataclasses.replace(rs[0], generator_logprobs=(0.5,) * 5 + (0.0, 0.0)), *rs[1:]], "log-prob"),
        (lambda rs: [dataclasses.replace(rs[0], generator_logprobs=(-0.5,) * 7), *rs[1:]], "forced"),
        (lambda rs: [dataclasses.replace(rs[0], token_policy_versions=(3, 3, 3, 2, 3, 3, 3)), *rs[1:]], "backwards"),
        (lambda rs: [dataclasses.replace(rs[0], token_policy_versions=(4,) * 7), *rs[1:]], "outside"),
        (lambda rs: [dataclasses.replace(rs[0], reward=float("nan")), *rs[1:]], "reward"),
    ],
)
def test_broken_outputs_are_caught(breakage, message):
    problems = rollout_violations(breakage(_fake_rollouts()), [7, 2, 9], 2, min_version=3, max_version=3)
    if message is None:
        assert problems == []
    else:
        assert problems and any(message in p for p in problems), problems
        with pytest.raises(ScaleRLError, match="breaks the generator contract"):
            check(problems)


def test_batch_contract_checks_step_and_versions():
    request = GenerationRequest(step=5, prompt_indices=(7, 2, 9), seed=0, min_version=3)
    batch = GeneratedBatch(
        step=5,
        generator_id=0,
        packed=pack_rollouts(_fake_rollouts()),
        start_version=3,
        started_at=1.0,
        finished_at=2.0,
        weight_sync_seconds=0.01,
        num_weight_swaps=1,
    )
    assert batch_violations(batch, request, 2, published_version=4) == []
    wrong = dataclasses.replace(batch, step=6, start_version=2)
    problems = batch_violations(wrong, request, 2, published_version=4)
    assert any("answers request step 5" in p for p in problems)
    assert any("start version 2" in p for p in problems)


@pytest.mark.slow
def test_generator_worker_vllm_path_with_the_fake_backend_meets_the_contract(monkeypatch):
    ray = pytest.importorskip("ray")
    from scalerl.distributed import vllm_generator
    from scalerl.distributed.actors import GeneratorWorker, remote_class
    from scalerl.distributed.weight_sync.object_store import WeightRegistry, publish_weights
    from scalerl.train.config.train_config import TrainConfig
    from scalerl.train.run_setup import fresh_policy

    monkeypatch.setattr(vllm_generator, "VllmRolloutBackend", FakeRolloutBackend)
    config = TrainConfig().with_overrides(
        ["model.num_layers=1", "model.hidden_size=32", "model.num_heads=2", "generations_per_prompt=2"]
    )
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        registry = remote_class(WeightRegistry, num_cpus=0, max_concurrency=10).remote()
        model, _ = fresh_policy(config)
        publish_weights(registry, model, 2)
        worker = GeneratorWorker(config, 0, registry, backend="vllm")
        request = GenerationRequest(step=1, prompt_indices=(4, 0, 9), seed=11, min_version=2)
        batch = worker.generate(request)
    finally:
        if started:
            ray.shutdown()
    assert batch_violations(batch, request, 2, published_version=2) == []
    assert worker.vllm.loaded_versions == [2]  # the published weights reached the backend
    assert set(batch.packed.reward.tolist()) <= {-1.0, 1.0}  # scored by the task's verifier


class _Logprob:
    def __init__(self, value):
        self.logprob = value


class _Output:
    """One vLLM completion as VllmRolloutBackend reads it."""

    def __init__(self, ids, finish_reason, text=""):
        self.token_ids = ids
        self.logprobs = [{token: _Logprob(-0.1 * token)} for token in ids]
        self.finish_reason = finish_reason
        self.text = text


class _CharTokenizer:
    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids)


def test_the_vllm_backend_packs_its_two_pass_interruption_as_the_rollouts_say():
    """VllmRolloutBackend.generate with vLLM's engine replaced by fixed outputs: a sequence cut at
    its budget gets the forced phrase (log-prob 0, loss_mask 0) and answers in a second pass, one
    that closed its thinking answers too, one that stopped while thinking is done; the batch is
    packed with every token at the call's policy version."""
    from scalerl.distributed.vllm_generator import VllmRolloutBackend
    from scalerl.tasks.rollout import LengthControl, SamplingSettings
    from scalerl.train.batch.packed_rollouts import unpack_rollouts

    backend = object.__new__(VllmRolloutBackend)
    backend.tokenizer = _CharTokenizer()
    backend.sampling = SamplingSettings(max_new_tokens=8)
    backend.length_control = LengthControl(
        thinking_budget_min=3, thinking_budget_max=3, interruption_phrase="!#", think_end_text="#"
    )
    backend._params = lambda max_tokens, seed, stop=None: max_tokens
    passes = [
        [
            _Output([70, 71, 72], "length"),
            _Output([70, 35], "stop", "F#"),
            _Output([66], "stop", "B"),
            _Output([70, 71, 72], "length"),
        ],
        [_Output([50, 51], "stop"), _Output([50, 51, 52, 53, 54, 55], "length"), _Output([52], "stop")],
    ]
    budgets = []

    def run(prompts, params):
        budgets.append(params)
        return passes[len(budgets) - 1]

    backend._run = run
    packed = backend.generate(["ab", "c"], [7, 3], num_generations=2, seed=0, policy_version=5)
    assert budgets == [[3, 3, 3, 3], [3, 6, 3]]  # the answer pass: max_new_tokens - tokens so far
    forced = (33, 35)
    completions = [
        ((70, 71, 72) + forced + (50, 51), (1, 1, 1, 0, 0, 1, 1), False, True),
        ((70, 35, 50, 51, 52, 53, 54, 55), (1,) * 8, True, False),
        ((66,), (1,), False, False),
        ((70, 71, 72) + forced + (52,), (1, 1, 1, 0, 0, 1), False, True),
    ]
    expected = [
        Rollout(
            prompt_index=(7, 7, 3, 3)[row],
            group_index=row // 2,
            prompt_token_ids=((97, 98), (97, 98), (99,), (99,))[row],
            completion_token_ids=tokens,
            generator_logprobs=tuple(0.0 if not sampled else -0.1 * t for t, sampled in zip(tokens, mask)),
            token_policy_versions=(5,) * len(tokens),
            reward=0.0,
            truncated=truncated,
            interrupted=interrupted,
            completion_text="".join(chr(t) for t in tokens),
            loss_mask=mask,
        )
        for row, (tokens, mask, truncated, interrupted) in enumerate(completions)
    ]
    assert unpack_rollouts(packed) == expected
    reference = pack_rollouts(expected)
    for name, values in vars(reference).items():
        assert getattr(packed, name).dtype == values.dtype, name
