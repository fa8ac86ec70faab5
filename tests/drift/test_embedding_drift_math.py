"""Embedding drift's numbers without Redis: a text's vector does not depend on its batch, the fixed-point
sums do not depend on the split, the random-feature MMD² follows the kernel's, the fold's reference and
one alert per shift, and the same numbers from the evaluation processes as from the worker."""

from __future__ import annotations

import math
import random
from functools import partial
from typing import Any

import numpy as np
import orjson
import pytest
import yaml
from _semantic_extra import need_extra
from hypothesis import given, settings
from hypothesis import strategies as st

from streameval.features.embedding_drift import KEY as DRIFT
from streameval.features.embedding_drift._drift import (
    Drift,
    EmbeddingDriftConfig,
    WindowSums,
    centroid_distance,
    mmd2,
    pack_sums,
    sample,
    sum_samples,
    unpack_sums,
)
from streameval.features.setup import annotators

DIM = 384


def _drift_pipeline(suites: Any) -> Any:
    """A live pipeline: its annotators note embedding drift's samples (streameval.features.setup)."""
    from streameval.pipeline import Pipeline

    return Pipeline(suites, annotators=annotators(suites, embed_outputs=True))


def _cfg(**kw: object) -> EmbeddingDriftConfig:
    need_extra()
    return EmbeddingDriftConfig.model_validate({"window": 60, **kw})


def _unit(rng: np.random.Generator, centre: np.ndarray, spread: float) -> np.ndarray:
    v = centre + spread * rng.standard_normal(DIM)
    return (v / np.linalg.norm(v)).astype(np.float32)


def _sums(vectors: list[np.ndarray], cfg: EmbeddingDriftConfig, tag: str = "e") -> WindowSums:
    samples = [sample(v, f"{tag}-{i}", cfg) for i, v in enumerate(vectors)]
    return WindowSums.parse([int(x) for x in sum_samples(samples)], DIM)


def test_a_text_gets_the_same_vector_in_any_batch() -> None:
    need_extra()
    from streameval.embedding import encoder

    enc = encoder()
    texts = [
        "The weather is sunny today in Paris.",
        "def f(x): return x + 1",
        "A much longer sentence about the rain in Spain falling mainly on the plain, again and again.",
        "hi",
        *(f"Sentence number {i} about cats and dogs." for i in range(12)),
    ]
    alone = np.stack([enc.encode_exact([t])[0] for t in texts])
    assert np.array_equal(enc.encode_exact(texts), alone)
    assert np.array_equal(enc.encode_exact(texts[::-1])[::-1], alone)
    assert np.array_equal(enc.encode_exact(texts[3:9]), alone[3:9])
    # padding (the evaluator's encode) moves the last bits: why drift does not reuse those vectors
    assert np.allclose(enc.encode(texts), alone, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5))
def test_sums_do_not_depend_on_the_split(seed: int, workers: int) -> None:
    cfg = _cfg()
    rng = np.random.default_rng(seed)
    samples = [sample(_unit(rng, np.zeros(DIM), 1.0), f"e{i}", cfg) for i in range(40)]
    whole = pack_sums(sum_samples(samples))
    order = random.Random(seed).sample(range(len(samples)), len(samples))
    parts = [[samples[i] for i in order[w::workers]] for w in range(workers)]
    # each worker's batch sum, added as the record script adds them (doubles holding integers)
    total = [0] * (2 + DIM + cfg.features)
    for part in parts:
        if part:
            total = [a + b for a, b in zip(total, unpack_sums(pack_sums(sum_samples(part))), strict=True)]
    assert pack_sums(np.array(total, dtype=np.int64)) == whole


def _exact_mmd2(x: np.ndarray, y: np.ndarray, bandwidth: float) -> float:
    def k(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        d = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T
        return np.exp(-d / (2 * bandwidth**2))

    n, m = len(x), len(y)
    kxx, kyy = k(x, x), k(y, y)
    return float(
        (kxx.sum() - np.trace(kxx)) / (n * (n - 1))
        + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
        - 2 * k(x, y).mean()
    )


def test_the_feature_mmd_follows_the_kernel_mmd() -> None:
    cfg = _cfg(features=1024)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(DIM), rng.standard_normal(DIM)
    x = [_unit(rng, a, 1.5) for _ in range(60)]
    same = [_unit(rng, a, 1.5) for _ in range(60)]
    moved = [_unit(rng, 0.6 * a + 0.8 * b, 1.5) for _ in range(60)]
    sx = _sums(x, cfg, "x")
    for y, tag in ((same, "s"), (moved, "m")):
        estimate = mmd2(sx, _sums(y, cfg, tag))
        exact = _exact_mmd2(np.stack(x).astype(float), np.stack(y).astype(float), cfg.bandwidth)
        assert estimate == pytest.approx(exact, abs=0.01), tag
    assert mmd2(sx, _sums(moved, cfg, "m")) > 0.05 > abs(mmd2(sx, _sums(same, cfg, "s")))
    assert centroid_distance(sx, _sums(same, cfg, "s")) < 0.05 < centroid_distance(sx, _sums(moved, cfg, "m"))


def test_the_fold_learns_a_reference_then_alerts_once_per_shift() -> None:
    cfg = _cfg(reference_events=60, min_events=10)
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal(DIM), rng.standard_normal(DIM)
    drift = Drift(cfg)
    verdicts = []
    for w in range(16):
        centre = a if w < 8 else b
        window = _sums([_unit(rng, centre, 1.0) for _ in range(20)], cfg, f"w{w}")
        verdicts.append(drift.fold(w * 60, window))
        # a repeated fold (a crash before the state was saved elsewhere) is a no-op
        assert drift.fold(w * 60, window) is None
        drift = Drift.from_json(cfg, orjson.loads(orjson.dumps(drift.to_json())))
    assert verdicts[:3] == [None, None, None]  # the reference: 60 events
    assert all(v is not None and not v.fired for v in verdicts[3:8])
    fired = [w for w, v in enumerate(verdicts) if v is not None and v.fired]
    assert fired == [8]
    assert verdicts[8] is not None and verdicts[8].reference_count == 60
    assert verdicts[9:12] == [None, None, None]  # the new level is learnt again
    # a window below min_events is not compared
    assert drift.fold(16 * 60, _sums([_unit(rng, b, 1.0) for _ in range(5)], cfg, "small")) is None


def test_other_settings_learn_the_reference_again() -> None:
    """A state saved under another model, feature count or bandwidth is not compared with: it restarts."""
    cfg = _cfg(reference_events=20, min_events=10)
    rng = np.random.default_rng(1)
    drift = Drift(cfg)
    for w in range(3):
        drift.fold(w, _sums([_unit(rng, np.ones(DIM), 1.0) for _ in range(20)], cfg, f"w{w}"))
    doc = orjson.loads(orjson.dumps(drift.to_json()))
    assert Drift.from_json(cfg, doc).reference is not None
    for other in (_cfg(features=128), _cfg(bandwidth=0.5)):
        again = Drift.from_json(other, doc)
        assert again.reference is None and again.trail == [] and again.last == 2
    # a window of another shape (another model's dimension) drops the reference too
    small = WindowSums(20, 0, [1] * 8, [1] * cfg.features)
    assert drift.fold(3, small) is None and drift.reference is not None
    assert (drift.reference.n, len(drift.reference.v)) == (20, 8)  # learnt again from the new shape


def test_a_trailing_reference_follows_a_slow_move() -> None:
    cfg = _cfg(reference="trailing", reference_events=40, min_events=10)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(DIM), rng.standard_normal(DIM)
    drift, fired = Drift(cfg), []
    for w in range(40):  # from a to b over 40 windows: each step is small
        t = w / 39
        centre = math.cos(t * math.pi / 2) * a + math.sin(t * math.pi / 2) * b
        verdict = drift.fold(w, _sums([_unit(rng, centre, 1.0) for _ in range(20)], cfg, f"w{w}"))
        fired += [w] if verdict is not None and verdict.fired else []
        assert sum(s.n for s in drift.trail) <= 60
    assert fired == []
    pinned = Drift(_cfg(reference_events=40, min_events=10))
    rng = np.random.default_rng(3)
    hits = 0
    for w in range(40):
        t = w / 39
        centre = math.cos(t * math.pi / 2) * a + math.sin(t * math.pi / 2) * b
        verdict = pinned.fold(w, _sums([_unit(rng, centre, 1.0) for _ in range(20)], cfg, f"w{w}"))
        hits += verdict is not None and bool(verdict.fired)
    assert hits >= 1  # the pinned reference does see the move


async def test_evaluation_processes_give_the_same_numbers() -> None:
    need_extra()
    from streameval.config import parse_config_text
    from streameval.envelope import Source
    from streameval.evalpool import EvalPool
    from streameval.pipeline import Pipeline

    text = yaml.safe_dump(
        {
            "suites": [{"name": "qa", "default": True, "evaluators": [{"evaluator": "similarity"}]}],
            "windowing": {"embedding_drift": {"window": 60, "sample_rate": 0.5}},
        }
    )
    batch = [
        (
            orjson.dumps(
                {"id": f"e-{i}", "model": "m", "output": f"Reply number {i}" + " and more" * (i % 4)}
            ),
            Source(),
        )
        for i in range(16)
    ]
    _, suites = parse_config_text(text)
    local = Pipeline(suites, annotators=annotators(suites, embed_outputs=True)).process_sync_batch(batch, 0.0)
    pool = EvalPool(
        text,
        "suite.yaml",
        1,
        max_event_bytes=1 << 20,
        max_event_depth=64,
        annotate=partial(annotators, embed_outputs=True),
    )
    await pool.start()
    try:
        remote = await pool.evaluate(batch, 0.0)
    finally:
        await pool.close()
    chosen = 0
    for a, b in zip(local, remote, strict=True):
        assert a is not None and b is not None
        assert (a.annotations.get(DRIFT) is None) == (b.annotations.get(DRIFT) is None)
        if a.annotations.get(DRIFT) is not None and b.annotations.get(DRIFT) is not None:
            chosen += 1
            assert (
                np.array_equal(a.annotations.get(DRIFT).numbers, b.annotations.get(DRIFT).numbers)
                and a.annotations.get(DRIFT).vector == b.annotations.get(DRIFT).vector
            )
    assert 3 <= chosen <= 13  # sample_rate 0.5 of 16 events
    # offline runs (streameval evaluate, compare, backfills) do not embed: nothing would record it
    assert all(
        o is not None and o.annotations.get(DRIFT) is None
        for o in Pipeline(suites).process_sync_batch(batch, 0.0)
    )


def test_drift_reuses_the_semantic_evaluators_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a suite with semantic_similarity, the outputs it embedded are not embedded again for drift."""
    need_extra()
    from streameval.config import parse_config_text
    from streameval.embedding import encoder
    from streameval.envelope import Source
    from streameval.pipeline import Pipeline

    def suite(evaluators: list[dict[str, object]]) -> Pipeline:
        text = yaml.safe_dump(
            {
                "suites": [{"name": "qa", "default": True, "evaluators": evaluators}],
                "windowing": {"embedding_drift": {"window": 60}},
            }
        )
        return _drift_pipeline(parse_config_text(text)[1])

    batch = [
        (orjson.dumps({"id": f"e-{i}", "model": "m", "output": f"answer {i % 5}", "expected": "x"}), Source())
        for i in range(10)
    ]
    calls: list[int] = []
    enc = encoder()
    exact = enc.encode_exact

    def counting(texts: list[str], **kw: object) -> np.ndarray:
        calls.append(len(texts))
        return exact(texts)

    monkeypatch.setattr(enc, "encode_exact", counting)
    with_semantic = suite([{"evaluator": "semantic_similarity"}]).process_sync_batch(batch, 0.0)
    assert calls == [6]  # the 5 outputs and the target, once, by the evaluator; drift found them all
    calls.clear()
    alone = suite([{"evaluator": "similarity"}]).process_sync_batch(batch, 0.0)
    assert calls == [5]
    for a, b in zip(with_semantic, alone, strict=True):
        assert (
            a is not None
            and b is not None
            and a.annotations.get(DRIFT) is not None
            and b.annotations.get(DRIFT) is not None
        )
        assert np.array_equal(a.annotations.get(DRIFT).numbers, b.annotations.get(DRIFT).numbers)


def test_the_centroid_distance_alerts_only_when_given_a_threshold() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal(DIM), rng.standard_normal(DIM)
    for threshold, expected in ((None, ()), (0.2, ("centroid_distance",))):
        cfg = _cfg(reference_events=40, min_events=10, mmd_threshold=100.0, centroid_threshold=threshold)
        drift = Drift(cfg)
        for w in range(2):
            drift.fold(w, _sums([_unit(rng, a, 1.0) for _ in range(20)], cfg, f"w{w}"))
        verdict = drift.fold(2, _sums([_unit(rng, b, 1.0) for _ in range(20)], cfg, "moved"))
        assert verdict is not None and verdict.centroid_distance > 0.2 and verdict.fired == expected


def test_the_numbers_do_not_depend_on_the_batching() -> None:
    """Each worker batches events its own way: an event's drift numbers are the same in any batch."""
    need_extra()
    from streameval.config import parse_config_text
    from streameval.envelope import Source

    text = yaml.safe_dump(
        {
            "suites": [{"name": "qa", "default": True, "evaluators": [{"evaluator": "semantic_similarity"}]}],
            "windowing": {"embedding_drift": {"window": 60}},
        }
    )
    rng = random.Random(2)
    words = "the rain in Spain falls mainly on plain while code runs fast and slow".split()
    raws = [
        (
            orjson.dumps(
                {
                    "id": f"e-{i}",
                    "model": "m",
                    "output": " ".join(rng.choices(words, k=rng.randint(1, 30))),
                    "expected": " ".join(rng.choices(words, k=rng.randint(1, 30))),
                }
            ),
            Source(),
        )
        for i in range(16)
    ]
    seen: list[list[bytes]] = []
    for size in (16, 5, 1):
        pipeline = _drift_pipeline(parse_config_text(text)[1])
        numbers: list[bytes] = []
        for first in range(0, len(raws), size):
            for outcome in pipeline.process_sync_batch(raws[first : first + size], 0.0):
                assert (
                    outcome is not None
                    and outcome.annotations.get(DRIFT) is not None
                    and outcome.result is not None
                )
                [semantic] = [e for e in outcome.result.evaluators if e.name == "semantic_similarity"]
                numbers.append(
                    outcome.annotations.get(DRIFT).numbers.tobytes() + semantic.model_dump_json().encode()
                )
        seen.append(numbers)
    assert seen[0] == seen[1] == seen[2]  # the drift numbers, and semantic_similarity's results too
