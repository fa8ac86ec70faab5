"""Embedding drift: how far a window's outputs moved, in meaning, from a reference (docs/drift.md).

Per model × suite × window (of the configured size) the record script keeps, in one Redis hash
(``P{pair}:ed:{size}:{start}``, streameval.keyspace):

* field ``s``: the **sums**, little-endian doubles that hold integers: the sampled events' count, the sum
  of their feature vectors' squared norms, the sum of their output embeddings (``dim`` components) and
  the sum of their random Fourier features (``features`` components). Each event's numbers are rounded
  to integers of 2^-20 units *before* they are added (:func:`sample`), so a sum is the same whatever
  order or split of the events among workers, batches and processes added it: integer addition is
  exact (below 2^53, i.e. for up to 2^33 events a window);
* a bounded **reservoir**: the ``reservoir`` sampled events with the lowest hash of their event id
  (bottom-k: the same set whatever the order of arrival), each with its vector quantised to int8; it
  names the alert's example events (those farthest from the reference centroid).

The comparison, per closed window, in window order (:class:`Drift`, folded by
the feature's window step, ``_step.DriftStep``, under a lease like the score-shift detector):

* **centroid cosine distance** ``1 − cos(mean v_window, mean v_reference)``;
* **MMD²** with the RBF kernel ``k(x, y) = exp(−‖x − y‖² / (2 bandwidth²))``, through ``features`` random
  Fourier features ``φ(x) = √(2/D) cos(W x + b)`` (W ~ N(0, bandwidth⁻² I), b ~ U[0, 2π), drawn from a
  fixed, hash-based sequence so every worker agrees): the unbiased estimate

      MMD²_u = (‖Sx‖² − Qx) / (n(n−1)) + (‖Sy‖² − Qy) / (m(m−1)) − 2 Sx·Sy / (nm)

  from each side's sum S of φ and sum Q of ‖φ‖² (its expectation is the kernel MMD² of the features'
  kernel: 0 on a stable stream, whatever the window's size).

The vectors must not depend on the batch an event went through: :meth:`~streameval.embedding.Encoder.encode_exact`
encodes texts with others of the same token count only (no padding), which gives a text's vector bit
for bit as when it is encoded alone.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from ...embedding import DEFAULT_MODEL, MissingExtra, find_model, require_extra

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "SCALE",
    "Drift",
    "DriftSample",
    "EmbeddingDriftConfig",
    "Verdict",
    "WindowSums",
    "event_hash",
    "merge_reservoir",
    "pack_sums",
    "sample",
    "sampled",
    "sum_samples",
    "unpack_sums",
]

#: fixed-point unit of every summed number: 2^-20 (an event's numbers are rounded to it before summing)
SCALE_BITS = 20
SCALE = float(1 << SCALE_BITS)
#: the random Fourier features' draw: a fixed key, so every worker and version draws the same W and b
_FEATURE_KEY = b"streameval embedding drift rff v1"


class EmbeddingDriftConfig(BaseModel):
    """``windowing: {embedding_drift: {...}}`` in the suite file (docs/drift.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window: int = Field(gt=0, description="window size compared, seconds; one of STREAMEVAL_WINDOWS")
    model: str = Field(
        default=DEFAULT_MODEL,
        description="the sentence model, as semantic_similarity's model param (a package's import name or a folder)",
    )
    sample_rate: float = Field(
        default=1.0, gt=0.0, le=1.0, description="share of events embedded (deterministic by event id)"
    )
    reference: Literal["pinned", "trailing"] = Field(
        default="pinned",
        description="pinned: the first reference_events events; trailing: the latest windows holding that many",
    )
    reference_events: int = Field(default=200, ge=10, description="sampled events the reference needs")
    min_events: int = Field(
        default=20,
        ge=2,
        description="a window with fewer sampled events is not compared (it may join the reference)",
    )
    centroid_threshold: float | None = Field(
        default=None,
        gt=0.0,
        le=2.0,
        description="alert also when the centroids' cosine distance is above; none: reported only "
        "(it is noisy on varied outputs: docs/drift.md)",
    )
    mmd_threshold: float = Field(default=0.05, gt=0.0, description="alert when the MMD² estimate is above")
    features: int = Field(default=256, ge=16, le=4096, description="random Fourier features (MMD)")
    bandwidth: float = Field(
        default=1.0, gt=0.0, description="RBF kernel bandwidth (unit vectors: ‖x−y‖ ≤ 2)"
    )
    reservoir: int = Field(
        default=16, ge=0, le=256, description="events kept per window (bottom-k by id hash)"
    )
    severity: Literal["info", "warning", "critical"] = "warning"
    resolve_after_empty: int | None = Field(
        default=3,  # the alert rules' default (streameval.alerts.EMPTY_WINDOWS)
        ge=1,
        description="with notify: a firing drift alert resolves (no_events) once this many windows passed "
        "without an event of its model x suite; null: never",
    )
    _folder: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _model_installed(self) -> EmbeddingDriftConfig:
        try:
            require_extra()
            self._folder = find_model(self.model)
        except MissingExtra as exc:
            raise ValueError(str(exc)) from None
        return self

    @property
    def folder(self) -> str:
        return str(self._folder)


# -- the per-event numbers ------------------------------------------------------------------------
def event_hash(event_id: str) -> int:
    """A 52-bit hash of an event id (exact in a double): the reservoir's order."""
    return int.from_bytes(hashlib.blake2b(event_id.encode(), digest_size=8).digest(), "big") >> 12


def sampled(event_id: str, rate: float) -> bool:
    """The event-id hash share (the same rule as semantic_similarity's and a judge panel's sample_rate)."""
    if rate >= 1.0:
        return True
    return int.from_bytes(hashlib.sha256(event_id.encode()).digest()[:8], "big") / 2.0**64 < rate


@lru_cache(maxsize=8)
def _features(dim: int, count: int, bandwidth: float) -> tuple[Any, Any]:
    """W (count × dim, N(0, bandwidth⁻²)) and b (U[0, 2π)) from blake2b counters and Box-Muller: the
    same numbers on every machine and numpy version."""
    import numpy as np

    def uniforms(label: bytes, n: int) -> list[float]:
        out: list[float] = []
        block = 0
        while len(out) < n:
            digest = hashlib.blake2b(label + block.to_bytes(8, "big"), key=_FEATURE_KEY).digest()
            out += [(int.from_bytes(digest[i : i + 8], "big") + 0.5) / 2.0**64 for i in range(0, 64, 8)]
            block += 1
        return out[:n]

    u = uniforms(b"w", dim * count + 1)
    normals = []
    for i in range(0, dim * count, 2):
        r = math.sqrt(-2.0 * math.log(u[i]))
        normals += [r * math.cos(2.0 * math.pi * u[i + 1]), r * math.sin(2.0 * math.pi * u[i + 1])]
    w = np.array(normals[: dim * count], dtype=np.float64).reshape(count, dim) / bandwidth
    b = np.array(uniforms(b"b", count), dtype=np.float64) * (2.0 * math.pi)
    return w, b


@dataclass(frozen=True)
class DriftSample:
    """One event's contribution: its fixed-point numbers (count 1 and the rest, :func:`sample`) and its
    reservoir entry (hash, quantised vector)."""

    numbers: Any  # numpy int64 array: [1, Q, v (dim), φ (features)] in 2^-20 units
    hash: int
    vector: bytes  # float32 scale then int8 components


def sample(vector: np.ndarray, event_id: str, cfg: EmbeddingDriftConfig) -> DriftSample:
    """An event's numbers from its output embedding (a unit float32 vector), rounded to 2^-20 units."""
    import numpy as np

    v = np.asarray(vector, dtype=np.float64)
    w, b = _features(v.shape[0], cfg.features, cfg.bandwidth)
    phi = math.sqrt(2.0 / cfg.features) * np.cos(w @ v + b)
    numbers = np.empty(2 + v.shape[0] + cfg.features, dtype=np.int64)
    numbers[0] = 1
    numbers[1] = round(float(phi @ phi) * SCALE)
    numbers[2 : 2 + v.shape[0]] = np.rint(v * SCALE)
    numbers[2 + v.shape[0] :] = np.rint(phi * SCALE)
    peak = float(np.max(np.abs(v))) or 1.0
    quantised = np.rint(v / peak * 127.0).astype(np.int8)
    return DriftSample(numbers, event_hash(event_id), struct.pack("<f", peak) + quantised.tobytes())


def sum_samples(samples: Sequence[DriftSample]) -> Any:
    import numpy as np

    return np.sum(np.stack([s.numbers for s in samples]), axis=0, dtype=np.int64)


def pack_sums(sums: Any) -> bytes:
    """Little-endian doubles (each an integer below 2^53: exact), as the record script adds them."""
    import numpy as np

    return np.asarray(sums, dtype="<f8").tobytes()


def unpack_sums(raw: bytes) -> list[int]:
    return [int(x) for x in struct.unpack(f"<{len(raw) // 8}d", raw)]


def reservoir_field(s: DriftSample, event_id: str) -> bytes:
    """A reservoir entry's hash field: the 52-bit hash big-endian (byte order = numeric order), then the id."""
    return s.hash.to_bytes(8, "big") + event_id.encode()


def merge_reservoir(entries: Iterable[tuple[bytes, bytes]], keep: int) -> list[tuple[bytes, bytes]]:
    """The bottom ``keep`` of (field, vector) entries, by field (what the record script keeps)."""
    return sorted(entries)[:keep]


def unquantise(raw: bytes) -> Any:
    import numpy as np

    (peak,) = struct.unpack("<f", raw[:4])
    return np.frombuffer(raw[4:], dtype=np.int8).astype(np.float64) * (peak / 127.0)


# -- the comparison -------------------------------------------------------------------------------
@dataclass
class WindowSums:
    """A window's (or the reference's) sums: n, Q, Σv, Σφ (integers in 2^-20 units; n a plain count)."""

    n: int
    q: int
    v: list[int]
    f: list[int]

    @classmethod
    def parse(cls, numbers: Sequence[int], dim: int) -> WindowSums:
        return cls(int(numbers[0]), int(numbers[1]), list(numbers[2 : 2 + dim]), list(numbers[2 + dim :]))

    def add(self, other: WindowSums) -> None:
        if not self.v:
            self.v, self.f = [0] * len(other.v), [0] * len(other.f)
        self.n += other.n
        self.q += other.q
        self.v = [a + b for a, b in zip(self.v, other.v, strict=True)]
        self.f = [a + b for a, b in zip(self.f, other.f, strict=True)]

    def to_json(self) -> list[Any]:
        return [self.n, self.q, self.v, self.f]

    @classmethod
    def from_json(cls, doc: list[Any]) -> WindowSums:
        return cls(int(doc[0]), int(doc[1]), [int(x) for x in doc[2]], [int(x) for x in doc[3]])


def centroid_distance(x: WindowSums, y: WindowSums) -> float:
    """1 − cosine of the two centroids (of the sums: the scale and counts cancel)."""
    dot = math.fsum(a * b for a, b in zip(x.v, y.v, strict=True))
    nx = math.sqrt(math.fsum(a * a for a in x.v))
    ny = math.sqrt(math.fsum(b * b for b in y.v))
    return 1.0 - dot / (nx * ny) if nx and ny else 0.0


def mmd2(x: WindowSums, y: WindowSums) -> float:
    """The unbiased MMD² estimate of the random-feature kernel (module docstring)."""
    if x.n < 2 or y.n < 2:
        return 0.0
    sxx = math.fsum(a * a for a in x.f) / SCALE**2
    syy = math.fsum(b * b for b in y.f) / SCALE**2
    sxy = math.fsum(a * b for a, b in zip(x.f, y.f, strict=True)) / SCALE**2
    qx, qy = x.q / SCALE, y.q / SCALE
    return (sxx - qx) / (x.n * (x.n - 1)) + (syy - qy) / (y.n * (y.n - 1)) - 2.0 * sxy / (x.n * y.n)


@dataclass(frozen=True)
class Verdict:
    """A window compared with the reference; ``fired``: which statistics passed their threshold."""

    start: int
    count: int
    reference_count: int
    centroid_distance: float
    mmd2: float
    fired: tuple[str, ...]
    reference_centroid: list[float]


def _kernel(cfg: EmbeddingDriftConfig) -> list[Any]:
    """What a reference's sums depend on: the model, the features and the bandwidth."""
    return [cfg.model, cfg.features, cfg.bandwidth]


#: trailing reference: windows kept at most (each ~5 kB of JSON at the default sizes)
_MAX_TRAIL = 64


@dataclass
class Drift:
    """One pair's drift state (JSON in Redis between window closes): the reference and the last window
    folded (a window is folded once, in order)."""

    cfg: EmbeddingDriftConfig
    last: int | None = None
    reference: WindowSums | None = None  # pinned
    trail: list[WindowSums] = field(default_factory=list)  # trailing: newest last

    def _reference(self) -> WindowSums | None:
        if self.cfg.reference == "pinned":
            ref = self.reference
        else:
            ref = WindowSums(0, 0, [], [])
            for w in self.trail:
                ref.add(w)
        return ref if ref is not None and ref.n >= self.cfg.reference_events else None

    def _learn(self, window: WindowSums) -> None:
        if self.cfg.reference == "pinned":
            if self.reference is None:
                self.reference = WindowSums(0, 0, [], [])
            if self.reference.n < self.cfg.reference_events:
                self.reference.add(window)
            return
        self.trail.append(window)
        while len(self.trail) > 1 and (
            sum(w.n for w in self.trail[1:]) >= self.cfg.reference_events or len(self.trail) > _MAX_TRAIL
        ):
            self.trail.pop(0)

    def fold(self, start: int, window: WindowSums) -> Verdict | None:
        """Fold one closed window; the verdict when it was compared (its ``fired`` may be empty)."""
        if self.last is not None and start <= self.last:
            return None
        self.last = start
        if window.n <= 0:
            return None
        shape = (len(window.v), len(window.f))
        if any((len(w.v), len(w.f)) != shape for w in [*self.trail, *filter(None, [self.reference])]):
            self.reference, self.trail = None, []  # another model or feature count: learn again
        reference = self._reference()
        if reference is None or window.n < self.cfg.min_events:
            self._learn(window)
            return None
        distance, mmd = centroid_distance(window, reference), mmd2(window, reference)
        fired = tuple(
            name
            for name, passed in (
                ("mmd2", mmd > self.cfg.mmd_threshold),
                (
                    "centroid_distance",
                    self.cfg.centroid_threshold is not None and distance > self.cfg.centroid_threshold,
                ),
            )
            if passed
        )
        verdict = Verdict(
            start,
            window.n,
            reference.n,
            distance,
            mmd,
            fired,
            [x / (SCALE * reference.n) for x in reference.v],
        )
        if fired:  # learn the new level again: one alert per shift, not one per window after it
            self.reference, self.trail = None, []
        else:
            self._learn(window)
        return verdict

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": _kernel(self.cfg),
            "last": self.last,
            "reference": self.reference.to_json() if self.reference is not None else None,
            "trail": [w.to_json() for w in self.trail],
        }

    @classmethod
    def from_json(cls, cfg: EmbeddingDriftConfig, doc: dict[str, Any] | None) -> Drift:
        if not doc:
            return cls(cfg)
        if doc.get("kernel") != _kernel(cfg):  # the settings changed: the reference is learnt again
            return cls(cfg, doc.get("last"))
        ref = doc.get("reference")
        return cls(
            cfg,
            doc.get("last"),
            WindowSums.from_json(ref) if ref else None,
            [WindowSums.from_json(w) for w in doc.get("trail", [])],
        )
