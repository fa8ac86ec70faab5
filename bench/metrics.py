"""Per-event cost of every metric evaluator on 300-token outputs, and ROUGE-L against the agent-metrics spec's Python LCS.

    .venv/bin/python bench/metrics.py            # ~20 seconds

Prints µs per event (median of repeats) for English words, Chinese characters and English prose (real
sentences with punctuation), each with the speed-up over the code before the text-metric speed-ups
(tests/metrics_baseline.py, patched in by bench/_baseline.py) measured in the same run on the same event;
then the speed-up of our ROUGE-L (rapidfuzz LCSseq) over the agent-metrics spec's O(m·n) dynamic programme.
bench/eval_profile.py measures the whole rule-only benchmark suite the same way.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _baseline import baseline

from streameval.evaluators import build_evaluator
from streameval.evaluators.rouge import rouge_l
from streameval.models import RequestEvent

TOKENS = 300
EN_VOCAB = [
    "the",
    "model",
    "answer",
    "is",
    "correct",
    "because",
    "data",
    "graph",
    "shows",
    "capital",
    "city",
    "France",
    "Paris",
    "river",
    "Seine",
    "retrieval",
    "latency",
    "report",
    "citation",
    "source",
    "image",
    "metric",
    "score",
    "window",
    "event",
    "stream",
]
ZH_VOCAB = list("模型回答正确因为数据图谱显示首都城市法国巴黎河流检索延迟报告引用来源图片指标分数窗口事件流")


def _seed_lcs(text1: str, text2: str) -> int:
    """The agent-metrics spec's ``calculate_rouge_l``'s LCS (the baseline)."""
    words1, words2 = text1.lower().split(), text2.lower().split()
    m, n = len(words1), len(words2)
    if m == 0 or n == 0:
        return 0
    dp = [[0] * (n + 1) for _ in range(m + 1)]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            if words1[i - 1] == words2[j - 1]:
                dp[i][j] = dp[i - 1][j - 1] + 1
            else:
                dp[i][j] = max(dp[i - 1][j], dp[i][j - 1])
    return dp[m][n]


def _text(rng: random.Random, vocab: list[str], sep: str) -> str:
    return sep.join(rng.choice(vocab) for _ in range(TOKENS))


def _perturbed(rng: random.Random, text: str, vocab: list[str], sep: str) -> str:
    units = text.split(sep) if sep else list(text)
    for _ in range(TOKENS // 5):
        units[rng.randrange(len(units))] = rng.choice(vocab)
    return sep.join(units)


def _prose(rng: random.Random) -> tuple[str, str]:
    """~300 words of the real English sentences in tests/data, and a reference with a fifth of them replaced."""
    sentences = json.loads(
        (Path(__file__).resolve().parent.parent / "tests/data/metrics_real_text.json").read_text()
    )["en"]
    words: list[str] = []
    while len(words) < TOKENS:
        words += rng.choice(sentences).split()
    reference = [w if rng.random() < 0.8 else rng.choice(words) for w in words]
    return " ".join(words), " ".join(reference)


def _events(rng: random.Random) -> dict[str, RequestEvent]:
    en = _text(rng, EN_VOCAB, " ")
    zh = _text(rng, ZH_VOCAB, "")
    prose, prose_ref = _prose(rng)
    report = "\n".join(
        [
            "# Report",
            "## Key Points",
            en[:400],
            "## Overview",
            "[a](https://a.org/1) [b](https://b.org/2)",
            "![c](c.png)",
            "## Detailed Analysis",
            en[400:],
            "## Key Citations",
            "[d](https://d.org/)",
        ]
    )
    retrieval = {
        "retrieved_entities": [f"e{i}" for i in range(20)],
        "cited_entities": [f"e{i}" for i in range(0, 30, 2)],
        "latency_s": 1.2,
        "keywords": ["capital", "france", "river"],
        "entities": [
            {"id": f"e{i}", "name": f"Entity {i}", "description": "capital city on a river"}
            for i in range(15)
        ],
        "relationships": [
            {"source": f"e{i}", "target": f"e{i + 1}", "type": f"t{i % 3}", "description": "d"}
            for i in range(14)
        ],
        "chunks": [{"id": f"c{i}", "text": en[i * 100 : i * 100 + 600]} for i in range(3)],
        "communities": [{"id": "c", "summary": en[:300]}],
        "agent_type": "graph",
    }
    agent = {
        "task_quality": 0.9,
        "communication_rounds": 3,
        "task_time": 10.0,
        "original_score": 0.9,
        "transferred_score": 0.8,
        "results": [{"domain": "qa", "score": 0.8}, {"domain": "code", "score": 0.7}],
    }
    common: dict[str, Any] = {
        "id": "b",
        "model": "m",
        "input": "What is the capital of France?",
        "label": True,
        "retrieval": retrieval,
        "agent": agent,
    }
    return {
        "en": RequestEvent.model_validate(
            {**common, "output": en, "expected": _perturbed(rng, en, EN_VOCAB, " ")}
        ),
        "zh": RequestEvent.model_validate(
            {**common, "output": zh, "expected": _perturbed(rng, zh, ZH_VOCAB, "")}
        ),
        "prose": RequestEvent.model_validate({**common, "output": prose, "expected": prose_ref}),
        "report": RequestEvent.model_validate({**common, "output": report, "report": {"style": "news"}}),
    }


def _us(fn: Callable[[], Any], budget_s: float = 0.15, repeats: int = 5) -> float:
    """Median µs per call over ``repeats`` batches sized to about ``budget_s`` / repeats each."""
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    n = max(1, int(budget_s / repeats / once))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(samples)


def _before_after(fn: Callable[[], Any], rounds: int = 7) -> tuple[float, float]:
    """(after, before) µs per call, the fastest of ``rounds`` batches each: the batches alternate the
    current and the old code, and the minimum is the figure other processes on a shared box disturb least."""
    _us(fn, budget_s=0.02)  # warm-up (lazy initialisation, e.g. rjieba's dictionary)
    after, before = [], []
    for _ in range(rounds):
        after.append(_us(fn, budget_s=0.02, repeats=1))
        with baseline():
            before.append(_us(fn, budget_s=0.02, repeats=1))
    return min(after), min(before)


TEXT = ["exact_match_normalized", "token_f1", "bleu", "bleu_simple", "rouge_l", "keyword_match", "similarity"]
OTHER = {
    "report": [
        "report_metrics",
        "report_sections",
        "report_citations",
        "report_word_count",
        "report_sources",
        "report_images",
    ],
    "en": [
        "retrieval_precision",
        "retrieval_utilization",
        "retrieval_latency",
        "chunk_utilization",
        "entity_coverage",
        "graph_coverage",
        "relationship_utilization",
        "subgraph_quality",
        "community_relevance",
        "collaboration_efficiency",
        "portability",
        "adaptability",
    ],
}


def main() -> int:
    events = _events(random.Random(3))
    kinds = ("en", "zh", "prose")
    print(
        f"µs per event, {TOKENS}-token outputs; (x) = speed-up over the old code (fastest of 7 alternating batches)"
    )
    print(f"{'evaluator':28} {'english':>16} {'chinese':>16} {'prose':>16}")
    for name in TEXT:
        ev = build_evaluator(name)
        cells = []
        for kind in kinds:
            after, before = _before_after(lambda ev=ev, kind=kind: ev.evaluate(events[kind]))
            cells.append(f"{after:7.1f} ({before / after:4.1f}x)")
        print(f"{name:28} " + " ".join(f"{cell:>16}" for cell in cells))
    for kind, names in OTHER.items():
        for name in names:
            ev = build_evaluator(name)
            print(f"{name:28} {_us(lambda ev=ev, kind=kind: ev.evaluate(events[kind])):10.1f}")

    out, ref = events["en"].output, events["en"].expected or ""
    seed = _us(lambda: _seed_lcs(ref, out), budget_s=1.0, repeats=3)
    ours_ws = _us(lambda: rouge_l(out, [ref], tokenize="whitespace"))
    ours_eval = _us(lambda: build_evaluator("rouge_l").evaluate(events["en"]))
    print()
    print(f"ROUGE-L, {TOKENS} x {TOKENS} tokens: the agent-metrics spec's Python LCS {seed:,.0f} µs")
    print(f"  ours (same whitespace tokens)  {ours_ws:8.1f} µs   speed-up {seed / ours_ws:6.0f}x")
    print(
        f"  ours (rouge_l evaluator, CJK)  {ours_eval:8.1f} µs   speed-up {seed / ours_eval:6.0f}x  (target >= 100x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
