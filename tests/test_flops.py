import pytest

from scalerl.train.flops import (
    ModelShape,
    context_token_sum,
    device_hours,
    generation_flops,
    recompute_flops,
    sequence_context_sum,
    training_flops,
)

SHAPE = ModelShape(n_params=1000, n_layers=2, d_model=8)


def test_context_sum_counts_prompt_and_kv_cache_positions():
    # prompt of 3 tokens, 4 generated tokens attend to 4, 5, 6, 7 tokens
    assert context_token_sum(3, 4) == 4 + 5 + 6 + 7
    assert context_token_sum(5, 0) == 0
    assert sequence_context_sum(4) == 1 + 2 + 3 + 4


def test_generation_flops_by_hand():
    # 2 * N * tokens + 2 * n_layer * d_model * sum(n_ctx)
    assert generation_flops(SHAPE, 10, 100) == 2 * 1000 * 10 + 2 * 2 * 8 * 100


def test_training_is_three_forwards_and_recompute_is_one():
    assert training_flops(SHAPE, 10, 100) == 6 * 1000 * 10 + 6 * 2 * 8 * 100
    assert recompute_flops(SHAPE, 10, 100) == generation_flops(SHAPE, 10, 100)


def test_device_hours():
    assert device_hours(1800.0, 4) == pytest.approx(2.0)


def test_model_shape_excludes_untied_input_embedding():
    torch = pytest.importorskip("torch")
    from scalerl.train.flops import model_shape

    class Config:
        num_hidden_layers = 1
        hidden_size = 4

    class Tiny(torch.nn.Module):
        config = Config()

        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(10, 4)
            self.body = torch.nn.Linear(4, 4)
            self.head = torch.nn.Linear(4, 10, bias=False)

        def get_input_embeddings(self):
            return self.embed

        def get_output_embeddings(self):
            return self.head

    shape = model_shape(Tiny())
    assert shape == ModelShape(n_params=4 * 4 + 4 + 40, n_layers=1, d_model=4)


def test_a_step_books_the_reference_forward_as_recompute(tmp_path):
    pytest.importorskip("torch")
    from step_stats import step_stats

    from scalerl.tasks.rollout import Rollout
    from scalerl.train.batch.packed_rollouts import pack_rollouts
    from scalerl.train.config.train_config import TrainConfig
    from scalerl.train.run_state import RunState

    rollout = Rollout(
        prompt_index=0,
        group_index=0,
        prompt_token_ids=(1, 2),
        completion_token_ids=(3,),
        generator_logprobs=(-1.0,),
        token_policy_versions=(0,),
        reward=1.0,
        truncated=False,
        interrupted=False,
        completion_text="3",
    )

    def flops_of(recomputed_tokens, recomputed_context):
        stats = step_stats(
            trained_context_sum=100, tokens_recomputed=recomputed_tokens, recomputed_context_sum=recomputed_context
        )
        state = RunState(TrainConfig(), tmp_path / f"run{recomputed_tokens}", num_train_prompts=4)
        try:
            return state.book_step(1, pack_rollouts([rollout]).columns(), stats, shape=SHAPE, wall_seconds=0.0)["flops"]
        finally:
            state.close()

    generated = generation_flops(SHAPE, 1, context_token_sum(2, 1))
    assert flops_of(0, 0) == generated + training_flops(SHAPE, 10, 100)
    assert flops_of(10, 100) == generated + training_flops(SHAPE, 10, 100) + recompute_flops(SHAPE, 10, 100)
