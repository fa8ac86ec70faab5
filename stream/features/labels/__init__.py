"""Human labels joined to the verdicts on the stream (docs/feedback.md): a feature of its own.

Three parts, all in Redis so that any worker can do any step and the figures stay exact:

* **The verdicts kept for the join.** Every recorded result leaves a packed verdict record (the result's
  pass and score, each judge's and each evaluator's score; at most :data:`MAX_RECORD_BYTES`) for
  ``STREAMEVAL_LABEL_JOIN_TTL_S``. It is written by one script call per shard (``_scripts.LABEL_KEEP``) in
  the record pipeline the store already sends per batch (streameval.store: no extra round trip), into
  small hashes that Redis
  keeps as listpacks: key ``P{lj:S}:b:{bucket}:{generation}``, field the first 6 bytes of the event id's
  digest. ``S`` (one of :data:`SHARDS` hash tags) is ``bucket mod SHARDS``; a generation lasts the TTL and
  a key expires at the end of the next one, so a verdict lives between one and two TTLs. Names (which
  judge is which value) are in a small dictionary ``P{lj}:layouts``: layout id -> pair, names, threshold.
* **The join.** A batch of labels reads its verdicts with one script per shard touched (so at most one
  call per label, fewer in a batch), then appends one row per label to the pair's label rows
  (``P{T}:hl:all`` and ``P{T}:hl:{size}:{start}``, the window of the label's arrival on the Redis clock;
  one script per pair). A label whose verdict is not there yet waits in ``P{lpend}:q`` (a zset: next try)
  and ``P{lpend}:d`` (its data), is tried again by every worker's periodic step with a lease, and after
  ``STREAMEVAL_LABEL_WAIT_S`` becomes a dead letter ``unmatched_label`` with its raw bytes and the reason.
* **The figures.** Rows are appended, never updated; the reader keeps the latest row per event ×
  annotator (the same annotator twice: the latest wins, counted once) and computes every figure from the
  paired values (streameval.agreement), so two workers' rows give exactly the figures of one.

Row (bytes): event digest (8), annotator digest (4), arrival (4, epoch seconds), human flags (1: has
passed, passed, has score), human score (2, 1e-4 units), verdict length (1), verdict record. Verdict
record: layout id (4), flags (1: passed), result score (2), then 2 bytes per name (0xFFFF: no value).
Scores are kept on a 1e-4 grid.

Modules: ``_input`` (the ``feedback:`` block and the feedback topic's decoder), ``_records`` (verdict records
and rows), ``_figures`` (agreement, calibration, the offline join), ``_store`` (the join in Redis),
``_recorder`` (the verdicts kept with each recorded batch: a streameval.feature recorder, built by the
composition root only when labels are configured), ``_window`` (the window closer's step that adds each
window's agreement to its aggregates: a streameval.feature window step, built likewise), ``_intake`` (the
worker's side: the feedback topic's batches joined, and the periodic retry of the labels still waiting).
"""

from __future__ import annotations

from ._figures import Calibration, calibration, human_agreement, join_in_memory
from ._input import FeedbackDecoder, FeedbackInput, decode_error_letter, feedback_issues
from ._intake import LabelIntake
from ._recorder import VerdictRecorder
from ._records import (
    MAX_RECORD_BYTES,
    SHARDS,
    Layout,
    Row,
    annotator_digest,
    event_digest,
    layout_id,
    pack_verdict,
    parse_rows,
    unpack_verdict,
    verdict_values,
)
from ._store import JoinReport, Label, LabelStore
from ._window import AgreementStep

__all__ = [
    "MAX_RECORD_BYTES",
    "SHARDS",
    "AgreementStep",
    "Calibration",
    "FeedbackDecoder",
    "FeedbackInput",
    "JoinReport",
    "Label",
    "LabelIntake",
    "LabelStore",
    "Layout",
    "Row",
    "VerdictRecorder",
    "annotator_digest",
    "calibration",
    "decode_error_letter",
    "event_digest",
    "feedback_issues",
    "human_agreement",
    "join_in_memory",
    "layout_id",
    "pack_verdict",
    "parse_rows",
    "unpack_verdict",
    "verdict_values",
]
