"""A trained step's StepStats with plain values, for the tests of what books a step."""

from scalerl.train.train_step import StepStats


def step_stats(**changes) -> StepStats:
    """StepStats of an updating step (loss 0.5, gradient norm 1, lr 1e-3, entropy 0.1, ratio 1,
    nothing clipped) that kept 1 of 2 prompts, 2 sequences, and trained 10 tokens with a context
    sum of 30; `changes` replace fields."""
    fields = dict(
        loss=0.5,
        grad_norm=1.0,
        lr=1e-3,
        entropy=0.1,
        mean_ratio=1.0,
        clipped_fraction=0.0,
        kept_prompts=1,
        total_prompts=2,
        kept_sequences=2,
        tokens_trained=10,
        trained_context_sum=30,
        updated=True,
    )
    return StepStats(**{**fields, **changes})
