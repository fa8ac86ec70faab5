"""Per model × suite summaries (count, mean, pass rate, grades), per-judge tallies (calls, errors,
tokens, cost) and their terminal rendering."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from .judges import JudgeTally, tally_verdict, token_cost
from .models import GradedResult, HumanAgreement

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
    #: per judge name: the verdicts of the results added (what each judge cost and how often it failed)
    judges: dict[str, JudgeTally] = field(default_factory=dict)
    #: per judge name: (input, output) price per million tokens, for the judges that have prices
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)

    def add(self, result: GradedResult) -> None:
        key = (result.model, result.suite)
        pair = self.pairs.get(key) or self.pairs.setdefault(key, PairSummary(*key))
        pair.count += 1
        pair.total += result.score
        pair.passes += int(result.passed)
        pair.grades[result.grade] += 1
        block = result.judge
        if block is not None:
            for verdict in [*block.judges, *(v for f in block.fallbacks for v in f.judges)]:
                tally = self.judges.get(verdict.name) or self.judges.setdefault(verdict.name, JudgeTally())
                tally_verdict(tally, verdict)

    def judge_cost(self, name: str) -> float | None:
        """Money spent on ``name``'s calls (its prices × tokens of calls made), or None without prices."""
        price = self.prices.get(name)
        tally = self.judges.get(name)
        if price is None or tally is None:
            return None
        return token_cost(price, tally.prompt_tokens, tally.completion_tokens)

    def judge_error_rates(self) -> dict[str, float]:
        """Per judge: verdicts in error ÷ verdicts asked (answered or in error; budget skips left out)."""
        return {
            name: t.error_count / (t.error_count + t.answered)
            for name, t in self.judges.items()
            if t.error_count + t.answered
        }

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
    def from_fields(
        cls, rows: Iterable[tuple[str, str, Mapping[str, float]]], dead_letters: Mapping[str, int]
    ) -> Summary:
        """Build from Redis aggregate hashes (``count sum passes grade:*`` fields)."""
        summary = cls(dead_letters=Counter(dead_letters))
        for model, suite, fields in rows:
            pair = PairSummary(
                model,
                suite,
                int(fields.get("count", 0)),
                fields.get("sum", 0.0),
                int(fields.get("passes", 0)),
            )
            pair.grades = Counter({k[6:]: int(v) for k, v in fields.items() if k.startswith("grade:")})
            summary.pairs[(model, suite)] = pair
        return summary


def render_summary(summary: Summary, console: Console, *, title: str = "streameval summary") -> None:
    table = Table(title=title, title_justify="left")
    for name, justify in [
        ("model", "left"),
        ("suite", "left"),
        ("events", "right"),
        ("mean score", "right"),
        ("pass rate", "right"),
        ("grades", "left"),
    ]:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    by_model: dict[str, list[PairSummary]] = defaultdict(list)
    for pair in summary.pairs.values():
        by_model[pair.model].append(pair)
    for model in sorted(by_model):
        for pair in sorted(by_model[model], key=lambda p: p.suite):
            grades = ", ".join(f"{g} {n}" for g, n in pair.grades.most_common())
            table.add_row(
                pair.model, pair.suite, str(pair.count), f"{pair.mean:.3f}", f"{pair.pass_rate:.1%}", grades
            )
    table.add_section()
    table.add_row("all", "", str(summary.count), f"{summary.mean:.3f}", f"{summary.pass_rate:.1%}", "")
    console.print(table)
    total_dead = sum(summary.dead_letters.values())
    kinds = ", ".join(f"{kind} {n}" for kind, n in summary.dead_letters.most_common())
    console.print(f"dead letters: {total_dead}" + (f" ({kinds})" if kinds else ""))
    if summary.judges:
        render_judges(summary, console)


def render_judges(summary: Summary, console: Console) -> None:
    """The judge table: calls, cache hits, errors by kind, tokens, cost; and a line per failing judge."""
    table = Table(title="judges", title_justify="left")
    for name, justify in [
        ("judge", "left"),
        ("calls", "right"),
        ("cache hits", "right"),
        ("answered", "right"),
        ("errors", "right"),
        ("error rate", "right"),
        ("tokens in", "right"),
        ("tokens out", "right"),
        ("cost", "right"),
        ("errors by kind", "left"),
    ]:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    rates = summary.judge_error_rates()
    for name in sorted(summary.judges):
        t = summary.judges[name]
        kinds = ", ".join(f"{kind} {n}" for kind, n in t.errors.most_common())
        spent = summary.judge_cost(name)
        cost = "-" if spent is None else f"{spent:.4f}"
        table.add_row(
            name,
            str(t.calls),
            str(t.cache_hits),
            str(t.answered),
            str(t.error_count),
            f"{rates.get(name, 0.0):.1%}",
            str(t.prompt_tokens),
            str(t.completion_tokens),
            cost,
            kinds,
        )
    console.print(table)
    for name in sorted(summary.judges):
        t = summary.judges[name]
        if t.error_count and not t.answered:
            console.print(f"[bold red]judge {name} never answered[/]: {t.last_error}", highlight=False)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render_agreement(
    figures: Mapping[tuple[str, str], HumanAgreement | None],
    console: Console,
    *,
    unmatched: int = 0,
    title: str = "agreement with people",
) -> None:
    """The agreement table: per model × suite and rater, n, Cohen's kappa (95 % CI), Krippendorff's alpha,
    Pearson, Spearman, MAE and bias; then people among themselves (docs/feedback.md)."""
    table = Table(title=title, title_justify="left")
    for name, justify in [
        ("model", "left"),
        ("suite", "left"),
        ("rater", "left"),
        ("n", "right"),
        ("kappa", "right"),
        ("kappa 95% CI", "right"),
        ("alpha", "right"),
        ("pearson", "right"),
        ("spearman", "right"),
        ("MAE", "right"),
        ("bias", "right"),
    ]:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for (model, suite), human in sorted(figures.items()):
        if human is None:
            continue
        rows = sorted(human.raters.items())
        if human.annotators is not None:
            rows.append(("(annotators)", human.annotators))
        for rater, a in rows:
            ci = "-" if a.kappa_ci_low is None else f"[{a.kappa_ci_low:.2f}, {a.kappa_ci_high:.2f}]"
            table.add_row(
                model,
                suite,
                rater,
                str(a.n),
                _fmt(a.kappa),
                ci,
                _fmt(a.alpha),
                _fmt(a.pearson),
                _fmt(a.spearman),
                _fmt(a.mae),
                _fmt(a.bias, 4),
            )
        table.add_section()
    console.print(table)
    labels = sum(h.labels for h in figures.values() if h is not None)
    console.print(f"labels joined: {labels}; unmatched: {unmatched}")
