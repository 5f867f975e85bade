"""tokenizer.json and tokenizer_config.json in the form Qwen3's checkpoints ship them."""
from . import bpe

MODEL_MAX_LENGTH = 2048


def _byte_level():
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
            "use_regex": False}


def _added_token(i, content):
    return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def tokenizer_json(tok):
    """The Hugging Face tokenizers file: BPE vocab and merges ("left right": byte-level tokens
    hold no space), Split + ByteLevel pre-tokenizer, ByteLevel decoder, the special tokens as
    added tokens after the learned vocabulary."""
    vocab = {t: i for t, i in tok.vocab.items() if t not in bpe.SPECIAL_TOKENS}
    split = {"type": "Split", "pattern": {"Regex": bpe.SPLIT_PATTERN}, "behavior": "Isolated",
             "invert": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_added_token(tok.special_id(s), s) for s in bpe.SPECIAL_TOKENS],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, _byte_level()]},
        "post_processor": _byte_level(),
        "decoder": _byte_level(),
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                  "merges": [f"{a} {b}" for a, b in tok.merges]},
    }


def tokenizer_config(tok):
    """transformers' tokenizer_config.json of a Qwen3 base model: no bos, <|endoftext|> ends a
    document and pads."""
    decoder = {str(tok.special_id(s)): {k: v for k, v in _added_token(0, s).items() if k != "id"}
               for s in bpe.SPECIAL_TOKENS}
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": bpe.END_OF_TEXT,
        "errors": "replace",
        "model_max_length": MODEL_MAX_LENGTH,
        "pad_token": bpe.END_OF_TEXT,
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
