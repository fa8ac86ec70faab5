"""The pre-speed-up text metrics (tests/metrics_baseline.py) patched into the evaluator modules, so a
benchmark measures "before" and "after" in the same run. Not a benchmark itself."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import metrics_baseline as old

__all__ = ["baseline"]

# (module, name) pairs the evaluators call at run time, with their old versions
_PATCHES = [
    ("streameval.evaluators.bleu", "sentence_bleu", old.sentence_bleu),
    ("streameval.evaluators.bleu", "bleu_simple", old.bleu_simple),
    ("streameval.evaluators.answer", "answer_tokens", old.answer_tokens),
    ("streameval.evaluators.answer", "normalize_answer", old.normalize_answer),
    ("streameval.evaluators.answer", "squad_f1", old.squad_f1),
    ("streameval.evaluators.rouge", "rouge_l", old.rouge_l),
    ("streameval.evaluators.presets", "levenshtein", old.levenshtein),
    # the other users of the changed helpers (keyword_match and the RAG metrics, report word counts)
    ("streameval.evaluators._lang", "normalize_answer", old.normalize_answer),
    ("streameval.evaluators.rag", "normalize_answer", old.normalize_answer),
    ("streameval.evaluators.report", "cjk_tokens", old.cjk_tokens),
]


@contextmanager
def baseline() -> Iterator[None]:
    """Inside the block the evaluators run the text-metric code as it was before the speed-ups."""
    with ExitStack() as stack:
        for module, name, new in _PATCHES:
            stack.enter_context(mock.patch(f"{module}.{name}", new))
        yield
