"""Tiny local Hugging Face models (Qwen2, Llama, GPT-2) with the character tokenizer, saved to
a folder like a downloaded model: the tests never touch the hub."""

from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from scalerl.models.char_tokenizer import build_char_tokenizer

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def build_tiny_hf_model(kind: str, *, seed: int = 0, chat_template: bool = True):
    """(model, tokenizer) of architecture `kind` ('qwen2', 'llama', 'gpt2'), a few thousand weights."""
    tokenizer = build_char_tokenizer(model_max_length=256)
    if chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    ids = dict(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    if kind == "qwen2":  # grouped-query attention and tied embeddings
        config = Qwen2Config(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=256,
            tie_word_embeddings=True,
            **ids,
        )
        model_class = Qwen2ForCausalLM
    elif kind == "llama":
        config = LlamaConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=256,
            tie_word_embeddings=False,
            **ids,
        )
        model_class = LlamaForCausalLM
    elif kind == "gpt2":  # tied embeddings, biases, learned positions
        config = GPT2Config(n_embd=32, n_layer=1, n_head=2, n_positions=256, **ids)
        model_class = GPT2LMHeadModel
    else:
        raise ValueError(kind)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def save_tiny_hf_model(kind: str, directory: Path, **options) -> Path:
    """Write the tiny model of `kind` as a local model folder and return it."""
    model, tokenizer = build_tiny_hf_model(kind, **options)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
