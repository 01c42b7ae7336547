"""Optional vLLM generation backend for GPU nodes, behind the same interface as the HF generator.

UNTESTED on the development machine (no GPU, vLLM not installable there): it is kept small and
is only ever imported when `vllm` is installed, a GPU is visible and the config asks for it. The
CPU path never imports this module's `vllm` import (it sits inside the functions).

Differences from the HF backend (scalerl.train.step_rollouts.generate_rollouts), stated honestly:
- weights are swapped between generate calls, not between decoding steps: every token of one
  call carries the call's policy version (no in-flight swap inside vLLM's scheduler);
- forced interruption runs in two passes (think until the sampled budget or `</think>`, then
  append the interruption phrase where needed and continue); the forced phrase tokens get
  generator log-prob 0.0 and loss_mask 0, so they never enter the loss;
- log-probs are vLLM's sampled-token log-probs, which equal the temperature-1 policy's only at
  temperature 1 (ScaleRL samples at temperature 1).
"""

from __future__ import annotations

import importlib.util
import random
from collections.abc import Sequence

from scalerl.errors import ConfigError, ScaleRLError
from scalerl.tasks.rollout import LengthControl, SamplingSettings
from scalerl.train.batch.packed_rollouts import PackedRollouts, TokenGrid, pack_decoded, pack_rollouts


def vllm_usable() -> bool:
    """True when vllm is installed and a CUDA GPU is visible (never imports vllm itself)."""
    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()


def _load_weights(llm, named_tensors) -> None:
    """Copy (name, tensor) pairs into the running vLLM model.

    vLLM exposes no stable public API for this; the attribute path below is the single-GPU
    in-process engine's. Fails with a clear error on versions where it moved.
    """
    try:
        model = llm.llm_engine.model_executor.driver_worker.model_runner.model
    except AttributeError as error:
        raise ScaleRLError(
            "this vLLM version does not expose its model for in-place weight loading; "
            "use the HF generator backend (pipeline.backend=hf)"
        ) from error
    model.load_weights(named_tensors)


class VllmRolloutBackend:
    """vLLM sampling with the HF backend's contract: prompts x G -> PackedRollouts (reward 0.0)."""

    def __init__(
        self,
        model_path: str,
        sampling: SamplingSettings,
        length_control: LengthControl,
        *,
        dtype: str = "bfloat16",
        gpu_memory_utilization: float = 0.5,
    ) -> None:
        if not vllm_usable():
            raise ConfigError("pipeline.backend=vllm needs the vllm package and a CUDA GPU")
        if model_path == "builtin":
            raise ConfigError("pipeline.backend=vllm needs model.path to be a saved HF model directory")
        from vllm import LLM  # only on GPU nodes

        self._llm = LLM(model=model_path, dtype=dtype, gpu_memory_utilization=gpu_memory_utilization)
        self.tokenizer = self._llm.get_tokenizer()
        self.sampling = sampling
        self.length_control = length_control

    def load_snapshot(self, snapshot) -> None:
        """Load a scalerl.distributed.weight_sync.object_store.WeightSnapshot into the engine."""
        import torch

        tensors = []
        for name, array in snapshot.arrays.items():
            dtype = getattr(torch, snapshot.dtypes[name])
            tensor = torch.from_numpy(array)
            tensors.append((name, tensor.view(dtype) if dtype == torch.bfloat16 else tensor))
        _load_weights(self._llm, tensors)

    def _params(self, max_tokens: int, seed: int, stop: list[str] | None = None):
        from vllm import SamplingParams

        return SamplingParams(
            n=1,
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            top_k=self.sampling.top_k if self.sampling.top_k > 0 else -1,
            repetition_penalty=self.sampling.repetition_penalty,
            max_tokens=max(1, int(max_tokens)),
            logprobs=0,
            seed=int(seed),
            stop=stop,
            include_stop_str_in_output=True,
        )

    def _run(self, token_prompts: Sequence[list[int]], params: Sequence) -> list:
        inputs = [{"prompt_token_ids": list(ids)} for ids in token_prompts]
        return [output.outputs[0] for output in self._llm.generate(inputs, list(params), use_tqdm=False)]

    def generate(
        self,
        prompts: Sequence[str],
        prompt_indices: Sequence[int],
        *,
        num_generations: int,
        seed: int,
        policy_version: int,
    ) -> PackedRollouts:
        """Sample G completions per prompt, packed; see the module docstring for the two-pass interruption."""
        rng = random.Random(seed)
        prompt_ids = [self.sampling.cut_prompt(self.tokenizer.encode(p, add_special_tokens=False)) for p in prompts]
        jobs = [
            (g, i, ids) for g, (i, ids) in enumerate(zip(prompt_indices, prompt_ids)) for _ in range(num_generations)
        ]
        seeds = [rng.randrange(2**31) for _ in jobs]
        interrupt = self.length_control.mode == "interrupt"
        budgets = [
            rng.randint(self.length_control.thinking_budget_min, self.length_control.thinking_budget_max)
            if interrupt
            else self.sampling.max_new_tokens
            for _ in jobs
        ]
        stop = [self.length_control.think_end_text] if interrupt else None
        first = self._run([ids for _, _, ids in jobs], [self._params(b, s, stop) for b, s in zip(budgets, seeds)])
        pieces = [_piece(out, forced=False) for out in first]
        if interrupt:
            pieces = self._continue_after_thinking(jobs, pieces, first, seeds)
        return self._packed(prompt_ids, prompt_indices, num_generations, pieces, policy_version)

    def _continue_after_thinking(self, jobs, pieces, first, seeds) -> list[dict]:
        """Second pass: answer after `</think>`, appending the interruption phrase where cut."""
        phrase_ids = self.tokenizer.encode(self.length_control.interruption_phrase, add_special_tokens=False)
        todo, prompts, params = [], [], []
        for index, (out, piece) in enumerate(zip(first, pieces)):
            if out.finish_reason == "length":
                piece = _append(
                    piece,
                    {
                        "ids": phrase_ids,
                        "logprobs": [0.0] * len(phrase_ids),
                        "mask": [0] * len(phrase_ids),
                        "interrupted": True,
                    },
                )
                pieces[index] = piece
            elif not out.text.endswith(self.length_control.think_end_text):
                continue  # stopped at EOS while thinking: finished
            remaining = self.sampling.max_new_tokens - len(piece["ids"])
            if remaining > 0:
                todo.append(index)
                prompts.append(list(jobs[index][2]) + piece["ids"])
                params.append(self._params(remaining, seeds[index] + 1))
        for index, out in zip(todo, self._run(prompts, params) if todo else []):
            pieces[index] = _append(pieces[index], _piece(out, forced=False))
        return pieces

    def _packed(self, prompt_ids, prompt_indices, num_generations: int, pieces, policy_version: int) -> PackedRollouts:
        """The completions packed as a decoder's record is (pack_decoded, no Rollout built): piece r
        is generation r % G of prompt r // G, every token at `policy_version`."""
        if not pieces:
            return pack_rollouts([])
        grid = TokenGrid.empty(len(pieces), max(len(piece["ids"]) for piece in pieces))
        for row, piece in enumerate(pieces):
            grid.write_row(row, piece["ids"], piece["logprobs"], policy_version, piece["mask"])
        return pack_decoded(
            grid,
            prompt_ids,
            prompt_indices,
            num_generations,
            [self.tokenizer.decode(piece["ids"], skip_special_tokens=True) for piece in pieces],
            truncated=[bool(piece["truncated"]) for piece in pieces],
            interrupted=[bool(piece["interrupted"]) for piece in pieces],
        )


def _piece(output, *, forced: bool) -> dict:
    """One vLLM completion as ids, sampled-token log-probs and loss mask."""
    ids = list(output.token_ids)
    logprobs = [float(step[token].logprob) for step, token in zip(output.logprobs or [], ids)]
    logprobs += [0.0] * (len(ids) - len(logprobs))
    return {
        "ids": ids,
        "logprobs": logprobs,
        "mask": [0 if forced else 1] * len(ids),
        "truncated": output.finish_reason == "length",
        "interrupted": False,
    }


def _append(head: dict, tail: dict) -> dict:
    """Concatenate two completion pieces; the tail decides truncation."""
    return {
        "ids": head["ids"] + tail["ids"],
        "logprobs": head["logprobs"] + tail["logprobs"],
        "mask": head["mask"] + tail["mask"],
        "truncated": tail.get("truncated", False),
        "interrupted": head.get("interrupted", False) or tail.get("interrupted", False),
    }
