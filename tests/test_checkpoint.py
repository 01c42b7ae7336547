import json

import numpy as np
import pytest
import torch
from checkpoint_support import adamw_trained

from scalerl.models.policy import TinyModelSpec, build_tiny_model
from scalerl.train.checkpoint.save_load import (
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)

SPEC = TinyModelSpec(num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_positions=64)


def _trained_setup(seed):
    model, _ = build_tiny_model(SPEC, seed=seed)
    ids = torch.randint(0, 20, (2, 8), generator=torch.Generator().manual_seed(seed))
    optimizer, scheduler = adamw_trained(model, ids, steps=2, warmup_steps=3)
    return model, optimizer, scheduler


def _save(tmp_path, step, model, optimizer, scheduler, generator, rng, keep=1):
    return save_checkpoint(
        tmp_path,
        step,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        torch_generators={"rollout": generator},
        numpy_rng=rng,
        state={"pool": {"removed": [3, 5]}, "flops": 1.5e9},
        keep=keep,
    )


def test_round_trip_restores_weights_optimizer_scheduler_and_rng(tmp_path):
    model, optimizer, scheduler = _trained_setup(seed=0)
    generator = torch.Generator().manual_seed(11)
    generator.manual_seed(11)
    torch.rand(3, generator=generator)
    rng = np.random.default_rng(5)
    rng.random(4)
    torch.manual_seed(123)
    path = _save(tmp_path, 7, model, optimizer, scheduler, generator, rng)
    expected_draws = (torch.rand(4, generator=generator), rng.random(3), torch.rand(2))

    other_model, other_optimizer, other_scheduler = _trained_setup(seed=1)
    other_generator, other_rng = torch.Generator().manual_seed(0), np.random.default_rng(0)
    torch.manual_seed(0)
    step, state = load_checkpoint(
        path,
        model=other_model,
        optimizer=other_optimizer,
        scheduler=other_scheduler,
        torch_generators={"rollout": other_generator},
        numpy_rng=other_rng,
    )
    assert step == 7 and state == {"pool": {"removed": [3, 5]}, "flops": 1.5e9}
    for a, b in zip(model.state_dict().values(), other_model.state_dict().values()):
        assert torch.equal(a, b)
    saved, loaded = optimizer.state_dict(), other_optimizer.state_dict()
    assert saved["param_groups"] == loaded["param_groups"]
    for param_id, param_state in saved["state"].items():
        for name, value in param_state.items():
            assert torch.equal(value, loaded["state"][param_id][name])
    assert other_scheduler.state_dict() == scheduler.state_dict()
    assert other_optimizer.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"]
    assert torch.equal(torch.rand(4, generator=other_generator), expected_draws[0])
    assert np.array_equal(other_rng.random(3), expected_draws[1])
    assert torch.equal(torch.rand(2), expected_draws[2])


def test_no_pickle_files_and_state_is_json(tmp_path):
    model, optimizer, scheduler = _trained_setup(seed=0)
    path = _save(tmp_path, 1, model, optimizer, scheduler, torch.Generator(), np.random.default_rng())
    names = sorted(p.name for p in path.rglob("*") if p.is_file())
    assert names == [
        "config.json",
        "generation_config.json",
        "manifest.json",
        "model.safetensors",
        "optimizer.safetensors",
        "rng.safetensors",
        "state.json",
    ]
    assert json.loads((path / "training_state" / "state.json").read_text())["step"] == 1


def test_keeps_last_k_and_ignores_partial_temporary_dirs(tmp_path):
    model, optimizer, scheduler = _trained_setup(seed=0)
    for step in (2, 4, 6):
        _save(tmp_path, step, model, optimizer, scheduler, torch.Generator(), np.random.default_rng(), keep=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_00000004", "step_00000006"]
    (tmp_path / "checkpoints" / ".tmp-step_00000008-1").mkdir()  # a crash mid-write
    (tmp_path / "checkpoints" / "step_00000009").mkdir()  # no state.json: incomplete
    assert latest_checkpoint(tmp_path).name == "step_00000006"
    assert latest_checkpoint(tmp_path / "nothing") is None


def test_unreadable_checkpoint_is_an_input_error(tmp_path):
    from scalerl.errors import InputError

    model, optimizer, scheduler = _trained_setup(seed=0)
    path = _save(tmp_path, 1, model, optimizer, scheduler, torch.Generator(), np.random.default_rng())
    (path / "training_state" / "state.json").write_text("{broken")
    with pytest.raises(InputError, match="unreadable"):
        load_checkpoint(
            path,
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            torch_generators={},
            numpy_rng=np.random.default_rng(),
        )
