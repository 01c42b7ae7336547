"""Weight snapshots (what the trainer publishes) and the PPO-off-policy-k schedule."""
import numpy as np
import pytest
import torch

from scalerl.distributed.weights import load_snapshot, snapshot_weights
from scalerl.train.models import TinyModelSpec, build_tiny_model

TINY = TinyModelSpec(num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64,
                     max_positions=64)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_snapshot_round_trip_is_bit_exact_and_in_place(dtype):
    source, _ = build_tiny_model(TINY, seed=1, dtype=dtype)
    target, _ = build_tiny_model(TINY, seed=2, dtype=dtype)
    target_tensors = [p for p in target.parameters()]
    snapshot = snapshot_weights(source, version=7)
    assert snapshot.version == 7 and snapshot.num_bytes > 0
    assert all(isinstance(a, np.ndarray) for a in snapshot.arrays.values())
    load_snapshot(target, snapshot)
    for (name, a), (_, b) in zip(source.state_dict().items(), target.state_dict().items()):
        assert a.dtype == b.dtype and torch.equal(a, b), name
    # same tensor objects: a generator's modules (and KV cache) survive the swap
    assert all(p is q for p, q in zip(target_tensors, target.parameters()))
