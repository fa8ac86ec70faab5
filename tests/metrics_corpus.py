"""Text pairs for the reference comparisons of the text metrics: real sentences (tests/data) and generated
ones, English, Chinese and mixed, with edge cases (empty, one token, punctuation only, full-width)."""

from __future__ import annotations

import json
import random
from pathlib import Path

_DATA = json.loads((Path(__file__).parent / "data" / "metrics_real_text.json").read_text("utf-8"))
REAL_EN: list[str] = _DATA["en"]
REAL_ZH: list[str] = _DATA["zh"]

_EN_WORDS = [
    "the",
    "a",
    "an",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "model",
    "answer",
    "is",
    "was",
    "not",
    "quickly",
    "data",
    "graph",
    "42",
    "3.5",
    "GPT-4",
    "don't",
    "U.S.",
    "e-mail",
]
_ZH_WORDS = [
    "模型",
    "回答",
    "北京",
    "大学",
    "的",
    "是",
    "在",
    "了",
    "评估",
    "指标",
    "数据",
    "知识",
    "图谱",
    "，",
    "。",
    "！",
    "？",
]
_PUNCT = [*list(",.;:!?()[]\"'-&<>/"), "“", "”", "—", "…", "、", "《", "》", "（", "）", "，", "。"]
EDGE = [
    ("", ""),
    ("", "x"),
    ("x", ""),
    ("a", "a"),
    ("a", "b"),
    ("the", "a"),
    ("The cat.", "the cat"),
    ("。", "，"),
    ("模型", "模型"),
    ("模", "型"),
    ("ＡＢＣ１２３", "abc123"),
    ("你好，世界！", "你好世界"),
    ("   ", "  "),
    ("...", "!!!"),
    ("GPT-4 是模型", "gpt 4 是 模型"),
    ("的", "是"),
    ("a b c d e", "e d c b a"),
]


def _perturb(rng: random.Random, tokens: list[str], vocab: list[str]) -> list[str]:
    out = list(tokens)
    for _ in range(rng.randint(0, 4)):
        op = rng.random()
        if op < 0.3 and out:
            out.pop(rng.randrange(len(out)))
        elif op < 0.6:
            out.insert(rng.randint(0, len(out)), rng.choice(vocab))
        elif out:
            out[rng.randrange(len(out))] = rng.choice(vocab)
    return out


def _generated(rng: random.Random, vocab: list[str], sep: str, n: int) -> list[tuple[str, str]]:
    pairs = []
    for _ in range(n):
        ref = [rng.choice(vocab + _PUNCT[:4]) for _ in range(rng.randint(1, 25))]
        hyp = (
            _perturb(rng, ref, vocab)
            if rng.random() < 0.8
            else [rng.choice(vocab) for _ in range(rng.randint(0, 10))]
        )
        pairs.append((sep.join(hyp), sep.join(ref)))
    return pairs


def _real(rng: random.Random, sentences: list[str], n: int, zh: bool) -> list[tuple[str, str]]:
    pairs = []
    for _ in range(n):
        ref = rng.choice(sentences)
        if rng.random() < 0.25:
            pairs.append((rng.choice(sentences), ref))
            continue
        units = list(ref) if zh else ref.split()
        vocab = _ZH_WORDS if zh else _EN_WORDS
        pairs.append((("" if zh else " ").join(_perturb(rng, units, vocab)), ref))
    return pairs


def text_pairs(seed: int = 20261121) -> list[tuple[str, str]]:
    """About 700 (hypothesis, reference) pairs, deterministic for a seed."""
    rng = random.Random(seed)
    pairs = list(EDGE)
    pairs += _generated(rng, _EN_WORDS, " ", 150)
    pairs += _generated(rng, _ZH_WORDS, "", 120)
    pairs += _generated(rng, _ZH_WORDS + _EN_WORDS, rng.choice([" ", ""]), 60)
    pairs += _real(rng, REAL_EN, 150, zh=False)
    pairs += _real(rng, REAL_ZH, 200, zh=True)
    return pairs


def multi_reference(seed: int = 7) -> list[tuple[str, list[str]]]:
    """(hypothesis, 1-3 references) triples from the pairs, for multi-reference metrics."""
    rng = random.Random(seed)
    pairs = text_pairs()
    out = []
    for hyp, ref in pairs[::3]:
        refs = [ref] + [rng.choice(pairs)[1] for _ in range(rng.randint(0, 2))]
        out.append((hyp, refs))
    return out
