"""The ``streameval`` argument parser: every command has a description, every option help and its default."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._version import __version__

__all__ = ["EXIT_CODES", "EXIT_FAILED", "EXIT_OK", "EXIT_UNAVAILABLE", "EXIT_USAGE", "build_parser"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

EXIT_CODES = f"""exit codes:
  {EXIT_OK}    success
  {EXIT_FAILED}    a gate failed (evaluate --fail-under / --max-dead-letters / --max-judge-error-rate), the demo did not finish, or
       Kafka/Redis refused the connection for good (credentials, TLS)
  {EXIT_USAGE}    bad usage or configuration (the message names the file and field)
  {EXIT_UNAVAILABLE}    a Kafka broker or Redis could not be reached
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)"""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Appends ``(default: X)`` to an option's help unless the help already says its default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or not action.option_strings or action.default is argparse.SUPPRESS:
            return text
        if isinstance(action, argparse._StoreTrueAction):
            return f"{text} (default: off)"
        if action.default is not None:
            return f"{text} (default: %(default)s)"
        return text


def _sub(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str, description: str
) -> argparse.ArgumentParser:
    return sub.add_parser(
        name, help=summary, description=description, epilog=EXIT_CODES, formatter_class=_Formatter
    )


BOOTSTRAP_HELP = (
    "Kafka bootstrap servers, host:port[,host:port] (default: KAFKA_BOOTSTRAP_SERVERS, else localhost:9092)"
)
REDIS_HELP = "Redis URL (default: REDIS_URL)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streameval",
        description="Streaming evaluator for LLM outputs (Kafka + Faust + Redis).",
        epilog=EXIT_CODES,
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"streameval {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = _sub(
        sub,
        "demo",
        "run the whole pipeline once on embedded servers with the example events",
        "Start a Tansu broker, Redis, three SIMULATED judges and a worker; send the example events; "
        "print the per model x suite summary read back from Redis; stop everything.",
    )
    demo.add_argument(
        "--events",
        type=int,
        default=None,
        metavar="N",
        help="events to send (default: every line of the example file; more cycles it)",
    )
    demo.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="suite YAML (default: the bundled examples/suites.yaml)",
    )
    demo.add_argument(
        "--input",
        type=Path,
        default=None,
        metavar="FILE",
        help="events JSONL (default: the bundled examples/events.jsonl)",
    )
    demo.add_argument("--no-judges", action="store_true", help="do not start the simulated judge panel")
    demo.add_argument(
        "--local-judge",
        action="store_true",
        help="judge with a real model on this machine instead of the simulated panel: llama-cpp-python's "
        "server with SmolLM2-135M (the local-judge extra), offline; it shows the mechanics, not judging quality",
    )
    demo.add_argument(
        "--keep", action="store_true", help="keep the demo's keys in an external Redis (REDIS_URL)"
    )
    demo.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="give up after this many seconds (default 180; 900 with --local-judge)",
    )

    up = _sub(
        sub,
        "up",
        "run a local stack (broker, Redis, worker, API and dashboard) until Ctrl-C",
        "Start an embedded Tansu broker, Redis, a worker and the API with its dashboard on loopback, print "
        "their addresses and the commands to produce and tail, and run until Ctrl-C. State (Redis data, logs) "
        "lives in --state-dir and persists between runs; the embedded broker keeps messages in memory only, "
        "so topics start empty on every run.",
    )
    up.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="suite YAML (default: the bundled examples/suites.yaml with the simulated judges)",
    )
    up.add_argument(
        "--state-dir",
        type=Path,
        default=Path(".streameval"),
        metavar="DIR",
        help="where Redis data and logs are kept between runs",
    )
    up.add_argument(
        "--kafka-port", type=int, default=9092, metavar="PORT", help="port of the embedded broker"
    )
    up.add_argument("--redis-port", type=int, default=6380, metavar="PORT", help="port of the embedded Redis")
    up.add_argument(
        "--web-port", type=int, default=8080, metavar="PORT", help="port of the API and dashboard"
    )
    up.add_argument(
        "--no-judges",
        action="store_true",
        help="do not start the simulated judge panel (it is only used with the bundled suites)",
    )

    worker = _sub(
        sub,
        "worker",
        "run a stream worker (Faust) until SIGTERM",
        "Consume request events, evaluate them, record them in Redis and publish results, dead letters, "
        "aggregates and alerts. Creates missing topics; waits for Redis. Set STREAMEVAL_WEB_PORT to also "
        "serve the API, dashboard, /health, /ready and /metrics.",
    )
    worker.add_argument("--config", type=Path, metavar="FILE", help="suite YAML (default: STREAMEVAL_CONFIG)")
    worker.add_argument("--bootstrap", metavar="HOSTS", help=BOOTSTRAP_HELP)
    worker.add_argument("--redis-url", metavar="URL", help=REDIS_HELP)
    worker.add_argument(
        "--app-id",
        metavar="ID",
        help="Faust app id = consumer group (default: STREAMEVAL_APP_ID, else streameval)",
    )
    worker.add_argument(
        "--shadow",
        type=Path,
        metavar="FILE",
        default=None,
        help="suite YAML whose suites run as shadow candidates of the live suites of the same names: "
        "same events, results marked shadow: true, own version, never alert (docs/versions.md; default: "
        "STREAMEVAL_SHADOW, else none)",
    )
    worker.add_argument(
        "--shadow-sample",
        type=float,
        metavar="R",
        default=None,
        help="share of events the --shadow candidates evaluate, by event-id hash (default 1)",
    )

    produce = _sub(
        sub,
        "produce",
        "send each line of a file (or stdin) as one message",
        "Send each non-blank line as one message. With '-' lines are read from stdin and each is sent "
        "as soon as it is read.",
    )
    produce.add_argument("file", type=Path, help="file with one message per line ('-' for stdin)")
    produce.add_argument(
        "--topic", default=None, help="topic (default: STREAMEVAL_TOPIC_REQUESTS, else evals.requests)"
    )
    produce.add_argument("--bootstrap", metavar="HOSTS", help=BOOTSTRAP_HELP)

    tail = _sub(
        sub,
        "tail",
        "print the messages of a topic, one per line",
        "Print each message of a topic on stdout, one per line, from the beginning or only new ones.",
    )
    tail.add_argument("--topic", required=True, help="topic to read (required; e.g. evals.results)")
    tail.add_argument("--bootstrap", metavar="HOSTS", help=BOOTSTRAP_HELP)
    tail.add_argument("--latest", action="store_true", help="only new messages (default: from the beginning)")
    tail.add_argument(
        "--limit", type=int, default=None, metavar="N", help="stop after N messages (default: never)"
    )

    evaluate = _sub(
        sub,
        "evaluate",
        "evaluate a JSONL file offline (no broker), e.g. to gate a release",
        "The same pipeline over a JSONL file, with no broker and no Redis. Results in input order; "
        "exit 1 when a gate (--fail-under, --max-dead-letters, --max-judge-error-rate, --min-human-kappa) fails.",
    )
    evaluate.add_argument("--config", type=Path, required=True, metavar="FILE", help="suite YAML (required)")
    evaluate.add_argument(
        "--input",
        type=Path,
        required=True,
        metavar="FILE",
        help="request events, one JSON object per line (required)",
    )
    evaluate.add_argument(
        "--output", type=Path, required=True, metavar="FILE", help="graded results, JSONL (required)"
    )
    evaluate.add_argument(
        "--deadletter",
        type=Path,
        default=None,
        metavar="FILE",
        help="events that could not be evaluated (default: OUTPUT with .deadletter.jsonl)",
    )
    evaluate.add_argument(
        "--sessions",
        type=Path,
        default=None,
        metavar="FILE",
        help="session results, when the suite file has sessions: (default: OUTPUT with .sessions.jsonl)",
    )
    evaluate.add_argument(
        "--fail-under",
        type=float,
        default=None,
        metavar="X",
        help="exit 1 when the mean score is below X, 0-1 (default: no gate)",
    )
    evaluate.add_argument(
        "--max-dead-letters",
        type=int,
        default=None,
        metavar="N",
        help="exit 1 when more than N lines could not be evaluated (default: no gate)",
    )
    evaluate.add_argument(
        "--max-judge-error-rate",
        type=float,
        default=None,
        metavar="X",
        help="exit 1 when a judge's answers failed more often than X, 0-1 (default: no gate)",
    )
    evaluate.add_argument("--concurrency", type=int, default=64, metavar="N", help="events evaluated at once")
    evaluate.add_argument(
        "--processes",
        type=int,
        default=0,
        metavar="N",
        help="evaluate suites without judges in N processes; 0: in this process",
    )
    evaluate.add_argument(
        "--max-event-bytes",
        type=int,
        default=None,
        metavar="N",
        help="larger events are dead-lettered as too_large (default: STREAMEVAL_MAX_EVENT_BYTES, else 1 MiB)",
    )
    evaluate.add_argument(
        "--input-topic",
        default=None,
        metavar="TOPIC",
        help="read each line as the suite file's input for TOPIC (json or otlp_json; default: "
        "native request events)",
    )
    evaluate.add_argument(
        "--labels",
        type=Path,
        default=None,
        metavar="FILE",
        help="human labels (feedback v1, or the suite file's feedback: map), one per line: print "
        "the agreement of judges, panel, result and evaluators with people (docs/feedback.md; default: none)",
    )
    evaluate.add_argument(
        "--min-human-kappa",
        type=float,
        default=None,
        metavar="X",
        help="with --labels: exit 1 when a judge's, the panel's or the result's Cohen's kappa "
        "with people is below X (default: no gate)",
    )
    evaluate.add_argument("--quiet", action="store_true", help="no progress bar or table")

    sim = sub.add_parser(
        "judge-sim",
        add_help=False,
        help="run a SIMULATED LLM judge (OpenAI + Anthropic protocols); see judge-sim --help",
    )
    sim.add_argument(
        "args", nargs=argparse.REMAINDER, help="the simulated judge's own options (see judge-sim --help)"
    )

    api = _sub(
        sub,
        "api",
        "serve the evaluator registry API, dashboard, /health, /ready and /metrics",
        "Serve the registry API, the pages and dashboard, /health, /ready and /metrics until SIGTERM. "
        "Needs Redis only.",
    )
    api.add_argument(
        "--host", default=None, help="address to bind (default: STREAMEVAL_WEB_HOST, else 127.0.0.1)"
    )
    api.add_argument("--port", type=int, default=None, help="port (default: STREAMEVAL_WEB_PORT, else 8080)")
    api.add_argument("--redis-url", metavar="URL", help=REDIS_HELP)

    guard = _sub(
        sub,
        "guard",
        "serve POST /api/v1/check alone: may this answer be sent? (several processes, one port)",
        "Serve the synchronous check of the suites with a guard: section (docs/guard.md) until SIGTERM: "
        "stateless, no Redis, a Kafka producer only when a suite publishes.",
    )
    guard.add_argument(
        "--config", type=Path, default=None, metavar="FILE", help="suite YAML (default: STREAMEVAL_CONFIG)"
    )
    guard.add_argument(
        "--host", default=None, help="address to bind (default: STREAMEVAL_WEB_HOST, else 127.0.0.1)"
    )
    guard.add_argument(
        "--port", type=int, default=None, help="port (default: STREAMEVAL_WEB_PORT, else 8080)"
    )
    guard.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="server processes (default: STREAMEVAL_GUARD_WORKERS, else one per CPU)",
    )

    check_one = _sub(
        sub,
        "check-one",
        "check one event read from stdin against a guard server; print its answer",
        "Send the request event on stdin to POST /api/v1/check and print the answer (JSON) on stdout. Exit 0 "
        "for allow, warn and mask, 1 for block, 2 for an event the server refused, 3 when no server answered. "
        "The token is STREAMEVAL_API_TOKEN (or _FILE).",
    )
    check_one.add_argument(
        "--url", default="http://127.0.0.1:8080", help="the guard server (or a worker's web server)"
    )
    check_one.add_argument("--suite", default=None, help="the suite (default: the event's, else routed)")
    check_one.add_argument(
        "--timeout", type=float, default=5.0, metavar="S", help="give up after this many seconds"
    )

    raw = _sub(
        sub,
        "dead-letter-raw",
        "write the whole event of a truncated dead letter (kept in Redis)",
        "A dead letter larger than STREAMEVAL_DEAD_LETTER_MAX_BYTES carries only the head and tail of its "
        "event; the whole event is kept in Redis for STREAMEVAL_DEAD_LETTER_RAW_TTL_S. This writes it.",
    )
    raw.add_argument("key", help="the dead letter's truncated.stored_key (or its truncated.sha256)")
    raw.add_argument(
        "--output", type=Path, default=None, metavar="FILE", help="file to write (default: stdout)"
    )
    raw.add_argument("--redis-url", metavar="URL", help=REDIS_HELP)

    migrate = _sub(
        sub,
        "migrate",
        "move Redis state of an earlier version into today's layout, once",
        "marks: the idempotency marks of the layout before the digest buckets move into the buckets (workers no "
        "longer read the old layout on each batch). Run it once after the last worker of that version stopped "
        "(docs/operations.md).",
    )
    migrate.add_argument("what", choices=["marks"], help="what to migrate")
    migrate.add_argument("--redis-url", metavar="URL", help=REDIS_HELP)

    review = _sub(
        sub,
        "review",
        "export the review page's labelled items as JSONL",
        "`streameval review export` writes the labelled items the review page keeps (docs/feedback.md) to "
        "stdout, one JSON document a line: items ({event, result, label}, and expected when corrected), "
        "labels (feedback v1, for `streameval evaluate --labels`) or events (a golden set, the corrected "
        "expected answers in).",
    )
    review.add_argument("action", choices=["export"], help="what to do: export")
    review.add_argument(
        "--format",
        choices=["items", "labels", "events"],
        default="items",
        help="items, labels or events",
    )
    review.add_argument(
        "--model", metavar="NAME", default=None, help="only this model's items (default: all)"
    )
    review.add_argument(
        "--suite", metavar="NAME", default=None, help="only this suite's items (default: all)"
    )
    review.add_argument("--redis-url", metavar="URL", help=REDIS_HELP)

    check = _sub(
        sub,
        "check",
        "validate a suite YAML and list its suites",
        "Validate a suite file (every problem with file, line and field) and list its suites.",
    )
    check.add_argument("config", type=Path, help="suite YAML to check")

    red = _sub(
        sub,
        "redact",
        "print what a text becomes under the suite file's redact: block",
        "Redact TEXT (or standard input) as the judges would see it, for reviewing the rules: the text on "
        "stdout, the count of each kind on stderr (docs/redact.md).",
    )
    red.add_argument("--config", type=Path, required=True, help="suite YAML with a redact: block (required)")
    red.add_argument(
        "--suite",
        default=None,
        help="the suite or session whose redaction to apply (default: the top level's)",
    )
    red.add_argument("text", nargs="?", default="-", help="the text; - or none: standard input")

    bf = _sub(
        sub,
        "backfill",
        "re-read the request topics from a time and evaluate with a suite version",
        "Replays the retained requests of the suite file's input topics (its own consumer group: the same "
        "command resumes after Ctrl-C or a crash) through the file's suite versions. Results are published "
        "marked backfill: true and recorded under their version by event time; it stops at --to or at the "
        "end offsets of its first start. Refuses a version live workers run (docs/versions.md).",
    )
    bf.add_argument(
        "--config",
        type=Path,
        required=True,
        metavar="FILE",
        help="suite YAML: the version to backfill (required)",
    )
    bf.add_argument(
        "--from",
        dest="since",
        required=True,
        metavar="TIME",
        help="first record time: RFC 3339 or epoch seconds (required)",
    )
    bf.add_argument(
        "--to",
        dest="until",
        default=None,
        metavar="TIME",
        help="records at or after this time are skipped (default: up to the end offsets at the first start)",
    )
    bf.add_argument(
        "--sample", type=float, default=1.0, metavar="R", help="share of events, by event-id hash (default 1)"
    )
    bf.add_argument(
        "--max-cost",
        type=float,
        default=None,
        metavar="USD",
        help="stop (resumably) once the judges' cost reaches this (priced judges; default: no limit)",
    )
    bf.add_argument(
        "--output-topic",
        default=None,
        metavar="T",
        help="topic of the results (default: STREAMEVAL_TOPIC_RESULTS, else evals.results)",
    )
    bf.add_argument(
        "--dry-run",
        action="store_true",
        help="print the events in range and the estimated judge cost; change nothing",
    )
    bf.add_argument("--batch", type=int, default=256, metavar="N", help="records per batch (default 256)")
    bf.add_argument("--bootstrap", metavar="HOSTS", help=BOOTSTRAP_HELP)
    bf.add_argument("--redis-url", metavar="URL", help=REDIS_HELP)
    bf.add_argument("--quiet", action="store_true", help="no progress bar")

    notify = _sub(
        sub,
        "notify",
        "deliver alerts to the suite file's notify: channels, or send one a test",
        "Read the alerts topic in a consumer group of its own ({app id}-notify) and deliver each alert to the "
        "channels of the suite file's notify: list (Slack, PagerDuty, Opsgenie, signed webhooks, "
        "Alertmanager), with retries; what cannot be delivered becomes a dead letter. 'notify test' sends "
        "one clearly marked test notification to --channel and prints its answer (docs/notify.md).",
    )
    notify.add_argument(
        "action", nargs="?", choices=["run", "test"], default="run", help="run (default) or test"
    )
    notify.add_argument(
        "--config", type=Path, default=None, metavar="FILE", help="suite YAML (default: STREAMEVAL_CONFIG)"
    )
    notify.add_argument(
        "--channel",
        default=None,
        metavar="NAME",
        help="test: the channel to send to (required with test; default: none)",
    )
    notify.add_argument(
        "--port",
        type=int,
        default=None,
        metavar="PORT",
        help="run: serve /health and /metrics (the per-channel figures) on this port "
        "(default: STREAMEVAL_WEB_PORT; unset: no web server)",
    )
    notify.add_argument("--bootstrap", metavar="HOSTS", help=BOOTSTRAP_HELP)
    notify.add_argument("--redis-url", metavar="URL", help=REDIS_HELP)

    cmp = _sub(
        sub,
        "compare",
        "compare two suite versions on the same events, offline",
        "With --input: A and B are suite files, each evaluates every event of the JSONL file, and suites of "
        "the same name are compared. Without: A and B are result files (JSONL graded results), joined by id "
        "within each model x suite. Reports b against a: n, mean difference with a paired 95 % CI, "
        "pass->fail and fail->pass flips with example ids, Cohen's kappa, Pearson and Spearman, "
        "per-evaluator deltas (docs/versions.md).",
    )
    cmp.add_argument("a", type=Path, help="version a: a suite file (with --input) or a result file")
    cmp.add_argument("b", type=Path, help="version b: a suite file (with --input) or a result file")
    cmp.add_argument(
        "--input",
        type=Path,
        default=None,
        metavar="FILE",
        help="request events, JSONL: A and B are then suite files (default: none, A and B are result files)",
    )
    cmp.add_argument("--json", action="store_true", help="print the comparisons as one JSON document")
    cmp.add_argument(
        "--dimension",
        default=None,
        metavar="NAME",
        help="with --input: also compare per value of this slice dimension of the files' segments: "
        "(default: none, the suites as a whole only; docs/segments.md)",
    )
    cmp.add_argument(
        "--concurrency", type=int, default=64, metavar="N", help="events evaluated at once (with --input)"
    )
    return parser
