"""The text metrics as they were before the per-event speed-ups (main at 480d54d), kept as the reference
the fast paths must equal exactly (tests/evaluators/test_metrics_fastpath.py) and as the "before" of bench/metrics.py.

Only the parts that changed are copied (the zh tokeniser's character table is imported: it did not change).
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Any

from rapidfuzz.distance import LCSseq, Levenshtein

from streameval.evaluators._lang import _CJK_TOKEN, _UNICODE_PUNCT, ZH_STOP_WORDS, has_cjk, segment
from streameval.evaluators.bleu import _ZH_RUN, BleuResult
from streameval.evaluators.rouge import LcsScore

__all__ = [
    "AFTER_PUNCT",
    "BEFORE_PUNCT",
    "DASH",
    "SYMBOLS",
    "answer_tokens",
    "bleu_simple",
    "cjk_tokens",
    "lcs_score",
    "levenshtein",
    "normalize_answer",
    "post_tokenize",
    "rouge_l",
    "sentence_bleu",
    "squad_f1",
    "squad_tokens",
    "token_f1",
    "tokenize_13a",
    "tokenize_zh",
]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = str.maketrans("", "", string.punctuation)
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")


# -- _lang.py ----------------------------------------------------------------------------------------
def normalize_answer(text: str) -> str:
    if text.isascii():
        text = text.lower().translate(_ASCII_PUNCT)
    else:
        text = unicodedata.normalize("NFKC", text).lower().translate(_UNICODE_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_tokens(normalized: str, *, chinese: str = "words") -> list[str]:
    if not has_cjk(normalized):
        return normalized.split()
    if chinese == "words":
        words = [w for w in segment(normalized) if w not in ZH_STOP_WORDS]
        if words:
            return words
    chars: list[str] = _CJK_TOKEN.findall(normalized)
    return chars


def answer_tokens(text: str, *, chinese: str = "words") -> list[str]:
    return squad_tokens(normalize_answer(text), chinese=chinese)


def cjk_tokens(text: str) -> list[str]:
    if text.isascii():
        return _ASCII_TOKEN.findall(text.lower())
    tokens: list[str] = _CJK_TOKEN.findall(text.casefold())
    return tokens


# -- answer.py ---------------------------------------------------------------------------------------
def squad_f1(pred: list[str], gold: list[str]) -> tuple[float, float, float]:
    if not pred or not gold:
        same = float(pred == gold)
        return same, same, same
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0, 0.0, 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return precision, recall, 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, target: str, *, chinese: str = "words") -> tuple[float, float, float]:
    return squad_f1(answer_tokens(prediction, chinese=chinese), answer_tokens(target, chinese=chinese))


# -- rouge.py ----------------------------------------------------------------------------------------
def lcs_score(prediction: Sequence[str], target: Sequence[str]) -> LcsScore:
    if not prediction or not target:
        return LcsScore(0.0, 0.0, 0.0, 0)
    lcs = int(LCSseq.similarity(prediction, target))
    precision = lcs / len(prediction)
    recall = lcs / len(target)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return LcsScore(precision, recall, f1, lcs)


def rouge_l(
    prediction: str, targets: Sequence[str], *, select: str = "recall", tokenize: str = "cjk"
) -> tuple[LcsScore, int]:
    split = cjk_tokens if tokenize == "cjk" else (lambda text: text.lower().split())
    pred = split(prediction)
    best, best_index = LcsScore(0.0, 0.0, 0.0, 0), -1
    for index, target in enumerate(targets):
        score = lcs_score(pred, split(target))
        key = score.recall if select == "recall" else score.f1
        if best_index < 0 or key > (best.recall if select == "recall" else best.f1):
            best, best_index = score, index
    return best, best_index


# -- presets.py --------------------------------------------------------------------------------------
def levenshtein(a: str, b: str, *, hint: float | None = None) -> float:
    """The old similarity; ``hint`` is accepted (so the bench can patch it in) and ignored."""
    return float(Levenshtein.normalized_similarity(a, b))


# -- bleu.py -----------------------------------------------------------------------------------------
SYMBOLS = re.compile(r"([\{-\~\[-\`!-\&\(-\+\:-\@\/])")
BEFORE_PUNCT = re.compile(r"([^0-9])([\.,])")
AFTER_PUNCT = re.compile(r"([\.,])([^0-9])")
DASH = re.compile(r"([0-9])(-)")


def post_tokenize(line: str) -> list[str]:
    line = SYMBOLS.sub(r" \1 ", line)
    if "." in line or "," in line:
        line = BEFORE_PUNCT.sub(r"\1 \2 ", line)
        line = AFTER_PUNCT.sub(r" \1 \2", line)
    if "-" in line:
        line = DASH.sub(r"\1 \2 ", line)
    return line.split()


def tokenize_13a(line: str) -> list[str]:
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    return post_tokenize(f" {line} ")


def _spread(match: re.Match[str]) -> str:
    return " " + " ".join(match.group()) + " "


def tokenize_zh(line: str) -> list[str]:
    return post_tokenize(_ZH_RUN.sub(_spread, line.strip()))


def _ngrams(tokens: Sequence[str], max_order: int) -> Counter[tuple[str, ...]]:
    grams: Counter[tuple[str, ...]] = Counter()
    for n in range(1, max_order + 1):
        grams.update(zip(*(tokens[i:] for i in range(n)), strict=False))
    return grams


def sentence_bleu(
    hypothesis: str,
    references: Sequence[str],
    *,
    tokenize: str = "13a",
    lowercase: bool = False,
    max_order: int = 4,
) -> BleuResult:
    tok = tokenize_13a if tokenize == "13a" else tokenize_zh

    def prep(text: str) -> list[str]:
        return tok((text.lower() if lowercase else text).rstrip())

    ref_grams: Counter[tuple[str, ...]] = Counter()
    ref_lens: list[int] = []
    for ref in references:
        tokens = prep(ref)
        ref_lens.append(len(tokens))
        for gram, count in _ngrams(tokens, max_order).items():
            ref_grams[gram] = max(ref_grams[gram], count)
    hyp = prep(hypothesis)
    sys_len = len(hyp)
    ref_len = min(ref_lens, key=lambda r: (abs(sys_len - r), r)) if ref_lens else 0
    correct = [0] * max_order
    total = [0] * max_order
    for gram, count in _ngrams(hyp, max_order).items():
        n = len(gram) - 1
        total[n] += count
        if gram in ref_grams:
            correct[n] += min(count, ref_grams[gram])

    bp = 1.0
    if sys_len < ref_len:
        bp = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
    precisions = [0.0] * max_order
    if not any(correct):
        return BleuResult(0.0, tuple(precisions), bp, sys_len, ref_len)
    smooth = 1.0
    eff_order = max_order
    for n in range(1, max_order + 1):
        if total[n - 1] == 0:
            break
        eff_order = n
        if correct[n - 1] == 0:
            smooth *= 2
            precisions[n - 1] = 100.0 / (smooth * total[n - 1])
        else:
            precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1]
    log_sum = sum(math.log(p) if p > 0 else -9999999999 for p in precisions[:eff_order])
    score = bp * math.exp(log_sum / eff_order)
    return BleuResult(score / 100.0, tuple(p / 100.0 for p in precisions), bp, sys_len, ref_len)


def bleu_simple(
    references: Sequence[str], candidate: str, *, max_order: int = 4, tokenizer: Any = None
) -> float:
    split = tokenizer or (lambda text: text.lower().split())
    if not candidate or not references:
        return 0.0
    cand = _ngrams(split(candidate), max_order)
    total = sum(cand.values())
    if total == 0:
        return 0.0
    best = 0
    for ref in references:
        if not ref:
            continue
        ref_counts = _ngrams(split(ref), max_order)
        best = max(best, sum(min(c, ref_counts[g]) for g, c in cand.items() if g in ref_counts))
    return best / total
