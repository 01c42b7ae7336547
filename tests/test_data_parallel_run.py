"""The synchronous trainer under torchrun: shards of a step's prompts generated apart, with the
whole batch's random draws, are the whole batch one process generates (and leave the sampling
stream where it does); `torchrun --nproc-per-node 2 -m scalerl.cli train` writes one run folder
whose rows and weights are those of the same run in one process."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import TINY_RUN, set_options
from safetensors.torch import load_file

from scalerl.models.policy import TinyModelSpec, build_tiny_model
from scalerl.train.batch.packed_rollouts import concat_packed
from scalerl.train.checkpoint.save_load import latest_checkpoint
from scalerl.train.config.step_recipe import length_control, sampling_settings
from scalerl.train.generation import skip_decoding_steps
from scalerl.train.parallel.data_parallel import shard_rows
from scalerl.train.step_rollouts import generate_packed

PROMPTS = ["12+7=", "3*4=", "20-5=", "9+9=", "1+2="]


@pytest.mark.parametrize("world_size", [2, 3, 6])
def test_shards_packed_as_decoded_join_into_the_whole_packed_batch(tiny_config, world_size):
    """Each rank's shard packed straight from the decoder's grid (group indices those of the whole
    batch; with 6 ranks for 5 prompts one shard is empty), joined in rank order: the batch one
    process packs, and each rank's stream ends where it ends once the steps are skipped."""
    config = tiny_config("sampling.length_control=interrupt", "max_new_tokens=16")
    model, tokenizer = build_tiny_model(TinyModelSpec(num_layers=1, hidden_size=32, num_heads=2), seed=3)
    model.generation_config.eos_token_id = list(range(20, 35))
    options = dict(num_generations=3, sampling=sampling_settings(config), length_control=length_control(config))
    indices = list(range(10, 10 + len(PROMPTS)))
    whole_generator = torch.Generator().manual_seed(0)
    whole, _ = generate_packed(model, tokenizer, PROMPTS, indices, torch_generator=whole_generator, **options)
    generators = [torch.Generator().manual_seed(0) for _ in range(world_size)]
    shards = [
        generate_packed(
            model,
            tokenizer,
            PROMPTS,
            indices,
            torch_generator=generator,
            prompt_rows=shard_rows(len(PROMPTS), rank, world_size),
            **options,
        )
        for rank, generator in enumerate(generators)
    ]
    most = max(steps for _, steps in shards)
    assert most > min(steps for _, steps in shards)  # a shard finished early: the skip is exercised
    for generator, (_, steps) in zip(generators, shards):
        skip_decoding_steps(generator, most - steps, len(PROMPTS) * 3, model.config.vocab_size)
        assert torch.equal(generator.get_state(), whole_generator.get_state())
    together = concat_packed([part for part, _ in shards])
    assert together.group_index.tolist() == [group for group in range(len(PROMPTS)) for _ in range(3)]
    for name in ("prompt_index", "group_index", "interrupted", "truncated", "prompt_offsets", "prompt_tokens"):
        assert getattr(together, name).tolist() == getattr(whole, name).tolist(), name
    for name in ("completion_offsets", "completion_tokens", "versions", "loss_mask", "text_offsets", "text_bytes"):
        assert getattr(together, name).tolist() == getattr(whole, name).tolist(), name
    torch.testing.assert_close(torch.from_numpy(together.logprobs), torch.from_numpy(whole.logprobs), rtol=0, atol=1e-5)


def _rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in ("device_hours", "wall_seconds")} for row in rows]


def _train(*arguments: str, ranks: int = 1) -> subprocess.CompletedProcess:
    """`scalerl train --no-progress ARGUMENTS` in one process, or under torchrun with `ranks`
    processes; it must succeed."""
    launcher = ["-m", "torch.distributed.run", "--nproc-per-node", str(ranks), "--standalone"] if ranks > 1 else []
    command = [sys.executable, *launcher, "-m", "scalerl.cli", "train", "--no-progress", *arguments]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, start_new_session=ranks > 1)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _assert_same_rows_and_weights(got: list[dict], expected: list[dict], got_dir: Path, expected_dir: Path) -> None:
    """Rows alike key for key (floats to 1e-5) and the newest checkpoints' weights to 1e-6."""
    for got_row, expected_row in zip(got, expected):
        assert got_row.keys() == expected_row.keys()
        for key, value in expected_row.items():
            if isinstance(value, float):
                assert got_row[key] == pytest.approx(value, rel=1e-5, abs=1e-6, nan_ok=True), key
            else:
                assert got_row[key] == value, key
    got_weights = load_file(latest_checkpoint(got_dir) / "model.safetensors")
    expected_weights = load_file(latest_checkpoint(expected_dir) / "model.safetensors")
    assert got_weights.keys() == expected_weights.keys()
    for name, tensor in expected_weights.items():
        torch.testing.assert_close(got_weights[name], tensor, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_torchrun_with_two_ranks_writes_the_run_one_process_writes(tmp_path):
    options = set_options([*TINY_RUN, "max_steps=2", "checkpoint_every=1", "eval_every=1", "torch_threads=1"])
    done = _train("--out", str(tmp_path / "two"), *options, ranks=2)
    assert done.stdout.count("trained 2 steps into") == 1  # rank 0 alone reports
    _train("--out", str(tmp_path / "one"), *options)
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == sorted(p.name for p in (tmp_path / "one").iterdir())
    two, one = _rows(tmp_path / "two"), _rows(tmp_path / "one")
    assert [row["step"] for row in two] == [0, 1, 2]
    assert any(row.get("grad_norm", 0) > 0 for row in one)  # a step did update the weights
    _assert_same_rows_and_weights(two, one, tmp_path / "two", tmp_path / "one")


@pytest.mark.slow
def test_a_torchrun_run_resumes_under_torchrun_as_the_straight_run(tmp_path):
    options = set_options([*TINY_RUN, "checkpoint_every=1", "eval_every=1", "torch_threads=1"])
    _train("--out", str(tmp_path / "resumed"), "--max-steps", "1", *options, ranks=2)
    _train("--out", str(tmp_path / "resumed"), "--resume", "--max-steps", "2", ranks=2)
    _train("--out", str(tmp_path / "one"), "--max-steps", "2", *options)
    resumed, one = _rows(tmp_path / "resumed"), _rows(tmp_path / "one")
    assert [row["step"] for row in resumed] == [0, 1, 2]
    _assert_same_rows_and_weights(resumed, one, tmp_path / "resumed", tmp_path / "one")
