"""BERT's WordPiece tokenizer in plain Python, read from a model's ``tokenizer.json``.

It does what the ``tokenizers`` package's BertNormalizer → BertPreTokenizer → WordPiece → [CLS]/[SEP]
template does, so the ``semantic`` extra needs numpy only: ``tokenizers`` pulls huggingface-hub, whose
current releases want a click that Faust refuses. Its output equals ``tokenizers``' on the reference
texts and on every sentence of tests/data/paraphrase_pairs.jsonl (tests/drift/test_embedding_reference.py).
"""

from __future__ import annotations

import json
import unicodedata
from functools import lru_cache
from pathlib import Path

__all__ = ["WordPiece"]

# CJK Unified Ideographs blocks that BERT splits into single characters (the original BERT code's list)
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK)


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True  # every ASCII non-letter non-digit, e.g. "$" and "^", which Unicode calls symbols
    return unicodedata.category(ch).startswith("P")


class WordPiece:
    """Token ids of a text for a BERT model: ``[CLS] … [SEP]``, at most ``max_tokens`` ids."""

    def __init__(self, tokenizer_json: Path, *, max_tokens: int) -> None:
        spec = json.loads(tokenizer_json.read_text(encoding="utf-8"))
        model, normalizer = spec["model"], spec.get("normalizer") or {}
        if model.get("type") != "WordPiece":
            raise ValueError(
                f"{tokenizer_json}: a {model.get('type')!r} tokenizer; only WordPiece is supported"
            )
        self.vocab: dict[str, int] = model["vocab"]
        self.unk = self.vocab[model.get("unk_token", "[UNK]")]
        self.prefix = model.get("continuing_subword_prefix", "##")
        self.max_chars = int(model.get("max_input_chars_per_word", 100))
        self.lowercase = bool(normalizer.get("lowercase", True))
        strip = normalizer.get("strip_accents")
        self.strip_accents = self.lowercase if strip is None else bool(strip)
        self.cls, self.sep = self.vocab["[CLS]"], self.vocab["[SEP]"]
        self.max_tokens = max_tokens
        self._word = lru_cache(maxsize=65536)(self._word_ids)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for word in self._words(text):
            ids.extend(self._word(word))
            if len(ids) >= self.max_tokens - 2:
                del ids[self.max_tokens - 2 :]
                break
        return [self.cls, *ids, self.sep]

    def _words(self, text: str) -> list[str]:
        """BertNormalizer (clean text, space around CJK characters, accents, lower case) and BertPreTokenizer
        (split on white space, every punctuation character a word of its own)."""
        out: list[str] = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or (ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")):
                continue
            if ch.isspace():
                out.append(" ")
            elif _is_cjk(cp):
                out.append(f" {ch} ")
            else:
                out.append(ch)
        normal = "".join(out)
        if self.strip_accents:
            normal = "".join(
                c for c in unicodedata.normalize("NFD", normal) if unicodedata.category(c) != "Mn"
            )
        if self.lowercase:
            normal = normal.lower()
        words: list[str] = []
        for chunk in normal.split():
            start = 0
            for i, ch in enumerate(chunk):
                if _is_punctuation(ch):
                    if i > start:
                        words.append(chunk[start:i])
                    words.append(ch)
                    start = i + 1
            if start < len(chunk):
                words.append(chunk[start:])
        return words

    def _word_ids(self, word: str) -> tuple[int, ...]:
        """Greedy longest-match-first pieces; a word with an unknown piece is one [UNK]."""
        if len(word) > self.max_chars:
            return (self.unk,)
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    ids.append(found)
                    break
                end -= 1
            else:
                return (self.unk,)
            start = end
        return tuple(ids)
