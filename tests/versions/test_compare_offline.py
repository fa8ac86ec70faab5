"""``streameval compare`` offline: two suite files on one JSONL, and two result files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from streameval.cli import main
from streameval.config import load_config
from streameval.models import GradedResult
from streameval.offline import evaluate_file
from streameval.pipeline import Pipeline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SOFTER = """
suites:
  - name: qa
    match: {category: [qa_simple, factual_accuracy]}
    threshold: 0.5
    evaluators:
      - {evaluator: similarity, params: {algorithm: levenshtein, threshold: 0.8}, weight: 1}
"""


def results_of(config: Path, out: Path) -> list[GradedResult]:
    _, suites = load_config(config)
    asyncio.run(evaluate_file(Pipeline(suites), EXAMPLES / "events.jsonl", out, out.with_suffix(".dl")))
    return [GradedResult.model_validate_json(line) for line in out.read_bytes().splitlines()]


def flips(a: list[GradedResult], b: list[GradedResult]) -> dict[tuple[str, str], tuple[set[str], set[str]]]:
    by_a = {(r.model, r.suite, r.id): r for r in a}
    out: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
    for r in b:
        first = by_a.get((r.model, r.suite, r.id))
        if first is None:
            continue
        to_fail, to_pass = out.setdefault((r.model, r.suite), (set(), set()))
        if first.passed and not r.passed:
            to_fail.add(r.id)
        if r.passed and not first.passed:
            to_pass.add(r.id)
    return out


@pytest.mark.parametrize("mode", ["suites", "results"])
def test_offline_compare_flips_equal_the_results(
    mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    softer = tmp_path / "softer.yaml"
    softer.write_text(SOFTER)
    a = results_of(EXAMPLES / "suites.yaml", tmp_path / "a.jsonl")
    b = results_of(softer, tmp_path / "b.jsonl")
    if mode == "suites":
        argv = [
            "compare",
            str(EXAMPLES / "suites.yaml"),
            str(softer),
            "--input",
            str(EXAMPLES / "events.jsonl"),
            "--json",
        ]
    else:
        argv = ["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--json"]
    assert main(argv) == 0
    reports = orjson.loads(capsys.readouterr().out)
    expected = flips(a, b)
    qa = [r for r in reports if r["suite"] == "qa"]
    assert qa and all(r["n"] > 0 for r in qa)
    for r in qa:
        to_fail, to_pass = expected[(r["model"], r["suite"])]
        assert r["pass_to_fail"] == len(to_fail) and set(r["pass_to_fail_ids"]) <= to_fail
        assert r["fail_to_pass"] == len(to_pass) and set(r["fail_to_pass_ids"]) <= to_pass
    assert sum(r["fail_to_pass"] + r["pass_to_fail"] for r in qa) > 0
    if mode == "results":  # suites only in a: compared with nothing, said so
        others = [r for r in reports if r["suite"] != "qa"]
        assert others and all(
            r["empty"] and r["reason"] == "version b has no retained scores" for r in others
        )


def test_offline_compare_of_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    assert main(["compare", str(tmp_path / "nope.jsonl"), str(tmp_path / "nope2.jsonl")]) == 2


SESSIONS = """
suites:
  - {{name: chat, default: true, evaluators: [{{evaluator: exact_match}}]}}
sessions:
  - name: conv
    key: metadata.conversation_id
    end: metadata.last
    evaluators: [{{evaluator: turn_scores, params: {{stat: {stat}}}}}]
"""
#: per conversation, its turns' outputs: the mean and the min of their scores tell passes from fails apart
THREADS = [
    ["Paris", "Paris", "Rome"],
    ["Paris", "Paris", "Paris"],
    ["Rome", "Rome", "Paris"],
    ["Paris", "Rome"],
]


def conversations(path: Path) -> Path:
    lines = [
        orjson.dumps(
            {
                "id": f"c{c}-{i}",
                "model": "m",
                "input": f"q{i}",
                "output": output,
                "expected": "Paris",
                "timestamp": f"2026-12-01T10:00:{c:02d}.{i:03d}Z",
                "metadata": {"conversation_id": f"c{c}", "last": i == len(outputs) - 1},
            }
        )
        for c, outputs in enumerate(THREADS)
        for i, output in enumerate(outputs)
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.mark.parametrize("mode", ["suites", "results"])
def test_offline_compare_compares_sessions_like_suites(
    mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from streameval.features.setup import annotators
    from streameval.models import SessionResult

    events = conversations(tmp_path / "events.jsonl")
    files, sessions = [], []
    for stat in ("mean", "min"):
        config = tmp_path / f"{stat}.yaml"
        config.write_text(SESSIONS.format(stat=stat))
        _, suites = load_config(config)
        out = tmp_path / f"{stat}.jsonl"
        asyncio.run(
            evaluate_file(
                Pipeline(suites, annotators=annotators(suites)),
                events,
                out,
                out.with_suffix(".dl"),
                sessions_path=out.with_suffix(".sessions.jsonl"),
            )
        )
        files.append(config)
        sessions.append(out.with_suffix(".sessions.jsonl"))
    mean, least = (
        [SessionResult.model_validate_json(x) for x in f.read_bytes().splitlines()] for f in sessions
    )
    to_fail = sorted(a.id for a, b in zip(mean, least, strict=True) if a.passed and not b.passed)
    assert to_fail and mean[0].suite_version != least[0].suite_version
    if mode == "suites":
        argv = ["compare", str(files[0]), str(files[1]), "--input", str(events), "--json"]
    else:
        argv = ["compare", str(sessions[0]), str(sessions[1]), "--json"]
    assert main(argv) == 0
    [conv] = [r for r in orjson.loads(capsys.readouterr().out) if r["suite"] == "conv"]
    assert conv["n"] == len(THREADS)
    assert conv["pass_to_fail"] == len(to_fail) and sorted(conv["pass_to_fail_ids"]) == to_fail
    assert conv["fail_to_pass"] == 0


SLICED = """
suites:
  - name: qa
    default: true
    threshold: {threshold}
    evaluators: [{evaluator}]
segments:
  dimensions:
    tier: metadata.tier
"""
SLICE_EVENTS = [("Paris", "free"), ("Pariss", "free"), ("Lyon", "free"), ("Paris!", "pro"), ("Parus", "pro")]


def test_offline_compare_per_slice_equals_a_recount(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, events = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "events.jsonl"
    a.write_text(SLICED.replace("{threshold}", "0.6").replace("{evaluator}", "{evaluator: exact_match}"))
    b.write_text(
        SLICED.replace("{threshold}", "0.5").replace(
            "{evaluator}", "{evaluator: similarity, params: {algorithm: levenshtein}}"
        )
    )
    events.write_bytes(
        b"\n".join(
            orjson.dumps(
                {"id": f"e{i}", "model": "m", "output": o, "expected": "Paris", "metadata": {"tier": tier}}
            )
            for i, (o, tier) in enumerate(SLICE_EVENTS)
        )
    )
    ra = {r.id: r for r in results_of_events(a, events, tmp_path / "ra.jsonl")}
    rb = {r.id: r for r in results_of_events(b, events, tmp_path / "rb.jsonl")}
    argv = ["compare", str(a), str(b), "--input", str(events), "--json", "--dimension", "tier"]
    assert main(argv) == 0
    [report] = orjson.loads(capsys.readouterr().out)
    assert report["dimension"] == "tier"
    parts = {p["value"]: p for p in report["slices"]}
    assert set(parts) == {"free", "pro"}
    for tier, part in parts.items():
        ids = [f"e{i}" for i, (_, t) in enumerate(SLICE_EVENTS) if t == tier]
        assert part["n"] == len(ids)
        assert sorted(part["fail_to_pass_ids"]) == sorted(i for i in ids if rb[i].passed and not ra[i].passed)
        assert sorted(part["pass_to_fail_ids"]) == sorted(i for i in ids if ra[i].passed and not rb[i].passed)
        assert part["mean_diff"] == pytest.approx(
            sum(rb[i].score - ra[i].score for i in ids) / len(ids), abs=1e-6
        )
    assert sum(p["fail_to_pass"] for p in parts.values()) == report["fail_to_pass"] > 0
    # a dimension neither file slices by, or results without their events: refused, saying why
    assert main(["compare", str(a), str(b), "--input", str(events), "--dimension", "region"]) == 2
    assert "region" in capsys.readouterr().err
    ra_file, rb_file = tmp_path / "ra.jsonl", tmp_path / "rb.jsonl"
    assert main(["compare", str(ra_file), str(rb_file), "--dimension", "tier"]) == 2
    assert "--input" in capsys.readouterr().err


def results_of_events(config: Path, events: Path, out: Path) -> list[GradedResult]:
    _, suites = load_config(config)
    asyncio.run(evaluate_file(Pipeline(suites), events, out, out.with_suffix(".dl")))
    return [GradedResult.model_validate_json(line) for line in out.read_bytes().splitlines()]
