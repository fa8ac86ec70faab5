"""Change detection on score streams: a two-sided CUSUM with an EWMA, folded window by window.

One detector per model × suite × *series*: the overall score, each evaluator's score, each judge's
score. It compares the stream with a *reference* mean and standard deviation and fires when the
cumulative standardised excess passes ``h``. The reference (re-learnt after each alarm):

* ``pinned``: detection starts after ``reference_events`` events; later windows keep refining the
  reference until it holds ``reference_cap`` × as many, then it is fixed. Why refine: a mean estimated
  from 1000 pass/fail scores is off by ~0.03 σ, a good part of k, and that bias alone would multiply
  the false alarms (measured: docs/drift.md).
* ``trailing``: the most recent windows holding at least ``reference_events`` events.

A window joins the reference only once the CUSUM run it is part of has died out (both sides back at
0); windows of a run that ends in an alarm never do. So a shift under way does not leak into the
reference, and no window is left out for looking unlike the reference (a selection that would keep
an early error of the reference for ever).

The statistic:

    C⁺ ← max(0, C⁺ + (S − n·μ₀)/σ₀ − n·k)      C⁻ ← max(0, C⁻ − (S − n·μ₀)/σ₀ − n·k)

where a closed window brings n events with score sum S, and k = shift / (2σ₀) is half the smallest
shift worth catching (``shift``, in score units), in reference standard deviations. ``h`` follows from
the average run length wanted between false alarms (``arl``, in events) by Siegmund's approximation
for a one-sided CUSUM, ARL ≈ (e^{2kb} − 2kb − 1) / (2k²) with b = h + 1.166, each side given twice the
ARL. The stream is folded per window, not per event, so the statistic is only looked at when a window
closes and can only restart from 0 at a window boundary: that makes alarms rarer than the event-level
formula says (docs/drift.md has the false-alarm rate and the delay measured by a seeded simulation).

Why per window: a window's (n, Σx, Σx²) is exactly what every worker's record script adds into the
window hash, whatever worker or batch an event went through, so the detector's input — the sequence
of those sums in window order — is the same with one worker or ten; :class:`~streameval.windows.WindowCloser`
folds it under a lease, in window order, after every earlier window is published. Event order inside a
window is not known across workers, and the detector never needs it.

The EWMA (λ per event; a window of n events with mean m moves it as n events of value m would) is the
smoothed level reported with an alarm. The change point is the start of the window where the alarming
side last left 0; the shift is the mean of the events since then minus the reference mean.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Change", "Detector", "ScoreShiftConfig", "SeriesState", "cusum_h", "fold", "window_series"]

Series = Literal["overall", "evaluators", "judges"]


class ScoreShiftConfig(BaseModel):
    """``windowing: {score_shift: {...}}`` in the suite file: change detection on every score series."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window: int = Field(gt=0, description="window size folded, seconds; one of STREAMEVAL_WINDOWS")
    shift: float = Field(
        default=0.1, gt=0.0, le=1.0, description="smallest mean shift worth catching, in score units (sets k)"
    )
    arl: float = Field(
        default=1_000_000,
        ge=100,
        description="average run length, in events, between false alarms on a stable stream (sets h)",
    )
    reference: Literal["pinned", "trailing"] = Field(
        default="pinned",
        description="pinned: the first reference_events events; trailing: the latest in-control ones",
    )
    reference_events: int = Field(
        default=1000, ge=10, description="events the reference needs before detecting"
    )
    reference_cap: float = Field(
        default=10.0,
        ge=1.0,
        description="pinned: in-control events refine the reference up to this many times reference_events",
    )
    min_std: float = Field(default=0.02, gt=0.0, description="floor of the reference standard deviation")
    ewma_lambda: float = Field(default=0.05, gt=0.0, le=1.0, description="EWMA weight of one event")
    series: list[Series] = Field(
        default=["overall", "evaluators", "judges"],
        min_length=1,
        description="which scores: the overall score, each evaluator's, each judge's",
    )
    severity: Literal["info", "warning", "critical"] = "warning"
    resolve_after_empty: int | None = Field(
        default=3,  # the alert rules' default (streameval.alerts.EMPTY_WINDOWS)
        ge=1,
        description="with notify: a firing shift alert resolves (no_events) once this many windows passed "
        "without an event of its model x suite; null: never",
    )


@lru_cache(maxsize=4096)
def cusum_h(k: float, arl: float) -> float:
    """The two-sided CUSUM threshold h whose in-control ARL (events, Siegmund) is ``arl``."""
    one_sided = 2.0 * arl  # two sides: 1/ARL = 1/ARL⁺ + 1/ARL⁻

    def run_length(h: float) -> float:
        b = h + 1.166
        x = 2.0 * k * b
        return (math.expm1(x) - x) / (2.0 * k * k)

    lo, hi = 0.0, 1.0
    while run_length(hi) < one_sided:
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if run_length(mid) < one_sided else (lo, mid)
    return hi


#: windows of one CUSUM run held back from the reference at most (then the oldest is learnt)
_MAX_PENDING = 200


@dataclass
class SeriesState:
    """One series' detector state (JSON-serialisable; kept in Redis between window closes)."""

    ref_n: float = 0.0
    ref_s: float = 0.0
    ref_ss: float = 0.0
    trail: list[list[float]] = field(default_factory=list)  # trailing reference: [n, s, ss] per window
    pending: list[list[float]] = field(default_factory=list)  # windows of the current run, not yet learnt
    up: float = 0.0
    down: float = 0.0
    up_since: int | None = None  # window start where C⁺ last left 0
    down_since: int | None = None
    up_run: list[float] = field(default_factory=lambda: [0.0, 0.0])  # [n, s] since up_since
    down_run: list[float] = field(default_factory=lambda: [0.0, 0.0])
    ewma: float | None = None
    events: float = 0.0


@dataclass(frozen=True)
class Change:
    """A detected shift of one series."""

    series: str
    direction: Literal["up", "down"]
    statistic: float
    threshold: float
    change_start: int  # window start (epoch seconds) of the estimated change point
    events_since: int
    shift: float  # mean since the change point minus the reference mean
    reference_mean: float
    reference_std: float
    current_mean: float
    ewma: float


def _reference(state: SeriesState, cfg: ScoreShiftConfig) -> tuple[float, float] | None:
    if cfg.reference == "pinned":
        n, s, ss = state.ref_n, state.ref_s, state.ref_ss
    else:
        n = sum(w[0] for w in state.trail)
        s = sum(w[1] for w in state.trail)
        ss = sum(w[2] for w in state.trail)
    if n < cfg.reference_events:
        return None
    mean = s / n
    var = max(0.0, ss / n - mean * mean) * n / max(n - 1.0, 1.0)
    return mean, max(math.sqrt(var), cfg.min_std)


def _learn(state: SeriesState, cfg: ScoreShiftConfig, n: float, s: float, ss: float) -> None:
    if cfg.reference == "pinned":
        if state.ref_n < cfg.reference_events * cfg.reference_cap:
            state.ref_n, state.ref_s, state.ref_ss = state.ref_n + n, state.ref_s + s, state.ref_ss + ss
        return
    state.trail.append([n, s, ss])
    while len(state.trail) > 1 and sum(w[0] for w in state.trail[1:]) >= cfg.reference_events:
        state.trail.pop(0)


def fold(
    state: SeriesState,
    cfg: ScoreShiftConfig,
    series: str,
    start: int,
    n: float,
    s: float,
    ss: float,
) -> Change | None:
    """Fold one closed window's (n, Σx, Σx²) of ``series`` into ``state``; the change it reveals, if any."""
    if n <= 0:
        return None
    state.events += n
    mean = s / n
    decay = (1.0 - cfg.ewma_lambda) ** n
    state.ewma = mean if state.ewma is None else decay * state.ewma + (1.0 - decay) * mean
    reference = _reference(state, cfg)
    if reference is None:
        _learn(state, cfg, n, s, ss)
        return None
    mu, sigma = reference
    k = cfg.shift / (2.0 * sigma)
    h = cusum_h(k, cfg.arl)
    z = (s - n * mu) / sigma
    if state.up == 0.0:
        state.up_since, state.up_run = start, [0.0, 0.0]
    if state.down == 0.0:
        state.down_since, state.down_run = start, [0.0, 0.0]
    state.up = max(0.0, state.up + z - n * k)
    state.down = max(0.0, state.down - z - n * k)
    state.up_run = [state.up_run[0] + n, state.up_run[1] + s]
    state.down_run = [state.down_run[0] + n, state.down_run[1] + s]
    side: Literal["up", "down"] | None = "up" if state.up > h else "down" if state.down > h else None
    if side is None:
        state.pending.append([n, s, ss])
        if (state.up == 0.0 and state.down == 0.0) or len(state.pending) > _MAX_PENDING:
            # the run died out (or is very long): its windows become reference, oldest first
            settled = state.pending if state.up == 0.0 and state.down == 0.0 else state.pending[:1]
            for window in settled:
                _learn(state, cfg, *window)
            state.pending = state.pending[len(settled) :]
        return None
    run_n, run_s = state.up_run if side == "up" else state.down_run
    since = state.up_since if side == "up" else state.down_since
    change = Change(
        series=series,
        direction=side,
        statistic=state.up if side == "up" else state.down,
        threshold=h,
        change_start=since if since is not None else start,
        events_since=int(run_n),
        shift=run_s / run_n - mu,
        reference_mean=mu,
        reference_std=sigma,
        current_mean=mean,
        ewma=state.ewma if state.ewma is not None else mean,
    )
    # re-learn the reference from the new regime: one alarm per shift, not one per window after it
    fresh = SeriesState(ewma=state.ewma, events=state.events)
    for name, value in asdict(fresh).items():
        setattr(state, name, value)
    return change


def window_series(fields: dict[str, float], chosen: Iterable[str]) -> dict[str, tuple[float, float, float]]:
    """(n, Σx, Σx²) of every series of a window hash (streameval.store's fields): ``overall``,
    ``evaluator:{name}`` (its score), ``judge:{name}`` (its 0-10 score)."""
    chosen = set(chosen)
    out: dict[str, tuple[float, float, float]] = {}
    if "overall" in chosen and fields.get("count", 0.0) > 0:
        out["overall"] = (fields["count"], fields.get("sum", 0.0), fields.get("sumsq", 0.0))
    for name, value in fields.items():
        if (
            "evaluators" in chosen
            and name.startswith("ev:")
            and name.endswith(":count")
            and ":c:" not in name
        ):
            ev = name[3:-6]
            if value > 0:
                out[f"evaluator:{ev}"] = (
                    value,
                    fields.get(f"ev:{ev}:sum", 0.0),
                    fields.get(f"ev:{ev}:sumsq", 0.0),
                )
        if "judges" in chosen and name.startswith("ev:judge_panel:c:") and name.endswith(".n"):
            judge = name[len("ev:judge_panel:c:") : -2]
            if ":" not in judge and value > 0:
                base = f"ev:judge_panel:c:{judge}."
                out[f"judge:{judge}"] = (
                    value,
                    fields.get(base + "score_sum", 0.0),
                    fields.get(base + "score_sumsq", 0.0),
                )
    return out


class Detector:
    """Every series' state of one model × suite; ``to_json``/``from_json`` for Redis."""

    def __init__(
        self, cfg: ScoreShiftConfig, states: dict[str, SeriesState] | None = None, last: int | None = None
    ) -> None:
        self.cfg = cfg
        self.states = states or {}
        self.last = last  # the last window start folded: a window is folded once, in order
        #: the series the last :meth:`fold_window` compared with a reference and found in control (no change)
        self.in_control: list[str] = []
        #: the series the last :meth:`fold_window` folded (every series with events in the window)
        self.folded: list[str] = []

    def fold_window(self, start: int, fields: dict[str, float]) -> list[Change]:
        self.in_control, self.folded = [], []
        if self.last is not None and start <= self.last:
            return []
        self.last = start
        changes = []
        for series, (n, s, ss) in sorted(window_series(fields, self.cfg.series).items()):
            state = self.states.setdefault(series, SeriesState())
            compared = _reference(state, self.cfg) is not None
            change = fold(state, self.cfg, series, start, n, s, ss)
            self.folded.append(series)
            if change is not None:
                changes.append(change)
            elif compared:
                self.in_control.append(series)
        return changes

    def to_json(self) -> dict[str, Any]:
        return {"last": self.last, "states": {k: asdict(v) for k, v in self.states.items()}}

    @classmethod
    def from_json(cls, cfg: ScoreShiftConfig, doc: dict[str, Any] | None) -> Detector:
        if not doc:
            return cls(cfg)
        return cls(cfg, {k: SeriesState(**v) for k, v in doc.get("states", {}).items()}, doc.get("last"))
