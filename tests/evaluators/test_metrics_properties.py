"""Invariants of the text metrics (Hypothesis): scores in [0, 1], identical texts score 1, symmetry where
the definition is symmetric (exact match, token F1, ROUGE-L F1 with one reference, keyword Jaccard)."""

from __future__ import annotations

import pytest
from _support import event as request_event
from hypothesis import given, settings
from hypothesis import strategies as st

from streameval.evaluators import build_evaluator
from streameval.evaluators._lang import cjk_tokens, normalize_answer, squad_tokens
from streameval.evaluators.answer import token_f1
from streameval.evaluators.classification import keyword_jaccard
from streameval.evaluators.rouge import rouge_l
from streameval.models import RequestEvent

_ALPHABET = st.sampled_from(list("abcdeTHE xyz019 ,.!?-'") + list("模型北京的是，。！“”ＡＢ１　"))
TEXT = st.text(_ALPHABET, max_size=40)
TEXT_EVALUATORS = [
    "exact_match_normalized",
    "token_f1",
    "bleu",
    "bleu_simple",
    "rouge_l",
    "keyword_match",
]
BUILT = {name: build_evaluator(name) for name in TEXT_EVALUATORS}
settings.register_profile("metrics", max_examples=150, deadline=None)
settings.load_profile("metrics")


def _event(output: str, expected: str) -> RequestEvent:
    return request_event(id="e", output=output, expected=expected)


@pytest.mark.parametrize("name", TEXT_EVALUATORS)
@given(output=TEXT, expected=TEXT)
def test_scores_are_in_unit_interval(name: str, output: str, expected: str) -> None:
    score = BUILT[name].evaluate(_event(output, expected))
    assert 0.0 <= score.score <= 1.0


def _has_tokens(text: str) -> bool:
    return bool(cjk_tokens(text))


@pytest.mark.parametrize("name", ["exact_match_normalized", "token_f1", "bleu", "bleu_simple", "rouge_l"])
@given(text=TEXT)
def test_identical_texts_score_one(name: str, text: str) -> None:
    # BLEU, ROUGE-L and the agent-metrics spec's BLEU score an output without tokens 0 (there is nothing to match);
    # exact match and token F1 score two empty answers 1 (SQuAD v2.0).
    if name in ("bleu", "bleu_simple", "rouge_l") and not _has_tokens(text):
        return
    if name == "bleu_simple" and not text.split():
        return
    assert BUILT[name].evaluate(_event(text, text)).score == pytest.approx(1.0)


@given(a=TEXT, b=TEXT)
def test_symmetric_metrics(a: str, b: str) -> None:
    assert token_f1(a, b)[2] == pytest.approx(token_f1(b, a)[2])
    assert (normalize_answer(a) == normalize_answer(b)) == (normalize_answer(b) == normalize_answer(a))
    ab, ba = rouge_l(a, [b])[0], rouge_l(b, [a])[0]
    assert ab.f1 == pytest.approx(ba.f1) and ab.precision == pytest.approx(ba.recall)
    assert keyword_jaccard(a, b) == pytest.approx(keyword_jaccard(b, a))
    em = BUILT["exact_match_normalized"]
    assert em.evaluate(_event(a, b)).score == pytest.approx(em.evaluate(_event(b, a)).score)


@given(a=TEXT, b=TEXT, c=TEXT)
def test_max_over_references(a: str, b: str, c: str) -> None:
    event = RequestEvent(id="e", model="m", output=a, references=[b, c])
    for name in ("token_f1", "exact_match_normalized"):
        both = BUILT[name].evaluate(event).score
        single = max(BUILT[name].evaluate(_event(a, t)).score for t in (b, c))
        assert both == pytest.approx(single)


@given(text=TEXT)
def test_squad_tokens_of_normalised_text_have_no_punctuation(text: str) -> None:
    for token in squad_tokens(normalize_answer(text)):
        assert not any(ch in ",.!?'-，。！“”" for ch in token)
