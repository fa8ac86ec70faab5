"""The Redis keyspace: every key name (the client, its error guard and retries: streameval.redis_client).

Keys are laid out for Redis Cluster: each key carries a hash tag (``{...}``) naming the slot it lives
in, and every Lua script (streameval._lua) touches keys of one tag only. ``P`` is the prefix
(``STREAMEVAL_REDIS_PREFIX``), ``T`` a model × suite pair ``{model:suite}`` (each URL-quoted):

==================================  ================================================================
``P{T}:all``                        all-time aggregate hash (TTL ``all_time_ttl_s``, renewed by writes)
``P{T}:w:{size}:{start}``           one tumbling window's aggregate hash (TTL ``window_ttl_s``)
``P{T}:closed:{size}:{start}``      the window is closed: its late events go to the open window
``P{T}:mk:{gen}``                   idempotency marks: hash of digest buckets (replay horizon)
``P{T}:mk:{gen}:{shard}``           marks of the previous layout (read only until they expire)
``P{T}:rb:{gen}:{token}``           the encoded results of one record call, concatenated (redelivery horizon)
``P{T}:res:{gen}``                  encoded results by digest (the previous layout; read only)
``P{T}:alert:{rule}:{size}:{start}``  an alert's claim; ``P{T}:cool:{rule}`` its cooldown
``P{T}:shift:{size}``                the score-shift detector's state of the pair (JSON, streameval.features.score_shift)
``P{T}:ed:{size}:{start}``           a window's embedding sums (field ``s``) and reservoir (streameval.features.embedding_drift)
``P{T}:edrift:{size}``               the embedding-drift state of the pair: reference, last window folded (JSON)
``P{T}:ex:{kind}:{size}:{start}``   a window's examples: zset of compact results, ``worst`` (score: the
                                    result's score) or ``failing`` (score: event time); bounded, TTL
                                    ``example_ttl_s`` (at most ``window_ttl_s``)
``P{T}:sg:{dim}:{size}:{start}``   a window's figures per value of one slice dimension: field value (or
                                    ``(other)``, ``(missing)``, ``(invalid)``) -> packed figures; at most
                                    ``max_values`` values (streameval.features.segments; TTL ``window_ttl_s``)
``P{T}:sgd``                        the names of the pair's slice dimensions with figures (set)
``P{T}:rid:{gen}``                  result id -> pointer: digest, offset, length, ``rb`` key (redelivery horizon)
``P{ix}:pairs``                     zset of pairs (score: last seen); at most ``max_pairs``
                                    (``T`` is ``{model:suite:version}``; a pair of two parts is the layout
                                    before versions, read as version "")
``P{ix}:wp:{size}:{start}``         set of pairs with data in a window (the closer's index)
``P{ix}:open:{size}``               zset of windows with data not yet published
``P{ix}:win:{size}``                zset of windows with data (the dashboard's index)
``P{ix}:lease:{size}:{start}``      a window's publishing lease
``P{ix}:shiftq:{size}``             published windows the score-shift detector has not folded (zset)
``P{ix}:shiftlease:{size}``         the score-shift detector's lease (streameval.features.score_shift)
``P{ix}:edq:{size}`` / ``edlease``   the same two for embedding drift
``P{ix}:alerts:recent``             list of the last alerts published (bounded)
``P{dl}:all`` / ``P{dl}:w:{size}:{start}``  dead-letter counts by kind; ``P{dl}:win:{size}`` index
``P{dl}:seen:{gen}:{topic}:{part}``  offsets of dead letters already counted
``P{dlraw}:{sha256}`` ``:index`` ``:bytes``  whole events of truncated dead letters, within a budget
``P{registry}:ev:{id}`` ``:names`` ``:rev``  custom evaluators; channel ``P{registry}:changes``
``P{versions}:labels``              hash ``suite:label`` -> version (a label names one version for ever)
``P{versions}:current``             hash suite -> the version live workers run (the API's default)
``P{versions}:defs``                hash ``suite:version`` -> the resolved definition, canonical JSON
``P{versions}:runs``                hash ``suite:version`` -> how it ran last: live, shadow or backfill
``P{T}:sc:{gen}`` ``P{T}:scn``      compact per-event scores of a version, appended per batch, and the
                                    evaluator names (streameval.features.compare; TTL ``compare_ttl_s``)
``P{lj:S}:b:{bucket}:{gen}``         verdicts kept for the human-label join (streameval.features.labels); ``P{lj}:layouts``
``P{T}:hl:all`` / ``P{T}:hl:{size}:{start}``  joined human labels of a pair; ``P{lpend}:q`` / ``:d`` waiting labels
``P{T}:rv:{minute}``                review items sent this minute (streameval.features.review)
``P{rp}:idx`` ``:doc:K`` ``:m:K`` ...  the review page's queue (streameval.features.review_page._scripts)
``P judge:...``                     judge answers (streameval.judges._cache), one slot per key
``P{T}:firing:{rule}:{size}``       the alert a rule fired on a pair until it resolves (with ``notify:``)
``P notify:sent:{channel}:{status}:{alert id}``  a channel took that notification (TTL: dedupe horizon)
``P notify:open:{channel}:{incident}``  a channel got an incident's trigger, not yet its resolve
``P judge_spend:{judge}:{hour}``    a judge's money spent in one UTC clock hour (one key per command)
==================================  ================================================================

A URL ``redis+cluster://host:port`` (or ``rediss+cluster://``) connects to a Redis Cluster through
redis-py's cluster client, which follows MOVED and ASK; anything the client gives up on (TRYAGAIN,
CLUSTERDOWN, a failover in progress, a lost connection) becomes :class:`StoreUnavailable`, which the
worker waits out and retries: never skipped.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from .errors import ConfigError

# The client half (factory, error guard, scripts, retries) lives in streameval.redis_client; its names
# stay importable from here, where every caller found them before the split.
from .redis_client import (
    TRANSIENT,
    Client,
    connect,
    guard,
    is_cluster,
    mget,
    ping,
    preflight,
    retry_forever,
    run_scripts,
)

__all__ = [
    "OVERFLOW_MODEL",
    "TRANSIENT",
    "Client",
    "Keys",
    "connect",
    "guard",
    "is_cluster",
    "mget",
    "ping",
    "preflight",
    "retry_forever",
    "run_scripts",
]

#: the model label of pairs beyond ``max_pairs`` (their suite is kept)
OVERFLOW_MODEL = "(overflow)"


class Keys:
    """Every key name under one prefix (module docstring)."""

    def __init__(self, prefix: str = "streameval:") -> None:
        if "{" in prefix or "}" in prefix:
            raise ConfigError(
                f"STREAMEVAL_REDIS_PREFIX must not contain braces (Redis Cluster hash tags); got {prefix!r}"
            )
        self.prefix = prefix
        self.ix = f"{prefix}{{ix}}:"
        self.dl = f"{prefix}{{dl}}:"
        self.registry = f"{prefix}{{registry}}:"
        self.versions = f"{prefix}{{versions}}:"

    # -- a model × suite pair (one slot each) -------------------------------------------------------
    @staticmethod
    def pair_id(model: str, suite: str, version: str = "") -> str:
        """``model:suite:version``, model and suite URL-quoted (no ``{``, ``}`` or ``:`` inside): the pair's
        hash tag. Without a version, ``model:suite``: the layout before versions (docs/versions.md)."""
        base = f"{quote(model, safe='')}:{quote(suite, safe='')}"
        return f"{base}:{quote(version, safe='')}" if version else base

    @staticmethod
    def split_pair(pair: str) -> tuple[str, str, str]:
        """``(model, suite, version)`` of a pair id; a pair of two parts has version ``""``."""
        model, _, rest = pair.partition(":")
        suite, _, version = rest.partition(":")
        return unquote(model), unquote(suite), unquote(version)

    def pair(self, pair: str) -> str:
        return f"{self.prefix}{{{pair}}}:"

    def all_time(self, pair: str) -> str:
        return self.pair(pair) + "all"

    def window(self, pair: str, size: int, start: int) -> str:
        return f"{self.pair(pair)}w:{size}:{start}"

    def closed(self, pair: str, size: int, start: int) -> str:
        return f"{self.pair(pair)}closed:{size}:{start}"

    def marks(self, pair: str, generation: int) -> str:
        return f"{self.pair(pair)}mk:{generation}"

    def legacy_marks(self, pair: str, generation: int, shard: int) -> str:
        """Marks written before the digest buckets (moved into them once by ``streameval migrate marks``)."""
        return f"{self.pair(pair)}mk:{generation}:{shard}"

    def results(self, pair: str, generation: int) -> str:
        """Encoded results by digest, as the previous layout kept them (read only, until they expire)."""
        return f"{self.pair(pair)}res:{generation}"

    def result_blob(self, pair: str, suffix: str) -> str:
        """The encoded results of one record call; ``suffix`` is ``{generation}:{token}`` (streameval.store)."""
        return f"{self.pair(pair)}rb:{suffix}"

    def alert_claim(self, pair: str, rule: str, size: int, start: str) -> str:
        return f"{self.pair(pair)}alert:{quote(rule, safe='')}:{size}:{start}"

    def cooldown(self, pair: str, rule: str) -> str:
        return f"{self.pair(pair)}cool:{quote(rule, safe='')}"

    def alert_firing(self, pair: str, rule: str, size: int) -> str:
        """The alert a rule last fired on the pair with windows of ``size`` (JSON), until it resolves
        (streameval.features.notify's window step; kept only when the suite file has ``notify:``)."""
        return f"{self.pair(pair)}firing:{quote(rule, safe='')}:{size}"

    def score_shift(self, pair: str, size: int) -> str:
        return f"{self.pair(pair)}shift:{size}"

    def embedding_window(self, pair: str, size: int, start: int) -> str:
        """A window's embedding sums and reservoir (streameval.features.embedding_drift)."""
        return f"{self.pair(pair)}ed:{size}:{start}"

    def embedding_drift(self, pair: str, size: int) -> str:
        """A pair's embedding-drift state: its reference and the last window folded (JSON)."""
        return f"{self.pair(pair)}edrift:{size}"

    def examples(self, pair: str, kind: str, size: int, start: int) -> str:
        """A window's examples, ``kind`` ``worst`` or ``failing`` (streameval.features.drilldown)."""
        return f"{self.pair(pair)}ex:{kind}:{size}:{start}"

    def spend(self, pair: str) -> str:
        """A pair's spend per budget period (field ``{period}@{time zone}:{period id}``;
        streameval.features.usage), added by the record call."""
        return f"{self.pair(pair)}spend"

    def budget_claim(self, pair: str, budget: str, period: str, level: str) -> str:
        """A budget alert's claim (``level``: the warning level, or ``burn``), in the slot of the scope's first
        pair (streameval.features.usage)."""
        return f"{self.pair(pair)}budget:{quote(budget, safe='')}:{quote(period, safe='')}:{level}"

    def slice(self, pair: str, dimension: str, size: int, start: int) -> str:
        """A window's figures per value of one slice dimension (streameval.feature ``SLICES``)."""
        return f"{self.pair(pair)}sg:{quote(dimension, safe='')}:{size}:{start}"

    def slice_dimensions(self, pair: str) -> str:
        """The names of the dimensions a pair has slice figures of (a set; readers need no keyspace scan)."""
        return f"{self.pair(pair)}sgd"

    def result_ids(self, pair: str, generation: int) -> str:
        """Result id -> pointer to its encoded result (streameval.store), redelivery generation ``generation``."""
        return f"{self.pair(pair)}rid:{generation}"

    # -- indexes (one slot) ---------------------------------------------------------------------------
    @property
    def pairs(self) -> str:
        return self.ix + "pairs"

    def window_pairs(self, size: int, start: int) -> str:
        return f"{self.ix}wp:{size}:{start}"

    def open_windows(self, size: int) -> str:
        return f"{self.ix}open:{size}"

    def windows(self, size: int) -> str:
        return f"{self.ix}win:{size}"

    def lease(self, size: int, start: int) -> str:
        return f"{self.ix}lease:{size}:{start}"

    def published_at(self, size: int, start: int) -> str:
        """The time a window was first published: a repeat after a crash carries the same stamp."""
        return f"{self.ix}pubat:{size}:{start}"

    def shift_queue(self, size: int) -> str:
        return f"{self.ix}shiftq:{size}"

    def shift_lease(self, size: int) -> str:
        return f"{self.ix}shiftlease:{size}"

    def drift_queue(self, size: int) -> str:
        return f"{self.ix}edq:{size}"

    def drift_lease(self, size: int) -> str:
        return f"{self.ix}edlease:{size}"

    @property
    def firing_index(self) -> str:
        """Firing key (:meth:`alert_firing`) -> when it resolves for want of events (epoch seconds: the end of
        the last empty window it waits for); kept only when the suite file has ``notify:``."""
        return self.ix + "firing"

    @property
    def recent_alerts(self) -> str:
        return self.ix + "alerts:recent"

    # -- dead letters (one slot) ----------------------------------------------------------------------
    @property
    def dead_letters_all(self) -> str:
        return self.dl + "all"

    def dead_letters(self, size: int, start: int) -> str:
        return f"{self.dl}w:{size}:{start}"

    def dead_letter_windows(self, size: int) -> str:
        return f"{self.dl}win:{size}"

    def dead_letter_seen(self, generation: int, topic: str, partition: str) -> str:
        return f"{self.dl}seen:{generation}:{quote(topic, safe='')}:{partition}"

    # -- whole events of truncated dead letters (one slot; streameval.deadletters) -------------------
    def dead_letter_raw(self, sha256: str) -> str:
        return f"{self.prefix}{{dlraw}}:{sha256}"

    @property
    def dead_letter_raw_index(self) -> str:
        return f"{self.prefix}{{dlraw}}:index"

    @property
    def dead_letter_raw_bytes(self) -> str:
        return f"{self.prefix}{{dlraw}}:bytes"

    # -- registry (one slot) --------------------------------------------------------------------------
    def registry_record(self, evaluator_id: str) -> str:
        return f"{self.registry}ev:{evaluator_id}"

    @property
    def registry_names(self) -> str:
        return self.registry + "names"

    @property
    def registry_rev(self) -> str:
        return self.registry + "rev"

    @property
    def registry_channel(self) -> str:
        return self.registry + "changes"

    def compact_scores(self, pair: str, generation: int) -> str:
        """Per-event compact scores of a pair (streameval.features.compare), generation ``generation``."""
        return f"{self.pair(pair)}sc:{generation}"

    def compact_names(self, pair: str) -> str:
        """The evaluator names of a pair's compact scores, NUL-separated (streameval.features.compare)."""
        return f"{self.pair(pair)}scn"

    # -- suite versions (one slot; streameval.versionstore) --------------------------------------------
    @property
    def version_labels(self) -> str:
        return self.versions + "labels"

    @property
    def current_versions(self) -> str:
        return self.versions + "current"

    @property
    def version_definitions(self) -> str:
        return self.versions + "defs"

    @property
    def version_runs(self) -> str:
        return self.versions + "runs"

    # -- alert notifications (spread over slots, one command each; streameval.features.notify) -------
    def notify_sent(self, channel: str, alert_id: str, status: str) -> str:
        """A channel accepted this alert id in this status (firing, resolved): not sent again."""
        return f"{self.prefix}notify:sent:{quote(channel, safe='')}:{status}:{quote(alert_id, safe='')}"

    def notify_open(self, channel: str, incident: str) -> str:
        """A channel got the trigger of this incident and not yet its resolve."""
        return f"{self.prefix}notify:open:{quote(channel, safe='')}:{quote(incident, safe='')}"

    # -- judge cache and budgets (spread over slots) ------------------------------------------------
    def judge(self, judge: str, model: str, version: str, digest: str) -> str:
        return f"{self.prefix}judge:{quote(judge, safe='')}:{quote(model, safe='')}:v{version}:{digest}"

    def judge_spend(self, judge: str, hour: int) -> str:
        """A judge's spend in one clock hour (streameval.judges._budget); INCRBYFLOAT and GET only."""
        return f"{self.prefix}judge_spend:{quote(judge, safe='')}:{hour}"
