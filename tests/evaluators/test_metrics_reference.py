"""Text metrics against reference implementations on ~700 pairs (tests/metrics_corpus.py).

* bleu == sacrebleu.sentence_bleu(..., smooth_method="exp") / 100 (13a and zh, 1-3 references);
* rouge_l (select f1) == rouge-score ``score_multi`` with a CJK tokenizer; (select recall, whitespace)
  == the agent-metrics spec's Python LCS code; bleu_simple == the agent-metrics spec's code;
* token_f1 / exact_match_normalized == the SQuAD v2.0 evaluation formulas. SQuAD v1.1 scores two
  empty answers 0; v2.0 (and we) score them 1 — the only difference between the two scripts here.
  Chinese text is compared with the same SQuAD formula over an independent rjieba/stop-word tokenisation.

Everything must agree to 1e-9 (in practice the results are bit-identical).
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter

import pytest
import rjieba
import sacrebleu
import stopwordsiso
from agent_metrics_reference import seed_bleu, seed_rouge_l
from hypothesis import given
from hypothesis import strategies as st
from metrics_corpus import multi_reference, text_pairs
from rouge_score import rouge_scorer

from streameval.evaluators.answer import token_f1
from streameval.evaluators.bleu import bleu_simple, sentence_bleu
from streameval.evaluators.rouge import rouge_l

PAIRS = text_pairs()
MULTI = multi_reference()
TOL = 1e-9


def test_corpus_is_large_and_varied() -> None:
    assert len(PAIRS) >= 500
    assert any(not h for h, _ in PAIRS) and any(len(r.split()) == 1 for _, r in PAIRS)
    assert sum(1 for h, _ in PAIRS if re.search(r"[\u4e00-\u9fff]", h)) > 200
    assert sum(1 for h, r in PAIRS if h.isascii() and r.isascii()) > 200


# -- BLEU ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tokenize", ["13a", "zh"])
def test_bleu_equals_sacrebleu(tokenize: str) -> None:
    worst = 0.0
    for hyp, refs in [(h, [r]) for h, r in PAIRS] + MULTI:
        ours = sentence_bleu(hyp, refs, tokenize=tokenize).score  # type: ignore[arg-type]
        ref = sacrebleu.sentence_bleu(hyp, refs, smooth_method="exp", tokenize=tokenize).score / 100
        worst = max(worst, abs(ours - ref))
        assert ours == pytest.approx(ref, abs=TOL), (hyp, refs)
    assert worst <= TOL


@pytest.mark.parametrize("tokenize", ["13a", "zh"])
def test_tokenizers_equal_sacrebleu(tokenize: str) -> None:
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
    from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh

    from streameval.evaluators.bleu import tokenize_13a, tokenize_zh

    theirs = Tokenizer13a() if tokenize == "13a" else TokenizerZh()
    ours = tokenize_13a if tokenize == "13a" else tokenize_zh
    tricky = [
        "3.5-4 items, (ok) 1,000.5 U.S. e-mail -x- x- &amp; &quot;q&quot; <skipped> a-\nb",
        "１２３，４５６。",
    ]
    for text in tricky + [h for h, _ in PAIRS]:
        assert ours(text) == theirs(text).split(), text


def test_bleu_lowercase_equals_sacrebleu() -> None:
    for hyp, refs in MULTI[:100]:
        ours = sentence_bleu(hyp, refs, lowercase=True).score
        assert ours == pytest.approx(sacrebleu.sentence_bleu(hyp, refs, lowercase=True).score / 100, abs=TOL)


def test_bleu_simple_equals_seed_004() -> None:
    for hyp, refs in [(h, [r]) for h, r in PAIRS] + MULTI:
        assert bleu_simple(refs, hyp) == pytest.approx(seed_bleu(refs, hyp), abs=TOL)


# -- ROUGE-L ---------------------------------------------------------------------------------------
class CJKTokenizer:
    """rouge-score's default tokenisation (lower case, letter/digit runs) with one token per CJK character."""

    _CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af])")

    def tokenize(self, text: str) -> list[str]:
        return re.findall(r"[^\W_]+", self._CJK.sub(r" \1 ", text.lower()))


SCORER = rouge_scorer.RougeScorer(["rougeL"], tokenizer=CJKTokenizer())


def test_rouge_l_equals_rouge_score() -> None:
    for hyp, refs in [(h, [r]) for h, r in PAIRS] + MULTI:
        ours, _ = rouge_l(hyp, refs, select="f1")
        ref = SCORER.score_multi(refs, hyp)["rougeL"]
        assert (ours.precision, ours.recall, ours.f1) == pytest.approx(
            (ref.precision, ref.recall, ref.fmeasure), abs=TOL
        ), (hyp, refs)


def test_rouge_l_whitespace_recall_equals_seed_004() -> None:
    for hyp, refs in [(h, [r]) for h, r in PAIRS] + MULTI:
        ours, _ = rouge_l(hyp, refs, select="recall", tokenize="whitespace")
        seed = seed_rouge_l(refs, hyp)
        assert (ours.precision, ours.recall, ours.f1) == pytest.approx(
            (seed["rouge_l_precision"], seed["rouge_l_recall"], seed["rouge_l"]), abs=TOL
        ), (hyp, refs)


# -- SQuAD ------------------------------------------------------------------------------------------
def squad_normalize(s: str) -> str:
    """SQuAD v1.1/v2.0 ``normalize_answer``."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def squad_v2_f1(pred_toks: list[str], gold_toks: list[str]) -> float:
    """SQuAD v2.0 ``compute_f1`` on token lists."""
    common = Counter(gold_toks) & Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return float(gold_toks == pred_toks)
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_toks)
    recall = num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


ZH_STOP = {w for w in stopwordsiso.stopwords("zh") if re.search(r"[\u4e00-\u9fff]", w)}
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def zh_normalize(s: str) -> str:
    s = unicodedata.normalize("NFKC", s).lower()
    s = "".join(
        ch for ch in s if ch not in string.punctuation and not unicodedata.category(ch).startswith("P")
    )
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def zh_tokens(norm: str) -> list[str]:
    if not _CJK.search(norm):
        return norm.split()
    words = [w for w in rjieba.cut(norm) if w.strip() and w not in ZH_STOP]
    return words or re.findall(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\W_]+", norm)


def test_token_f1_equals_squad_on_english() -> None:
    english = [(h, r) for h, r in PAIRS if h.isascii() and r.isascii()]
    assert len(english) > 200
    for hyp, ref in english:
        expected = squad_v2_f1(squad_normalize(hyp).split(), squad_normalize(ref).split())
        assert token_f1(hyp, ref)[2] == pytest.approx(expected, abs=TOL), (hyp, ref)


def test_token_f1_equals_squad_formula_on_chinese() -> None:
    chinese = [(h, r) for h, r in PAIRS if not (h.isascii() and r.isascii())]
    assert len(chinese) > 200
    for hyp, ref in chinese:
        expected = squad_v2_f1(zh_tokens(zh_normalize(hyp)), zh_tokens(zh_normalize(ref)))
        assert token_f1(hyp, ref)[2] == pytest.approx(expected, abs=TOL), (hyp, ref)


def test_exact_match_flag_equals_squad_on_english() -> None:
    from streameval.evaluators._lang import normalize_answer

    for hyp, ref in PAIRS:
        if hyp.isascii() and ref.isascii():
            assert (normalize_answer(hyp) == normalize_answer(ref)) == (
                squad_normalize(hyp) == squad_normalize(ref)
            )


@given(
    st.text(st.sampled_from([*list("ab1 2.,-&;:/()[]{}~`'\"\n\t"), "模", "，", "“", "→", "ａ"]), max_size=30)
)
def test_tokenizers_equal_sacrebleu_on_punctuation_soup(text: str) -> None:
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
    from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh

    from streameval.evaluators.bleu import tokenize_13a, tokenize_zh

    assert tokenize_13a(text) == Tokenizer13a()(text).split()
    assert tokenize_zh(text) == TokenizerZh()(text).split()
