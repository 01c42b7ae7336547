"""The tiny policy the generation tests sample from, and one whose next-token logits are fixed
whatever the input, so sampling has known answers."""

import torch

from scalerl.models.policy import TinyModelSpec, build_tiny_model

SMALL = TinyModelSpec(num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_positions=96)


def constant_logits_model(tokenizer, logits_by_token: dict[str, float]):
    """A SMALL model whose next-token logits are fixed: the final norm outputs the unit vector e0
    and column 0 of the LM head holds the wanted logits (all other tokens get logit 0)."""
    model, _ = build_tiny_model(SMALL)
    with torch.no_grad():
        model.lm_head.weight.zero_()
        for token, logit in logits_by_token.items():
            model.lm_head.weight[tokenizer.convert_tokens_to_ids(token), 0] = logit

    def unit_hidden(module, inputs, output):
        hidden = torch.zeros_like(output)
        hidden[..., 0] = 1.0
        return hidden

    model.model.norm.register_forward_hook(unit_hidden)
    return model
