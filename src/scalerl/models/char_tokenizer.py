"""A character-level tokenizer that Hugging Face's APIs accept (`PreTrainedTokenizerFast`).

Every printable ASCII character is one token; `<think>` and `</think>` are single tokens so the
generator can tell cheaply when a thinking section ends. Saved with `save_pretrained`, it loads
back with `AutoTokenizer.from_pretrained` like any other tokenizer.
"""

from __future__ import annotations

import string

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

PAD_TOKEN = "<pad>"
BOS_TOKEN = "<bos>"
EOS_TOKEN = "<eos>"
UNK_TOKEN = "<unk>"
THINK_START = "<think>"
THINK_END = "</think>"

SPECIAL_TOKENS = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
THINK_TOKENS = (THINK_START, THINK_END)
CHARACTERS = tuple(string.digits + string.ascii_letters + string.punctuation + " \n")


def char_vocabulary() -> dict[str, int]:
    """Token -> id: special tokens first (pad = 0), then the think tags, then the characters."""
    tokens = SPECIAL_TOKENS + THINK_TOKENS + CHARACTERS
    return {token: token_id for token_id, token in enumerate(tokens)}


def build_char_tokenizer(model_max_length: int = 512) -> PreTrainedTokenizerFast:
    """The built-in tokenizer: one token per character, `<bos>` prepended on encoding.

    Decoding concatenates tokens (no spaces between characters); `skip_special_tokens=True` drops
    pad/bos/eos but keeps the think tags, which are part of the text.
    """
    vocab = char_vocabulary()
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK_TOKEN))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS_TOKEN} $A",
        pair=f"{BOS_TOKEN} $A $B",
        special_tokens=[(BOS_TOKEN, vocab[BOS_TOKEN])],
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD_TOKEN,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        unk_token=UNK_TOKEN,
        padding_side="left",
        model_max_length=model_max_length,
    )
    tokenizer.add_tokens(list(THINK_TOKENS))
    return tokenizer
