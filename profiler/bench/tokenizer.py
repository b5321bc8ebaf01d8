"""A tokenizer slaplan builds itself, so that a benchmark runs with no network and no model files.

It is byte-level: one token per UTF-8 byte of the text, no merges. genai-bench sizes prompts and
counts tokens with it, and the engine emulator counts prompt tokens the same way (one token per
byte), so the two agree exactly. The directory it writes (``tokenizer.json`` in the Hugging Face
``tokenizers`` format and ``tokenizer_config.json``) loads offline with
``transformers.AutoTokenizer.from_pretrained(dir)``.

Token counts measured with it are not those of a real model's tokenizer (about four bytes per
token for English text with a typical BPE vocabulary); a job that uses it says so in its details.
"""

from __future__ import annotations

import json
from pathlib import Path

NAME = "slaplan-byte-tokenizer"
EOS = "<|endoftext|>"


def byte_symbols() -> list[str]:
    """The printable character standing for each byte value 0..255 (the byte-level BPE convention:
    printable Latin-1 bytes stand for themselves, the rest are shifted past 255)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    kept = set(keep)
    out, shifted = [], 0
    for byte in range(256):
        if byte in kept:
            out.append(chr(byte))
        else:
            out.append(chr(256 + shifted))
            shifted += 1
    return out


def tokenizer_files() -> dict[str, str]:
    """File name → content of the tokenizer directory (pure)."""
    vocab = {symbol: i for i, symbol in enumerate(byte_symbols())}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": 256, "content": EOS, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": None,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOS,
        "model_max_length": 1_000_000,
        "clean_up_tokenization_spaces": False,
        "name_or_path": NAME,
    }
    return {"tokenizer.json": json.dumps(tokenizer, ensure_ascii=False),
            "tokenizer_config.json": json.dumps(config, indent=2),
            "special_tokens_map.json": json.dumps({"eos_token": EOS})}


def write_byte_tokenizer(directory: Path) -> Path:
    """Write the tokenizer into ``directory`` (created; existing files replaced) and return it."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in tokenizer_files().items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


def is_tokenizer_dir(directory: Path) -> bool:
    """True when ``directory`` holds a tokenizer that loads offline."""
    return directory.is_dir() and any((directory / f).is_file() for f in
                                      ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json"))
