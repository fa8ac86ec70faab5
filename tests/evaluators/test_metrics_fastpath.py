"""The fast paths of the text metrics equal the code they replaced (tests/metrics_baseline.py) exactly.

bleu (13a passes without regex scans, n-gram counting per order, unique-n-gram set path, multi-reference
clipping, early stop), token_f1 /
exact_match_normalized (article removal without the regex, one tokenisation), rouge_l (translate-based
ASCII tokens) and similarity (rapidfuzz's score_hint) on random English, Chinese and mixed texts, one to
three references. Equality is ``==`` on the results, not a tolerance: the arithmetic did not change.
"""

from __future__ import annotations

import random

import metrics_baseline as old
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streameval.evaluators import build_evaluator
from streameval.evaluators._lang import answer_tokens, cjk_tokens, normalize_answer
from streameval.evaluators.answer import squad_f1, token_f1
from streameval.evaluators.bleu import (
    _pad_dash_after_digit,
    _pad_period_comma_after_non_digit,
    _pad_period_comma_before_non_digit,
    bleu_simple,
    sentence_bleu,
    tokenize_13a,
    tokenize_zh,
)
from streameval.evaluators.presets import levenshtein
from streameval.evaluators.rouge import rouge_l
from streameval.models import RequestEvent

# Pieces of text: English words (articles included), numbers and hyphenated words the 13a tokeniser
# splits, ASCII punctuation, Chinese words and characters, full-width forms, CJK punctuation, and the
# characters that are neither word characters nor whitespace (control characters, "_", combining marks,
# "İ" whose lower() adds a combining dot) that send normalize_answer to its regex path.
EN = [
    "the",
    "a",
    "an",
    "The",
    "A",
    "cat",
    "sat",
    "on",
    "mat",
    "model",
    "answer",
    "is",
    "not",
    "GPT-4",
    "3.5",
    "1,000",
    "U.S.",
    "e-mail",
    "don't",
    "x-",
    "-y",
    "&amp;",
    "&quot;",
    "<skipped>",
    "it's",
    "naïve",
]
ZH = [
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
    "你好",
    "世界",
    "模",
    "型",
]
PUNCT = [
    *list(",.;:!?()[]{}\"'-&<>/_~`|@#$%^*+="),
    "，",
    "。",
    "！",
    "、",
    "《",
    "》",
    "“",
    "”",
    "—",
    "…",
    "·",
]
ODD = [
    "ＡＢＣ",
    "１２３",
    "\x00",
    "\x07",
    "\x7f",
    "\x1c",
    "İ",
    "e\u0301",
    "①",
    "½",
    "ß",
    "Ǆ",
    "ｶﾀ",
    "한국어",
    "ひらがな",
    "㍿",
]
SPACE = [" ", " ", " ", "  ", "\t", "\n", "\u3000", ""]

_piece = st.sampled_from(EN + ZH + PUNCT + ODD)


@st.composite
def texts(draw: st.DrawFn, pieces: st.SearchStrategy[str] = _piece, max_size: int = 40) -> str:
    parts = draw(st.lists(st.tuples(pieces, st.sampled_from(SPACE)), max_size=max_size))
    return "".join(word + space for word, space in parts)


english = texts(st.sampled_from(EN + PUNCT[:8]))
chinese = texts(st.sampled_from(ZH + PUNCT[-11:]))
mixed = texts()
any_text = st.one_of(english, chinese, mixed)
# few distinct tokens: repeated n-grams (the Counter path); many: unique n-grams (the set path)
small_vocab = texts(st.sampled_from(["a", "b", "c", "a b", "模", "型"]), max_size=80)
large_vocab = st.lists(st.text("abcdefghij", min_size=3, max_size=6), max_size=60).map(" ".join)
bleu_text = st.one_of(any_text, small_vocab, large_vocab)


def _perturbed(seed: int, text: str) -> str:
    """A reference close to ``text`` (so higher orders match too), from a seed Hypothesis draws."""
    rng = random.Random(seed)
    words = text.split(" ")
    for _ in range(rng.randint(0, 4)):
        if words and rng.random() < 0.5:
            words.pop(rng.randrange(len(words)))
        else:
            words.insert(rng.randint(0, len(words)), rng.choice(EN + ZH))
    return " ".join(words)


@st.composite
def hyp_and_refs(draw: st.DrawFn) -> tuple[str, list[str]]:
    hyp = draw(bleu_text)
    refs = draw(
        st.lists(st.one_of(bleu_text, st.integers(0, 10**6).map(lambda s: _perturbed(s, hyp))), max_size=3)
    )
    return hyp, refs


# -- bleu --------------------------------------------------------------------------------------------
_soup = st.text(st.sampled_from([*"ab9 0.,-.,-\n()$/é", "模"]), max_size=24)


@settings(max_examples=1000, deadline=None)
@given(_soup)
def test_13a_passes_equal_their_regexes(line: str) -> None:
    """Each hand-written pass returns the very string its regex substitution does (not just the tokens)."""
    assert " ".join(old.SYMBOLS.split(line)) == old.SYMBOLS.sub(r" \1 ", line)
    assert _pad_period_comma_after_non_digit(line) == old.BEFORE_PUNCT.sub(r"\1 \2 ", line)
    assert _pad_period_comma_before_non_digit(line) == old.AFTER_PUNCT.sub(r" \1 \2", line)
    assert _pad_dash_after_digit(line) == old.DASH.sub(r"\1 \2 ", line)


@settings(max_examples=400, deadline=None)
@given(st.one_of(any_text, _soup, st.text(max_size=40)))
def test_tokenizers_equal_the_old_code(text: str) -> None:
    assert tokenize_13a(text) == old.tokenize_13a(text)
    assert tokenize_zh(text) == old.tokenize_zh(text)


@settings(max_examples=400, deadline=None)
@given(hyp_and_refs(), st.sampled_from(["13a", "zh"]), st.booleans(), st.sampled_from([1, 2, 4, 6]))
def test_bleu_equals_the_old_code(
    case: tuple[str, list[str]], tokenize: str, lowercase: bool, order: int
) -> None:
    hyp, refs = case
    ours = sentence_bleu(hyp, refs, tokenize=tokenize, lowercase=lowercase, max_order=order)  # type: ignore[arg-type]
    assert ours == old.sentence_bleu(hyp, refs, tokenize=tokenize, lowercase=lowercase, max_order=order)


@settings(max_examples=300, deadline=None)
@given(hyp_and_refs(), st.sampled_from([1, 2, 4]), st.booleans())
def test_bleu_simple_equals_the_old_code(case: tuple[str, list[str]], order: int, cjk: bool) -> None:
    hyp, refs = case
    tokenizer = cjk_tokens if cjk else None
    ours = bleu_simple(refs, hyp, max_order=order, tokenizer=tokenizer)
    assert ours == old.bleu_simple(refs, hyp, max_order=order, tokenizer=tokenizer)


def _bench_text(rng: random.Random, vocab: list[str], tokens: int = 300) -> tuple[str, str]:
    out = [rng.choice(vocab) for _ in range(tokens)]
    ref = [w if rng.random() < 0.8 else rng.choice(vocab) for w in out]
    return " ".join(out), " ".join(ref)


@pytest.mark.parametrize("vocab_size", [3, 27, 2000])
def test_bleu_equals_the_old_code_on_long_texts(vocab_size: int) -> None:
    """300-token outputs as bench/_worker.py makes them: repeated n-grams (27 words), unique ones (2000)."""
    rng = random.Random(vocab_size)
    vocab = [f"w{i}" for i in range(vocab_size)]
    for _ in range(20):
        out, ref = _bench_text(rng, vocab)
        other = _bench_text(rng, vocab)[1]
        for refs in ([ref], [ref, other], [other, ref, out[: len(out) // 2]]):
            assert sentence_bleu(out, refs) == old.sentence_bleu(out, refs)
            assert bleu_simple(refs, out) == old.bleu_simple(refs, out)


# -- token_f1 / exact_match_normalized ---------------------------------------------------------------
# Words that are not one run of \w characters, where \b(a|an|the)\b matches inside a word: the regex
# path must keep them; "㍿" has no CJK but its NFKC form (株式会社) has, so it must be segmented.
TRICKY = [
    "the\x00x a",
    "a\x7fb the an",
    "x\x07the",
    "the\x1cdog",
    "İthe a",
    "e\u0301 the",
    "the\u0301 a",
    "ａ the ｔｈｅ",
    "㍿ the",
    "㍿a",
    "the_ a_b",
    "½the",
    "A B THE",
    "",
    "   ",
    "\x00",
]


@pytest.mark.parametrize("text", TRICKY)
def test_normalize_answer_equals_the_old_code_on_tricky_words(text: str) -> None:
    assert normalize_answer(text) == old.normalize_answer(text)
    assert answer_tokens(text) == old.answer_tokens(text)
    assert answer_tokens(text, chinese="chars") == old.answer_tokens(text, chinese="chars")


@settings(max_examples=400, deadline=None)
@given(st.one_of(any_text, st.text(st.characters(max_codepoint=127), max_size=40)))
def test_normalize_answer_equals_the_old_code(text: str) -> None:
    assert normalize_answer(text) == old.normalize_answer(text)
    for chinese in ("words", "chars"):
        assert answer_tokens(text, chinese=chinese) == old.answer_tokens(text, chinese=chinese)


@settings(max_examples=300, deadline=None)
@given(any_text, any_text, st.sampled_from(["words", "chars"]))
def test_token_f1_equals_the_old_code(prediction: str, target: str, chinese: str) -> None:
    assert token_f1(prediction, target, chinese=chinese) == old.token_f1(prediction, target, chinese=chinese)


@given(st.lists(st.sampled_from("abcde"), max_size=12), st.lists(st.sampled_from("abcde"), max_size=12))
def test_squad_f1_equals_the_old_code(pred: list[str], gold: list[str]) -> None:
    assert squad_f1(pred, gold) == old.squad_f1(pred, gold)


# -- rouge_l -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text", ["a_b", "Hello_World 42", "x\x00y\x7fZ", "A-B.c,D", "don't", "", "_", "TeSt123abc"]
)
def test_cjk_tokens_equal_the_old_code_on_ascii_separators(text: str) -> None:
    assert cjk_tokens(text) == old.cjk_tokens(text)


@settings(max_examples=300, deadline=None)
@given(st.one_of(any_text, st.text(max_size=40), st.text(st.characters(max_codepoint=127), max_size=40)))
def test_cjk_tokens_equal_the_old_code(text: str) -> None:
    assert cjk_tokens(text) == old.cjk_tokens(text)


@settings(max_examples=300, deadline=None)
@given(hyp_and_refs(), st.sampled_from(["recall", "f1"]), st.sampled_from(["cjk", "whitespace"]))
def test_rouge_l_equals_the_old_code(case: tuple[str, list[str]], select: str, tokenize: str) -> None:
    hyp, refs = case
    assert rouge_l(hyp, refs, select=select, tokenize=tokenize) == old.rouge_l(  # type: ignore[arg-type]
        hyp, refs, select=select, tokenize=tokenize
    )


# -- similarity (levenshtein) ------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(bleu_text, bleu_text, st.one_of(st.none(), st.floats(0.0, 1.0)))
def test_levenshtein_hint_never_changes_the_score(a: str, b: str, hint: float | None) -> None:
    assert levenshtein(a, b, hint=hint) == old.levenshtein(a, b)


def test_similarity_scores_do_not_depend_on_the_previous_event() -> None:
    """The evaluator hints rapidfuzz with its last score; alternate near-identical and unrelated long texts."""
    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(40)]
    evaluator = build_evaluator("similarity", {"algorithm": "levenshtein"})
    seen = set()
    for i in range(40):
        out, ref = _bench_text(rng, vocab, tokens=rng.choice([5, 100, 300]))
        if i % 3 == 0:
            ref = _bench_text(rng, vocab)[1]  # unrelated: far below the last score's hint
        event = RequestEvent.model_validate({"id": f"e{i}", "model": "m", "output": out, "expected": ref})
        score = evaluator.evaluate(event)
        assert score.score == old.levenshtein(out, ref)
        seen.add(round(score.score, 1))
    assert len(seen) >= 3  # the scores really moved between events
