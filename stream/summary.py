"""Per model × suite summaries (count, mean, pass rate, grades) and their terminal rendering."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from .models import GradedResult

__all__ = ["PairSummary", "Summary", "render_summary"]


@dataclass
class PairSummary:
    model: str
    suite: str
    count: int = 0
    total: float = 0.0
    passes: int = 0
    grades: Counter[str] = field(default_factory=Counter)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    @property
    def pass_rate(self) -> float:
        return self.passes / self.count if self.count else 0.0


@dataclass
class Summary:
    pairs: dict[tuple[str, str], PairSummary] = field(default_factory=dict)
    dead_letters: Counter[str] = field(default_factory=Counter)

    def add(self, result: GradedResult) -> None:
        key = (result.model, result.suite)
        pair = self.pairs.get(key) or self.pairs.setdefault(key, PairSummary(*key))
        pair.count += 1
        pair.total += result.score
        pair.passes += int(result.passed)
        pair.grades[result.grade] += 1

    @property
    def count(self) -> int:
        return sum(p.count for p in self.pairs.values())

    @property
    def mean(self) -> float:
        count = self.count
        return sum(p.total for p in self.pairs.values()) / count if count else 0.0

    @property
    def pass_rate(self) -> float:
        count = self.count
        return sum(p.passes for p in self.pairs.values()) / count if count else 0.0

    @classmethod
    def from_fields(cls, rows: Iterable[tuple[str, str, Mapping[str, float]]], dead_letters: Mapping[str, int]) -> Summary:
        """Build from Redis aggregate hashes (``count sum passes grade:*`` fields)."""
        summary = cls(dead_letters=Counter(dead_letters))
        for model, suite, fields in rows:
            pair = PairSummary(model, suite, int(fields.get("count", 0)), fields.get("sum", 0.0), int(fields.get("passes", 0)))
            pair.grades = Counter({k[6:]: int(v) for k, v in fields.items() if k.startswith("grade:")})
            summary.pairs[(model, suite)] = pair
        return summary


def render_summary(summary: Summary, console: Console, *, title: str = "streameval summary") -> None:
    table = Table(title=title, title_justify="left")
    for name, justify in [("model", "left"), ("suite", "left"), ("events", "right"), ("mean score", "right"),
                          ("pass rate", "right"), ("grades", "left")]:  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    by_model: dict[str, list[PairSummary]] = defaultdict(list)
    for pair in summary.pairs.values():
        by_model[pair.model].append(pair)
    for model in sorted(by_model):
        for pair in sorted(by_model[model], key=lambda p: p.suite):
            grades = ", ".join(f"{g} {n}" for g, n in pair.grades.most_common())
            table.add_row(pair.model, pair.suite, str(pair.count), f"{pair.mean:.3f}", f"{pair.pass_rate:.1%}", grades)
    table.add_section()
    table.add_row("all", "", str(summary.count), f"{summary.mean:.3f}", f"{summary.pass_rate:.1%}", "")
    console.print(table)
    total_dead = sum(summary.dead_letters.values())
    kinds = ", ".join(f"{kind} {n}" for kind, n in summary.dead_letters.most_common())
    console.print(f"dead letters: {total_dead}" + (f" ({kinds})" if kinds else ""))
