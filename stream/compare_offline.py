"""``streameval compare``: two suite versions side by side, offline (docs/versions.md).

Two ways in:

* two suite files and one JSONL of request events: each file's suites evaluate every event (the same
  pipeline as ``streameval evaluate``), and suites of the same name are compared;
* two result files (JSONL of graded results, e.g. two ``streameval evaluate`` outputs, or results
  tailed from the topic): results are joined by id within each model × suite.

Sessions count like suites: with suite files, each file's sessions of the same name judge the file's
conversations (closed at its end, as ``streameval evaluate`` closes them); a result file may hold session
results (``streameval evaluate --sessions``, or tailed from the sessions topic), joined by their id.

Either way :func:`streameval.features.compare.compare` reports, per model × suite, version b against version a;
with suite files and a ``dimension`` of their ``segments:`` (docs/segments.md), also per value of that slice
dimension (:func:`streameval.features.compare.compare_slices`), from the events' metadata.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .config import load_config
from .errors import ConfigError
from .feature import SLICES
from .features.compare import Compact, compact, compare, compare_slices
from .features.sessions.closer import graded_of
from .features.sessions.local import LocalSessions
from .features.sessions.turns import turns_in
from .features.setup import annotators
from .models import GradedResult, SessionResult, parse_time
from .offline import iter_lines
from .pipeline import Pipeline

__all__ = ["compare_result_files", "compare_results", "compare_suite_files"]

Key = tuple[str, str]  # model, suite


def _compact(result: GradedResult) -> Compact:
    return compact(
        parse_time(result.event_time),
        result.score,
        result.passed,
        [(e.score, e.passed) for e in result.evaluators],
    )


def compare_results(
    a: Iterable[GradedResult],
    b: Iterable[GradedResult],
    *,
    dimension: str | None = None,
    values: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """One comparison per model × suite present on either side (first result of an id kept); with
    ``dimension`` and ``values`` (an event id -> its value in that slice dimension), each has ``slices``."""
    sides: list[dict[Key, dict[str, Compact]]] = [defaultdict(dict), defaultdict(dict)]
    names: list[dict[Key, list[str]]] = [{}, {}]
    versions: list[dict[Key, str]] = [{}, {}]
    for side, results in enumerate((a, b)):
        for result in results:
            key = (result.model, result.suite)
            sides[side][key].setdefault(result.id, _compact(result))
            evaluators = [e.name for e in result.evaluators]
            if len(evaluators) > len(names[side].get(key, [])):
                names[side][key] = evaluators
            versions[side].setdefault(key, result.suite_version or "")
    out = []
    for key in sorted(set(sides[0]) | set(sides[1])):
        labels = (versions[0].get(key, ""), versions[1].get(key, ""))
        report = compare(
            sides[0].get(key, {}),
            sides[1].get(key, {}),
            names_a=names[0].get(key, []),
            names_b=names[1].get(key, []),
            labels=labels,
        )
        if dimension is not None:
            report["dimension"] = dimension
            report["slices"] = compare_slices(
                sides[0].get(key, {}),
                sides[1].get(key, {}),
                values or {},
                names_a=names[0].get(key, []),
                names_b=names[1].get(key, []),
                labels=labels,
            )
        out.append({"model": key[0], "suite": key[1], **report})
    return out


def read_results(path: Path) -> list[GradedResult]:
    """The graded results of a JSONL file. Raises :class:`ConfigError` naming the file and line of a bad one."""
    out = []
    try:
        with path.open("rb") as handle:
            for number, raw in iter_lines(handle):
                try:
                    out.append(GradedResult.model_validate_json(raw))
                except ValidationError as exc:
                    try:  # a session result: compared as the graded form it was recorded as
                        out.append(graded_of(SessionResult.model_validate_json(raw)))
                    except ValidationError:
                        raise ConfigError(
                            f"{path}:{number}: not a graded result: {exc.errors()[0]['msg']}"
                        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    return out


def compare_result_files(a: Path, b: Path) -> list[dict[str, Any]]:
    return compare_results(read_results(a), read_results(b))


async def _evaluate(
    pipeline: Pipeline, lines: Sequence[bytes], concurrency: int, slices: dict[str, tuple[str, ...]]
) -> list[GradedResult]:
    """Every event's result, then every session's graded form (judged at the end, as offline); each
    event's slice values (in the order of the suite file's dimensions) go to ``slices`` by result id."""
    sessions = LocalSessions(pipeline.suites.sessions) if pipeline.suites.sessions else None
    await pipeline.start()
    try:
        out: list[GradedResult] = []
        for i in range(0, len(lines), concurrency):
            outcomes = await asyncio.gather(*(pipeline.process(raw) for raw in lines[i : i + concurrency]))
            out += [o.result for o in outcomes if o.result is not None]
            for o in outcomes:
                noted = o.annotations.get(SLICES) if o.result is not None else None
                if o.result is not None and isinstance(noted, tuple):
                    slices.setdefault(o.result.id, noted)
            if sessions is not None:
                for outcome in outcomes:
                    if outcome.dead_letter is None:
                        sessions.add(turns_in(outcome.annotations))
        if sessions is not None:
            out += [graded for graded, _ in await sessions.close_all(pipeline)]
        return out
    finally:
        await pipeline.close()


def compare_suite_files(
    a: Path, b: Path, events: Path, *, concurrency: int = 64, dimension: str | None = None
) -> list[dict[str, Any]]:
    """Evaluate ``events`` with the suites of ``a`` and of ``b``; compare suites of the same name (with
    ``dimension``, a slice dimension of either file's ``segments:``, per value of it too)."""
    _, suites_a = load_config(a)
    _, suites_b = load_config(b)
    common = {s.name for s in suites_a.scoring} & {s.name for s in suites_b.scoring}  # suites and sessions
    if not common:
        raise ConfigError(f"{a} and {b} have no suite name in common: nothing to compare")
    positions = [[d.name for d in s.segments] for s in (suites_a, suites_b)]
    if dimension is not None and all(dimension not in p for p in positions):
        raise ConfigError(
            f"{a} and {b}: neither file's segments: has a dimension {dimension!r} (docs/segments.md): "
            "nothing to split the comparison by"
        )
    try:
        with events.open("rb") as handle:
            lines = [raw for _, raw in iter_lines(handle)]
    except OSError as exc:
        raise ConfigError(f"{events}: cannot read: {exc.strerror}") from None

    noted: list[dict[str, tuple[str, ...]]] = [{}, {}]

    async def both() -> tuple[list[GradedResult], list[GradedResult]]:
        return (
            await _evaluate(
                Pipeline(suites_a, annotators=annotators(suites_a)), lines, concurrency, noted[0]
            ),
            await _evaluate(
                Pipeline(suites_b, annotators=annotators(suites_b)), lines, concurrency, noted[1]
            ),
        )

    results_a, results_b = asyncio.run(both())
    values: dict[str, str] = {}
    if dimension is not None:  # an event's value: as file a's segments: read it, else as file b's
        for side in (1, 0):
            if dimension in positions[side]:
                at = positions[side].index(dimension)
                values.update((i, v[at]) for i, v in noted[side].items() if len(v) > at)
    return compare_results(
        [r for r in results_a if r.suite in common],
        [r for r in results_b if r.suite in common],
        dimension=dimension,
        values=values,
    )
