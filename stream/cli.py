"""The ``streameval`` command line.

Exit codes: 0 success; 1 the gate failed (``evaluate --fail-under``) or the demo/stream did not
finish, or Kafka/Redis refused the connection for good (wrong credential, TLS mismatch: one line);
2 bad usage or configuration (the message names the file and field).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from ._version import __version__
from .errors import ConfigError, ConnectFailed

if TYPE_CHECKING:
    from .inputs import Decoder, InputConfig
    from .settings import Settings

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A bad command line that is not about the config (e.g. an output path that cannot be written): exit 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streameval", description="Streaming evaluator for LLM outputs (Kafka + Faust + Redis)."
    )
    parser.add_argument("--version", action="version", version=f"streameval {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="run the whole pipeline on embedded servers with the example events")
    demo.add_argument("--events", type=int, default=None, metavar="N",
                      help="events to send (default: every line of the example file; more cycles it)")
    demo.add_argument("--config", type=Path, default=None, help="suite YAML (default: the bundled examples/suites.yaml)")
    demo.add_argument("--input", type=Path, default=None, help="events JSONL (default: the bundled examples/events.jsonl)")
    demo.add_argument("--no-judges", action="store_true", help="do not start the simulated judge panel")
    demo.add_argument("--keep", action="store_true", help="keep the demo's keys in an external Redis (REDIS_URL)")
    demo.add_argument("--timeout", type=float, default=180.0, help="give up after this many seconds (default 180)")

    worker = sub.add_parser("worker", help="run a stream worker (Faust) until SIGTERM")
    worker.add_argument("--config", type=Path, help="suite YAML (or STREAMEVAL_CONFIG)")
    worker.add_argument("--bootstrap", help="Kafka bootstrap servers (or KAFKA_BOOTSTRAP_SERVERS)")
    worker.add_argument("--redis-url", help="Redis URL (or REDIS_URL)")
    worker.add_argument("--app-id", help="Faust app id / consumer group (or STREAMEVAL_APP_ID)")

    produce = sub.add_parser("produce", help="send each line of a file as one message")
    produce.add_argument("file", type=Path, help="file with one message per line ('-' for stdin)")
    produce.add_argument("--topic", default=None, help="topic (default: STREAMEVAL_TOPIC_REQUESTS or evals.requests)")
    produce.add_argument("--bootstrap", help="Kafka bootstrap servers (or KAFKA_BOOTSTRAP_SERVERS)")

    tail = sub.add_parser("tail", help="print the messages of a topic, one per line")
    tail.add_argument("--topic", required=True)
    tail.add_argument("--bootstrap", help="Kafka bootstrap servers (or KAFKA_BOOTSTRAP_SERVERS)")
    tail.add_argument("--latest", action="store_true", help="only new messages (default: from the beginning)")
    tail.add_argument("--limit", type=int, default=None, metavar="N", help="stop after N messages")

    evaluate = sub.add_parser("evaluate", help="evaluate a JSONL file offline (no broker), e.g. to gate a release")
    evaluate.add_argument("--config", type=Path, required=True, help="suite YAML")
    evaluate.add_argument("--input", type=Path, required=True, help="request events, one JSON object per line")
    evaluate.add_argument("--output", type=Path, required=True, help="graded results (JSONL)")
    evaluate.add_argument("--deadletter", type=Path, default=None,
                          help="events that could not be evaluated (default: OUTPUT with .deadletter.jsonl)")
    evaluate.add_argument("--fail-under", type=float, default=None, metavar="X",
                          help="exit 1 when the mean score is below X (0-1)")
    evaluate.add_argument("--max-dead-letters", type=int, default=None, metavar="N",
                          help="exit 1 when more than N lines could not be evaluated")
    evaluate.add_argument("--max-judge-error-rate", type=float, default=None, metavar="X",
                          help="exit 1 when a judge's answers failed more often than X (0..1)")
    evaluate.add_argument("--concurrency", type=int, default=64, help="events evaluated at once (default 64)")
    evaluate.add_argument("--processes", type=int, default=0, metavar="N",
                          help="evaluate suites without judges in N processes (default 0: in this process)")
    evaluate.add_argument("--max-event-bytes", type=int, default=None, metavar="N",
                          help="larger events are dead-lettered as too_large (default: STREAMEVAL_MAX_EVENT_BYTES or 1 MiB)")
    evaluate.add_argument("--input-topic", default=None, metavar="TOPIC",
                          help="read each line as the suite file's input for TOPIC (json or otlp_json)")
    evaluate.add_argument("--quiet", action="store_true", help="no progress bar or table")

    sim = sub.add_parser("judge-sim", add_help=False,
                         help="run a SIMULATED LLM judge (OpenAI + Anthropic protocols); see judge-sim --help")
    sim.add_argument("args", nargs=argparse.REMAINDER)

    api = sub.add_parser("api", help="serve the evaluator registry API, /health, /ready and /metrics (docs/api.md)")
    api.add_argument("--host", default=None, help="address to bind (or STREAMEVAL_WEB_HOST; default 127.0.0.1)")
    api.add_argument("--port", type=int, default=None, help="port (or STREAMEVAL_WEB_PORT; default 8080)")
    api.add_argument("--redis-url", help="Redis URL (or REDIS_URL)")

    check = sub.add_parser("check", help="validate a suite YAML and list its suites")
    check.add_argument("config", type=Path)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["judge-sim"]:  # its own parser (streameval.judges.sim) takes every option
        from .judges.sim import main as judge_sim

        return judge_sim(argv[1:])
    args = _parser().parse_args(argv)
    console = Console(stderr=True, soft_wrap=True, width=None if sys.stderr.isatty() else 120)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return _run(args, console)
    except (ConfigError, UsageError) as exc:
        console.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True)
        return EXIT_USAGE
    except ConnectFailed as exc:  # one line naming the server, the mechanism and the cause
        console.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True)
        return EXIT_FAILED
    except KeyboardInterrupt:
        console.print("interrupted")
        return 130


def _run(args: argparse.Namespace, console: Console) -> int:
    from .settings import load_settings

    if args.command == "worker":
        overrides = {k: v for k, v in {"config": args.config and str(args.config), "kafka_bootstrap_servers": args.bootstrap,
                                        "redis_url": args.redis_url, "app_id": args.app_id}.items() if v}  # fmt: skip
        from streameval.agents.worker import run_worker

        run_worker(load_settings(**overrides))
        return EXIT_OK
    if args.command == "api":
        return _api(args, load_settings(**({"redis_url": args.redis_url} if args.redis_url else {})))
    if args.command == "demo":
        from .demo import run_demo

        return asyncio.run(run_demo(args, console))
    if args.command == "evaluate":
        limit = {"max_event_bytes": args.max_event_bytes} if args.max_event_bytes is not None else {}
        return _evaluate(args, load_settings(**limit), console)
    if args.command == "check":
        return _check(args.config, console)
    settings = load_settings(**({"kafka_bootstrap_servers": args.bootstrap} if args.bootstrap else {}))
    if args.command == "produce":
        return asyncio.run(_produce(args, settings, args.topic or settings.topic_requests, console))
    if args.command == "tail":
        return asyncio.run(_tail(args, settings))
    raise AssertionError(f"unhandled command {args.command}")


def _api(args: argparse.Namespace, settings: Settings) -> int:
    from .api import DEFAULT_API_PORT, load_api_settings, serve_api

    if not settings.redis_url:
        raise ConfigError("no Redis: set REDIS_URL or pass --redis-url (the registry is stored there)")
    from .connect_check import check_redis_settings
    from .redis_security import redis_options

    api = load_api_settings()
    asyncio.run(check_redis_settings(settings.redis_url, redis_options(settings)))  # wrong password: one line
    port = args.port if args.port is not None else (api.web_port if api.web_port is not None else DEFAULT_API_PORT)
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port must be within 0..65535, got {port}")
    asyncio.run(serve_api(settings, api, host=args.host or api.web_host, port=port))
    return EXIT_OK


def _check(path: Path, console: Console) -> int:
    from .config import load_config

    _, suites = load_config(path)
    for suite in suites.all:
        how = "default" if suite.config.default else (suite.config.match.model_dump(exclude_none=True) if suite.config.match else "explicit only")
        names = ", ".join(f"{b.name}×{b.weight:g}" for b in suite.evaluators)
        console.print(f"{suite.name}: match {how}; threshold {suite.config.threshold:g}; {names}", highlight=False)
    for spec in suites.inputs:
        console.print(f"input {spec.topic}: {spec.format}", highlight=False)
    console.print(f"{path}: OK ({len(suites.all)} suites)")
    return EXIT_OK


def _evaluate(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from .config import parse_config_text, read_config_text
    from .offline import check_writable, evaluate_file
    from .pipeline import Pipeline
    from .summary import render_summary

    if args.fail_under is not None and not 0.0 <= args.fail_under <= 1.0:
        raise ConfigError(f"--fail-under must be within [0, 1], got {args.fail_under}")
    if args.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    if args.processes < 0:
        raise ConfigError("--processes must be 0 or more")
    config_text = read_config_text(args.config)
    _, suites = parse_config_text(config_text, file=str(args.config))
    if not args.input.is_file():
        raise ConfigError(f"--input {args.input}: no such file")
    if args.max_judge_error_rate is not None and not 0.0 <= args.max_judge_error_rate <= 1.0:
        raise ConfigError(f"--max-judge-error-rate must be within [0, 1], got {args.max_judge_error_rate}")
    deadletter = args.deadletter or args.output.with_name(args.output.stem + ".deadletter.jsonl")
    for option, path in (("--output", args.output), ("--deadletter", deadletter)):
        if (why := check_writable(path)) is not None:
            raise UsageError(f"{option} {path}: cannot write ({why})")
    decoder = None if args.input_topic is None else _line_decoder(suites.inputs, args.input_topic, settings)
    size = args.input.stat().st_size
    with Progress(TextColumn("evaluating {task.fields[done]} events"), BarColumn(), DownloadColumn(),
                  TimeRemainingColumn(), console=console, disable=args.quiet, transient=True) as progress:  # fmt: skip
        task = progress.add_task("evaluate", total=size, done=0)
        summary = asyncio.run(
            evaluate_file(
                Pipeline(suites, max_event_bytes=settings.max_event_bytes, max_event_depth=settings.max_event_depth),
                args.input, args.output, deadletter, concurrency=args.concurrency, processes=args.processes,
                config_text=config_text, config_file=str(args.config),
                on_progress=lambda done, read: progress.update(task, completed=read, done=done), decoder=decoder,
            )
        )  # fmt: skip
    if not args.quiet:
        render_summary(summary, console, title=f"streameval evaluate {args.input.name}")
    console.print(f"results: {args.output}  dead letters: {deadletter}", highlight=False)
    failed = False
    if args.fail_under is not None and summary.mean < args.fail_under:
        console.print(f"[bold red]FAIL[/] mean score {summary.mean:.4f} is under {args.fail_under:g}")
        failed = True
    dead = sum(summary.dead_letters.values())
    if args.max_dead_letters is not None and dead > args.max_dead_letters:
        console.print(f"[bold red]FAIL[/] {dead} dead letters exceed --max-dead-letters {args.max_dead_letters}")
        failed = True
    for name, rate in sorted(summary.judge_error_rates().items()):
        if args.max_judge_error_rate is not None and rate > args.max_judge_error_rate:
            console.print(f"[bold red]FAIL[/] judge {name} failed {rate:.1%} of its answers, over "
                          f"--max-judge-error-rate {args.max_judge_error_rate:g}", highlight=False)  # fmt: skip
            failed = True
    return EXIT_FAILED if failed else EXIT_OK


def _line_decoder(inputs: Sequence[InputConfig], topic: str, settings: Settings) -> Decoder:
    """The decoder of the suite file's input for ``topic``, for a file with one message per line."""
    from .inputs import build_decoder

    spec = next((s for s in inputs if s.topic == topic), None)
    if spec is None:
        known = ", ".join(s.topic for s in inputs) or "none"
        raise ConfigError(f"--input-topic {topic}: the suite file has no input for that topic (inputs: {known})")
    if spec.format == "otlp_proto":
        raise ConfigError(f"--input-topic {topic}: otlp_proto is binary and has no line form; "
                          "give a file of OTLP/JSON exports, one per line, under an otlp_json input")  # fmt: skip
    return build_decoder(spec, max_depth=settings.max_event_depth)


async def _produce(args: argparse.Namespace, settings: Settings, topic: str, console: Console) -> int:
    from .connect_check import check_kafka
    from .kafka_io import produce
    from .kafka_security import KafkaSecurity
    from .offline import iter_lines

    handle = sys.stdin.buffer if str(args.file) == "-" else args.file.open("rb")
    try:
        security = KafkaSecurity.from_settings(settings)
        await check_kafka(settings.kafka_bootstrap_servers, security)  # a wrong password: one line, not retries
        sent = await produce(settings.kafka_bootstrap_servers, topic, (raw for _, raw in iter_lines(handle)),
                             security=security)  # fmt: skip
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()
    console.print(f"sent {sent} messages to {topic}")
    return EXIT_OK


async def _tail(args: argparse.Namespace, settings: Settings) -> int:
    from .connect_check import check_kafka
    from .kafka_io import tail
    from .kafka_security import KafkaSecurity

    count = 0
    out = sys.stdout.buffer
    security = KafkaSecurity.from_settings(settings)
    await check_kafka(settings.kafka_bootstrap_servers, security)
    async for record in tail(settings.kafka_bootstrap_servers, [args.topic], from_beginning=not args.latest,
                             security=security):  # fmt: skip
        out.write(record.value + b"\n")
        out.flush()
        count += 1
        if args.limit is not None and count >= args.limit:
            break
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
