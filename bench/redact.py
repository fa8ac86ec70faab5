"""Redaction before judging: precision and recall per detector on the labelled corpus, and the worker CPU
a judged event pays for it, against the same run without redaction.

    .venv/bin/python bench/redact.py [--events 300] [--rounds 4] [--window 32]

1. Precision and recall per kind on tests/data/redact_corpus.jsonl (English and Chinese, with look-alikes;
   tests/data/make_redact_corpus.py writes it): a found span counts when it overlaps a labelled span of its
   kind; the rest are false positives, and labelled spans nothing of their kind overlaps are misses.
2. CPU: ``Pipeline.process`` on a judged suite (exact_match + the three demo judges, the simulated judge in
   a subprocess, so its CPU is not ours), ``--window`` events in flight, distinct events, no judge cache;
   the same events with and without a ``redact:`` block, alternated per round, the start-up heap frozen
   as the worker freezes it. Printed: this process's CPU per event (``time.process_time``) for short
   texts (~180 characters) and 2 KB texts, each with an email, a phone and a card number; the
   difference (with - without) next to a second "without" pipeline against the first (A/A: the noise
   of a difference on this box); and the CPU spent inside the redaction step itself
   (``Redactors.judged``, timed in place) as a share of the judged event without it, next to the
   issue's target (10 %). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
from _judgesim import start_sim

from streameval._util import freeze_heap
from streameval.config import parse_config
from streameval.features.redact import RedactConfig, Redactor
from streameval.judges.sim import demo_judges
from streameval.models import RequestEvent
from streameval.pipeline import Pipeline

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "redact_corpus.jsonl"


def accuracy() -> None:
    rows = [orjson.loads(line) for line in CORPUS.read_bytes().splitlines()]
    redactor = Redactor(RedactConfig())
    tp: dict[str, int] = defaultdict(int)
    fp: dict[str, int] = defaultdict(int)
    fn: dict[str, int] = defaultdict(int)
    for row in rows:
        text = row["text"]
        labelled = []
        for span in row["spans"]:
            start = text.index(span["value"])
            labelled.append((start, start + len(span["value"]), span["kind"]))
        found = [(s, e, k) for s, e, k, v in redactor.spans(text) if v is not None]
        for s, e, k in found:
            if any(k == lk and s < le and ls < e for ls, le, lk in labelled):
                tp[k] += 1
            else:
                fp[k] += 1
        for ls, le, lk in labelled:
            if not any(k == lk and s < le and ls < e for s, e, k in found):
                fn[lk] += 1
    kinds = sorted(set(tp) | set(fp) | set(fn))
    negatives = sum(1 for r in rows if not r["spans"])
    print(f"corpus: {len(rows)} lines ({negatives} look-alike lines with no value), {CORPUS.name}")
    print(
        f"{'kind':<16} {'labelled':>8} {'found':>6} {'TP':>4} {'FP':>4} {'FN':>4} {'precision':>9} {'recall':>7}"
    )
    for k in kinds:
        found_n, labelled_n = tp[k] + fp[k], tp[k] + fn[k]
        precision = tp[k] / found_n if found_n else float("nan")
        recall = tp[k] / labelled_n if labelled_n else float("nan")
        print(
            f"{k:<16} {labelled_n:>8} {found_n:>6} {tp[k]:>4} {fp[k]:>4} {fn[k]:>4} {precision:>9.3f} {recall:>7.3f}"
        )
    t, f, n = sum(tp.values()), sum(fp.values()), sum(fn.values())
    print(f"{'all':<16} {t + n:>8} {t + f:>6} {t:>4} {f:>4} {n:>4} {t / (t + f):>9.3f} {t / (t + n):>7.3f}")


FILLER = "The quarterly report covers revenue, churn and the support backlog. 季度报告涵盖收入、流失率和客服积压情况。 "


def events(n: int, long: bool, values: bool = True) -> list[bytes]:
    """``n`` distinct events: short (~180 characters) or ~2 KB of English and Chinese, each with an email, a
    phone and a card number (``values``) or with none (most production text)."""
    out = []
    for i in range(n):
        tag = uuid.uuid4().hex[:8]
        found = f"mail li.lei{i}@example.com, phone 139{i % 10}12{i % 10}5678, card 4111 1111 1111 1111"
        values_text = found if values else f"ticket {tag} of batch {i}, see the notes"
        if long:
            body = (FILLER * 12)[:1900]
            text_in, text_out = f"{body} ({tag}) {values_text}", f"{values_text}. {body[:1800]} ({tag})"
        else:
            text_in, text_out = f"Reach me at {values_text} ({tag})?", f"Noted: {values_text}."
        out.append(
            orjson.dumps(
                {
                    "id": f"ev-{tag}",
                    "model": "m",
                    "input": text_in,
                    "output": text_out,
                    "expected": "noted",
                    "category": "qa_simple",
                }
            )
        )
    return out


async def cpu(args: argparse.Namespace) -> None:
    sim = await start_sim(0.0)
    try:
        judges = demo_judges(sim.url)
        suite = {"name": "judged", "default": True, "evaluators": [{"evaluator": "exact_match"}], "judge": {}}
        pipelines = {}
        for label, extra in (("without", {}), ("with", {"redact": {}}), ("without again", {})):
            _, suites = parse_config({"judges": judges, "suites": [suite], **extra})
            pipelines[label] = Pipeline(suites)
            await pipelines[label].start()
        inside = [0.0, 0]  # CPU seconds inside the redaction step, calls
        redactors = pipelines["with"].redactors
        assert redactors is not None
        judged = redactors.judged

        def timed(event: RequestEvent, suite: str) -> Any:
            began = time.process_time()
            try:
                return judged(event, suite)
            finally:
                inside[0] += time.process_time() - began
                inside[1] += 1

        redactors.judged = timed  # type: ignore[method-assign]

        async def run(pipeline: Pipeline, batch: list[bytes]) -> None:
            sem = asyncio.Semaphore(args.window)

            async def one(raw: bytes) -> None:
                async with sem:
                    outcome = await pipeline.process(raw)
                    assert outcome.result is not None and outcome.result.judge is not None

            await asyncio.gather(*(one(raw) for raw in batch))

        order = ["without", "with", "without again"]
        for label in order:  # warm-up: connections, caches
            await run(pipelines[label], events(20, False))
        freeze_heap()  # as the worker does once started (stream/_util.py)
        for size, long, values in (
            ("short", False, True),
            ("2 KB", True, True),
            ("2 KB, no value", True, False),
        ):
            inside[:] = [0.0, 0]
            spent: dict[str, float] = defaultdict(float)
            count: dict[str, int] = defaultdict(int)
            for r in range(args.rounds):
                for label in order[r % 3 :] + order[: r % 3]:
                    batch = events(args.events, long, values)
                    began = time.process_time()
                    await run(pipelines[label], batch)
                    spent[label] += time.process_time() - began
                    count[label] += len(batch)
            per = {k: spent[k] / count[k] * 1e6 for k in spent}
            step = inside[0] / inside[1] * 1e6
            sample = [RequestEvent.model_validate_json(raw) for raw in events(50, long, values)]
            chars = sum(len(e.input or "") + len(e.output) + len(e.expected or "") for e in sample) / len(
                sample
            )
            base = per["without"]
            print(
                f"{size:>14} texts (~{chars:.0f} chars/event): judged event CPU without redaction {base:.0f} us, "
                f"with {per['with']:.0f} us ({(per['with'] - base) / base * 100:+.1f} %; A/A "
                f"{(per['without again'] - base) / base * 100:+.1f} %); the redaction step itself "
                f"{step:.0f} us/event = {step / base * 100:.1f} % of the judged event (target <= 10 %)",
                flush=True,
            )
        for pipeline in pipelines.values():
            await pipeline.close()
    finally:
        sim.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=300, help="events per round and side")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--window", type=int, default=32, help="events in flight")
    parser.add_argument("--accuracy-only", action="store_true")
    args = parser.parse_args()
    accuracy()
    if not args.accuracy_only:
        asyncio.run(cpu(args))


if __name__ == "__main__":
    sys.exit(main())
