"""The figures of joined labels: agreement with people, calibration, the offline join, the lowest kappa."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...agreement import IsotonicMap, agreement, isotonic
from ...keyspace import Keys
from ...models import (
    Feedback,
    GradedResult,
    HumanAgreement,
)
from ._records import Layout, Row, label_row, latest, layout_id, pack_verdict, verdict_values


def human_agreement(rows: Sequence[Row], layouts: dict[bytes, Layout]) -> HumanAgreement | None:
    """Every figure of a set of rows (the last per event × annotator counts); None without rows."""
    rows = [r for r in latest(rows) if r.layout in layouts]
    if not rows:
        return None
    columns: dict[str, tuple[list[float], list[float], list[bool], list[bool]]] = {}

    def add(name: str, value: float, passed: bool, human: float, human_pass: bool) -> None:
        col = columns.setdefault(name, ([], [], [], []))
        col[0].append(value)
        col[1].append(human)
        col[2].append(passed)
        col[3].append(human_pass)

    by_event: dict[bytes, list[tuple[bytes, float, bool]]] = defaultdict(list)
    for row in rows:
        layout = layouts[row.layout]
        human, human_pass = _human(row, layout.threshold)
        by_event[row.event].append((row.annotator, human, human_pass))
        add("result", row.score, row.passed, human, human_pass)
        for name, value in zip(layout.names, row.values, strict=False):
            if value is not None:
                add(name, value, value >= layout.threshold, human, human_pass)
    a: list[float] = []
    b: list[float] = []
    ap: list[bool] = []
    bp: list[bool] = []
    for labels in by_event.values():
        labels.sort()
        for i in range(len(labels)):
            for j in range(i + 1, len(labels)):
                a.append(labels[i][1])
                b.append(labels[j][1])
                ap.append(labels[i][2])
                bp.append(labels[j][2])
    return HumanAgreement(
        labels=len(rows),
        events=len(by_event),
        raters={name: agreement(*col) for name, col in sorted(columns.items())},
        annotators=agreement(a, b, ap, bp) if a else None,
    )


def _human(row: Row, threshold: float) -> tuple[float, bool]:
    """The human value on 0-1 (a bare pass/fail counts as 1/0) and the human pass/fail (from the score
    against the suite threshold when the label has no passed)."""
    if row.human_score is not None:
        value = row.human_score
        return value, row.human_passed if row.human_passed is not None else value >= threshold
    return float(bool(row.human_passed)), bool(row.human_passed)


@dataclass(frozen=True)
class Calibration:
    """Per judge: the isotonic map judge score -> human score, and a suggested weight (from agreement)."""

    maps: dict[str, IsotonicMap]
    weights: dict[str, float]
    n: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {
            name: {
                "n": self.n[name],
                "weight": self.weights.get(name),
                "map": [[x, y] for x, y in zip(self.maps[name].xs, self.maps[name].ys, strict=True)],
            }
            for name in sorted(self.maps)
        }


def calibration(rows: Sequence[Row], layouts: dict[bytes, Layout], *, min_n: int = 10) -> Calibration:
    """Isotonic maps per judge (at least ``min_n`` labels) and weights proportional to each judge's
    Krippendorff's α with people (negative α: weight 0), summing to 1 over the judges with an α."""
    rows = [r for r in latest(rows) if r.layout in layouts]
    pairs: dict[str, tuple[list[float], list[float]]] = {}
    for row in rows:
        layout = layouts[row.layout]
        human, _ = _human(row, layout.threshold)
        for name, value in zip(layout.names, row.values, strict=False):
            if value is not None and name.startswith("judge:"):
                col = pairs.setdefault(name[6:], ([], []))
                col[0].append(value)
                col[1].append(human)
    maps, alphas, ns = {}, {}, {}
    for judge, (x, y) in pairs.items():
        ns[judge] = len(x)
        if len(x) < min_n:
            continue
        maps[judge] = isotonic(x, y)
        alpha = agreement(x, y, [], []).alpha
        if alpha is not None:
            alphas[judge] = max(0.0, alpha)
    total = math.fsum(alphas.values())
    weights = {j: a / total for j, a in alphas.items()} if total > 0 else {}
    return Calibration(maps, weights, {j: ns[j] for j in maps})


def join_in_memory(
    results: Sequence[GradedResult], labels: Sequence[Feedback]
) -> tuple[dict[str, list[Row]], dict[bytes, Layout], list[tuple[Feedback, str]]]:
    """The join of ``streameval evaluate --labels``: the same rows and layouts as on the stream, without
    Redis. Returns rows per pair, the layouts and the labels that found no result (with why)."""
    verdicts: dict[str, tuple[Layout, bytes]] = {}
    layouts: dict[bytes, Layout] = {}
    for result in results:  # the last result of an id wins, as the kept verdicts on the stream
        pair = Keys.pair_id(result.model, result.suite)
        names, values = verdict_values(result)
        layout = layout_id(pair, names, result.threshold)
        layouts[layout] = Layout(pair, names, result.threshold)
        verdicts[result.id] = (layouts[layout], pack_verdict(layout, result, values))
    rows: dict[str, list[Row]] = defaultdict(list)
    unmatched: list[tuple[Feedback, str]] = []
    for label in labels:
        verdict = verdicts.get(label.id)
        if verdict is None:
            unmatched.append((label, f"no result for event id {label.id!r}"))
            continue
        model, suite = Keys.split_pair(verdict[0].pair)[:2]
        if (label.model is not None and label.model != model) or (
            label.suite is not None and label.suite != suite
        ):
            unmatched.append(
                (label, f"event id {label.id!r} was evaluated for model {model!r}, suite {suite!r}")
            )
            continue
        rows[verdict[0].pair].append(label_row(label, verdict))
    return dict(rows), layouts, unmatched
