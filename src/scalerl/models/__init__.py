"""The policy model: the built-in tiny Llama-style model, its character tokenizer, local HF loading, sizes."""
