"""The ``streameval`` command line (the parser is in :mod:`._cliargs`).

Exit codes: 0 success; 1 a gate failed (``evaluate --fail-under``) or the demo did not finish, or
Kafka/Redis refused the connection for good (wrong credential, TLS mismatch: one line); 2 bad usage or
configuration (the message names the file and field); 3 a broker or Redis could not be reached (one
line, no traceback); 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, cast

from rich.console import Console

from ._cliargs import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, build_parser
from ._logs import AIOKAFKA_LOGGERS, install_repeat_summary
from ._util import frozen_heap
from .errors import BrokerUnavailable, ConfigError, ConnectFailed, StoreUnavailable, UsageError

if TYPE_CHECKING:
    from .config import LoadedConfig
    from .inputs import Decoder, InputConfig
    from .settings import Settings

#: produce and tail try the broker once: a command line says at once that nothing answered
CLI_CONNECT_TIMEOUT_S = 0.0

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_UNAVAILABLE", "EXIT_USAGE", "main"]


def _parser() -> argparse.ArgumentParser:
    return build_parser()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["judge-sim"]:  # its own parser (streameval.judges.sim) takes every option
        from .judges.sim import main as judge_sim

        return judge_sim(argv[1:])
    args = _parser().parse_args(argv)
    # results on stdout, progress and diagnostics on stderr, in every command (`check F | grep` works)
    console = Console(stderr=True, soft_wrap=True, width=None if sys.stderr.isatty() else 120)
    out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 120)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_repeat_summary(
        (*AIOKAFKA_LOGGERS, "streameval.store")
    )  # an outage: one line, then a summary every 30 s, not an ERROR per attempt
    try:
        return _run(args, console, out)
    except (ConfigError, UsageError) as exc:
        _error(console, exc)
        return EXIT_USAGE
    except ConnectFailed as exc:  # one line naming the server, the mechanism and the cause
        _error(console, exc)
        return EXIT_FAILED
    except (BrokerUnavailable, StoreUnavailable) as exc:
        _error(console, exc)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        console.print("interrupted")
        return EXIT_INTERRUPTED


def _redact(args: argparse.Namespace, console: Console) -> int:
    """``streameval redact``: what a text becomes under the suite file's redaction (docs/redact.md)."""
    from .config import load_config
    from .features.redact import redact_command

    config, _ = load_config(args.config)
    text = sys.stdin.read() if args.text == "-" else args.text
    own = {s.name: s.redact for s in config.suites} | {s.name: s.redact for s in config.sessions}
    out, counts = redact_command(config.redact, own, args.suite, text)
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    found = ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items())) or "nothing"
    console.print(f"redacted: {found}", highlight=False, markup=False)
    return EXIT_OK


def _error(console: Console, exc: Exception) -> None:
    console.print("[bold red]error:[/] ", end="", markup=True)
    console.print(str(exc), highlight=False, markup=False)


def _run(args: argparse.Namespace, console: Console, out: Console) -> int:
    from .settings import load_settings

    if args.command == "worker":
        overrides = {
            k: v
            for k, v in {
                "config": args.config and str(args.config),
                "kafka_bootstrap_servers": args.bootstrap,
                "redis_url": args.redis_url,
                "app_id": args.app_id,
                "shadow": args.shadow and str(args.shadow),
            }.items()
            if v
        }
        if args.shadow_sample is not None:
            overrides["shadow_sample"] = args.shadow_sample
        settings = load_settings(**overrides)
        if not settings.config:
            raise UsageError("no suite config: pass --config FILE or set STREAMEVAL_CONFIG")
        if not settings.redis_url:
            raise UsageError(
                "no Redis: set REDIS_URL or pass --redis-url (the worker keeps idempotency and "
                "aggregates there); `streameval up` starts one for you"
            )
        from streameval.agents.worker import run_worker

        from . import quality_metrics

        quality_metrics.configure(max_models=settings.metrics_max_models)
        run_worker(settings)
        return EXIT_OK
    if args.command == "up":
        from .up import run_up

        return run_up(args, console)
    if args.command == "api":
        return _api(args, load_settings(**({"redis_url": args.redis_url} if args.redis_url else {})))
    if args.command == "guard":
        return _guard(args, load_settings(**({"config": str(args.config)} if args.config else {})))
    if args.command == "check-one":
        return _check_one(args, console)
    if args.command == "demo":
        from .demo import run_demo

        return asyncio.run(run_demo(args, console, out))
    if args.command == "evaluate":
        limit = {"max_event_bytes": args.max_event_bytes} if args.max_event_bytes is not None else {}
        return _evaluate(args, load_settings(**limit), console, out)
    if args.command == "check":
        return _check(args.config, out)
    if args.command == "redact":
        return _redact(args, console)
    if args.command == "compare":
        return _compare(args, out)
    if args.command == "backfill":
        overrides = {
            k: v
            for k, v in {"kafka_bootstrap_servers": args.bootstrap, "redis_url": args.redis_url}.items()
            if v
        }
        return _backfill(args, load_settings(**overrides), console, out)
    if args.command == "notify":
        return _notify(args, load_settings)
    if args.command == "dead-letter-raw":
        return asyncio.run(
            _dead_letter_raw(
                args, load_settings(**({"redis_url": args.redis_url} if args.redis_url else {})), console, out
            )
        )
    if args.command == "migrate":
        return asyncio.run(
            _migrate(args, load_settings(**({"redis_url": args.redis_url} if args.redis_url else {})), out)
        )
    if args.command == "review":
        return asyncio.run(
            _review(args, load_settings(**({"redis_url": args.redis_url} if args.redis_url else {})), console)
        )
    settings = load_settings(**({"kafka_bootstrap_servers": args.bootstrap} if args.bootstrap else {}))
    # produce and tail say in one line when the broker is not there; aiokafka's per-attempt errors add nothing
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    if args.command == "produce":
        return asyncio.run(_produce(args, settings, args.topic or settings.topic_requests, out))
    if args.command == "tail":
        return asyncio.run(_tail(args, settings))
    raise AssertionError(f"unhandled command {args.command}")


def _notify(args: argparse.Namespace, load: Callable[..., Settings]) -> int:
    from .features.notify._program import run_test, run_until_signal

    overrides = {
        "kafka_bootstrap_servers": args.bootstrap,
        "redis_url": args.redis_url,
        "config": args.config,
    }
    settings = load(**{k: str(v) for k, v in overrides.items() if v})
    if not settings.config:
        raise UsageError("no suite config: pass --config FILE or set STREAMEVAL_CONFIG")
    if args.action == "test":
        return run_test(settings, settings.config, args.channel)
    return run_until_signal(settings, settings.config, port=args.port)


def _api(args: argparse.Namespace, settings: Settings) -> int:
    from .api import DEFAULT_API_PORT, load_api_settings, serve_api

    if not settings.redis_url:
        raise UsageError("no Redis: set REDIS_URL or pass --redis-url (the registry is stored there)")
    from .connect_check import check_redis_settings
    from .redis_security import redis_options

    api = load_api_settings()
    asyncio.run(check_redis_settings(settings.redis_url, redis_options(settings)))  # wrong password: one line
    port = (
        args.port
        if args.port is not None
        else (api.web_port if api.web_port is not None else DEFAULT_API_PORT)
    )
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be within 0..65535, got {port}")
    from .api import WebFeature
    from .features.web import dashboard_features
    from .keyspace import Client

    def features(client: Client) -> list[WebFeature]:
        out = dashboard_features(settings.compare_ttl_s)
        if api.review_page:  # the review page (docs/feedback.md): only when asked for
            from .features.review_page.web import open_review_feature

            out.append(open_review_feature(client, settings, None))
        return out

    asyncio.run(serve_api(settings, api, host=args.host or api.web_host, port=port, features=features))
    return EXIT_OK


def _guard(args: argparse.Namespace, settings: Settings) -> int:
    """``streameval guard``: the check endpoint alone (docs/guard.md)."""
    from .api import DEFAULT_API_PORT, load_api_settings
    from .config import load_config
    from .features.guard import guard_section
    from .features.guard._serve import serve_guard

    if not settings.config:
        raise UsageError("no suite config: pass --config FILE or set STREAMEVAL_CONFIG")
    api = load_api_settings()
    _, suites = load_config(settings.config)
    if not any(guard_section(s) is not None for s in suites.all):
        raise UsageError(
            f"{settings.config}: no suite has a guard: section (docs/guard.md); nothing to serve"
        )
    port = (
        args.port
        if args.port is not None
        else (api.web_port if api.web_port is not None else DEFAULT_API_PORT)
    )
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be within 0..65535, got {port}")
    workers = args.workers if args.workers is not None else api.guard_workers
    if workers < 0:
        raise UsageError(f"--workers must be 0 (one per CPU) or more, got {workers}")
    return serve_guard(suites, settings, api, host=args.host or api.web_host, port=port, workers=workers)


def _check_one(args: argparse.Namespace, console: Console) -> int:
    """``streameval check-one``: the event on stdin to a guard server; its answer on stdout."""
    import httpx
    import orjson

    from .api import load_api_settings
    from .guard_client import CheckRefused, GuardClient

    raw = sys.stdin.buffer.read().strip()
    try:
        with GuardClient(args.url, token=load_api_settings().token(), timeout=args.timeout) as client:
            answer = client.check_event(raw, suite=args.suite)
    except CheckRefused as exc:
        _error(console, exc)
        return EXIT_USAGE
    except httpx.HTTPError as exc:
        _error(console, UsageError(f"no answer from {args.url}: {type(exc).__name__}: {exc}"))
        return EXIT_UNAVAILABLE
    sys.stdout.write(orjson.dumps(answer.raw).decode() + "\n")
    return EXIT_FAILED if answer.decision == "block" else EXIT_OK


def _check(path: Path, console: Console) -> int:
    """The suites of a valid file, one line each, on ``console`` (stdout); a bad file raises ``ConfigError``."""
    from .config import load_config

    _, suites = load_config(path)
    for suite in suites.all:
        how = (
            "default"
            if suite.is_default
            else (suite.config.match.model_dump(exclude_none=True) if suite.config.match else "explicit only")
        )
        names = ", ".join(f"{b.name}×{b.weight:g}" for b in suite.evaluators)
        label = f" ({suite.label})" if suite.label else ""
        console.print(
            f"{suite.name}: version {suite.version}{label}; match {how}; threshold {suite.config.threshold:g}; "
            f"{names}",
            highlight=False,
        )
    for spec in suites.inputs:
        console.print(f"input {spec.topic}: {spec.format}", highlight=False)
    for session in suites.sessions:
        c = session.config
        names = ", ".join(f"{b.name}×{b.weight:g}" for b in session.suite.evaluators)
        console.print(
            f"session {c.name}: key {c.key}; gap {c.gap_s:g} s; threshold {c.threshold:g}; {names}",
            highlight=False,
        )
    sessions = f", {len(suites.sessions)} sessions" if suites.sessions else ""
    console.print(f"{path}: OK ({len(suites.all)} suites{sessions})")
    return EXIT_OK


def _backfill_time(option: str, raw: str | None) -> int | None:
    """A --from / --to value (RFC 3339 or epoch seconds) as epoch milliseconds."""
    from .models import parse_time

    if raw is None:
        return None
    try:
        seconds = float(raw) if raw.replace(".", "", 1).isdigit() else parse_time(raw)
    except ValueError:
        raise UsageError(f"{option} {raw!r}: not RFC 3339 (2026-11-25T10:00:00Z) or epoch seconds") from None
    return int(seconds * 1000)


def _backfill(args: argparse.Namespace, settings: Settings, console: Console, out: Console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from .backfill import run_backfill
    from .config import load_config

    since, until = _backfill_time("--from", args.since), _backfill_time("--to", args.until)
    assert since is not None
    if until is not None and until <= since:
        raise UsageError("--to must be after --from")
    if not 0.0 < args.sample <= 1.0:
        raise UsageError(f"--sample must be within (0, 1], got {args.sample}")
    if args.max_cost is not None and args.max_cost <= 0:
        raise UsageError("--max-cost must be positive")
    if args.batch < 1:
        raise UsageError("--batch must be at least 1")
    if not settings.redis_url:
        raise UsageError("no Redis: set REDIS_URL or pass --redis-url (a backfill records its figures there)")
    _, suites = load_config(args.config)
    with Progress(
        TextColumn("backfill"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("offsets"),
        TimeRemainingColumn(),
        TextColumn("cost {task.fields[cost]}"),
        console=console,
        disable=args.quiet or args.dry_run,
        transient=True,
    ) as progress:
        task = progress.add_task("backfill", total=None, cost="0")

        def advance(done: int, total: int, cost: float) -> None:
            progress.update(task, completed=done, total=total, cost=f"{cost:.4f}")

        report = asyncio.run(
            run_backfill(
                settings,
                suites,
                since_ms=since,
                until_ms=until,
                sample=args.sample,
                max_cost=args.max_cost,
                output_topic=args.output_topic,
                dry_run=args.dry_run,
                batch=args.batch,
                config_file=str(args.config),
                on_progress=advance,
            )
        )
    versions = ", ".join(f"{name} {version}" for name, version in sorted(report.versions.items()))
    if args.dry_run:
        cost = "no priced judges" if report.estimated_cost is None else f"{report.estimated_cost:.4f}"
        out.print(
            f"dry run, {versions}: {report.results} events to evaluate ({report.in_range} in range, "
            f"{report.unsampled} outside the sample, {report.dropped} not evaluable) of {report.offsets} "
            f"offsets read; estimated judge cost {cost}",
            highlight=False,
        )
    else:
        out.print(
            f"backfill {report.group}, {versions}: {report.results} results published "
            f"({report.counted} counted now), {report.in_range} events in range, {report.unsampled} outside "
            f"the sample, {report.dropped} not evaluable, {report.offsets} offsets read in "
            f"{report.seconds:.1f} s; judge cost {report.cost:.4f}",
            highlight=False,
        )
        if report.stopped == "max_cost":
            console.print(
                f"stopped: the judge cost reached --max-cost {args.max_cost:g}; run again with a higher "
                "--max-cost to go on",
                highlight=False,
            )
    if report.lost:
        console.print(
            f"[yellow]{report.lost} offsets were removed by the topic's retention before they were read[/]"
        )
    return EXIT_OK


def _compare(args: argparse.Namespace, console: Console) -> int:
    import orjson
    from rich.table import Table

    from .compare_offline import compare_result_files, compare_suite_files

    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    for path in (args.a, args.b, *((args.input,) if args.input else ())):
        if not path.is_file():
            raise UsageError(f"{path}: no such file")
    if args.input is not None:
        reports = compare_suite_files(
            args.a, args.b, args.input, concurrency=args.concurrency, dimension=args.dimension
        )
    elif args.dimension is not None:
        raise UsageError("--dimension needs --input: a result file does not carry the events' metadata")
    else:
        reports = compare_result_files(args.a, args.b)
    if args.json:
        sys.stdout.write(orjson.dumps(reports, option=orjson.OPT_INDENT_2).decode() + "\n")
        return EXIT_OK

    def num(value: float | None, spec: str = ".4f") -> str:
        return "-" if value is None else format(value, spec)

    table = Table(title=f"{args.b.name} against {args.a.name}")
    for column in (
        "model",
        "suite",
        "versions a→b",
        "n",
        "mean a",
        "mean b",
        "diff [95 % CI]",
        "pass→fail",
        "fail→pass",
        "κ",
        "Pearson",
        "Spearman",
    ):
        table.add_column(column)
    for r in reports:
        diff = (
            "-"
            if r["empty"]
            else f"{num(r['mean_diff'], '+.4f')} [{num(r['ci_low'], '+.4f')}, {num(r['ci_high'], '+.4f')}]"
        )
        table.add_row(
            r["model"],
            r["suite"],
            f"{r['a'] or '-'}→{r['b'] or '-'}",
            str(r["n"]),
            num(r.get("mean_a")),
            num(r.get("mean_b")),
            diff,
            str(r["pass_to_fail"]),
            str(r["fail_to_pass"]),
            num(r["kappa"], ".3f"),
            num(r["pearson"], ".3f"),
            num(r["spearman"], ".3f"),
        )
    console.print(table)
    for r in reports:
        for part in r.get("slices", ()):
            diff = "-" if part["empty"] else f"{num(part['mean_diff'], '+.4f')}"
            console.print(
                f"{r['model']} / {r['suite']} ({r['dimension']} = {part['value']}): n {part['n']}, "
                f"diff {diff}, pass→fail {part['pass_to_fail']}, fail→pass {part['fail_to_pass']}",
                highlight=False,
            )
    for r in reports:
        where = f"{r['model']} / {r['suite']}"
        if r["empty"]:
            console.print(f"{where}: empty comparison: {r['reason']}", highlight=False)
        for kind in ("pass_to_fail", "fail_to_pass"):
            if r[kind + "_ids"]:
                console.print(
                    f"{where} {kind.replace('_to_', '→')}: {', '.join(r[kind + '_ids'])}", highlight=False
                )
        for name, d in sorted(r["evaluators"].items()):
            if d.get("n"):
                console.print(
                    f"{where} evaluator {name}: {d['mean_a']:.4f} → {d['mean_b']:.4f} "
                    f"({d['mean_diff']:+.4f}, n {d['n']})",
                    highlight=False,
                )
    return EXIT_OK


def _evaluate(args: argparse.Namespace, settings: Settings, console: Console, out: Console) -> int:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from .config import parse_config_text, read_config_text
    from .features.setup import annotators
    from .offline import check_writable, evaluate_file
    from .pipeline import Pipeline
    from .summary import render_summary

    if args.fail_under is not None and not 0.0 <= args.fail_under <= 1.0:
        raise UsageError(f"--fail-under must be within [0, 1], got {args.fail_under}")
    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if args.processes < 0:
        raise UsageError("--processes must be 0 or more")
    config_text = read_config_text(args.config)
    _, suites = parse_config_text(config_text, file=str(args.config))
    if args.labels is not None and not args.labels.is_file():
        raise UsageError(f"--labels {args.labels}: no such file")
    if args.min_human_kappa is not None and args.labels is None:
        raise UsageError("--min-human-kappa needs --labels FILE")
    if args.min_human_kappa is not None and not -1.0 <= args.min_human_kappa <= 1.0:
        raise UsageError(f"--min-human-kappa must be within [-1, 1], got {args.min_human_kappa}")
    if not args.input.is_file():
        raise UsageError(f"--input {args.input}: no such file")
    if args.max_judge_error_rate is not None and not 0.0 <= args.max_judge_error_rate <= 1.0:
        raise UsageError(f"--max-judge-error-rate must be within [0, 1], got {args.max_judge_error_rate}")
    deadletter = args.deadletter or args.output.with_name(args.output.stem + ".deadletter.jsonl")
    sessions = None
    if suites.sessions:
        sessions = args.sessions or args.output.with_name(args.output.stem + ".sessions.jsonl")
    for option, path in (
        ("--output", args.output),
        ("--deadletter", deadletter),
        *((("--sessions", sessions),) if sessions is not None else ()),
    ):
        if (why := check_writable(path)) is not None:
            raise UsageError(f"{option} {path}: cannot write ({why})")
    decoder = None
    if args.input_topic is not None:
        decoder = _line_decoder(suites.inputs, args.input_topic, settings, steps=suites.assembles_spans)
    size = args.input.stat().st_size
    with Progress(
        TextColumn("evaluating {task.fields[done]} events"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=args.quiet,
        transient=True,
    ) as progress:
        task = progress.add_task("evaluate", total=size, done=0)
        with frozen_heap():  # configured and loaded: full collections skip all that from here
            summary = asyncio.run(
                evaluate_file(
                    Pipeline(
                        suites,
                        max_event_bytes=settings.max_event_bytes,
                        max_event_depth=settings.max_event_depth,
                        annotators=annotators(
                            suites
                        ),  # the sessions' turns, when the suite file has sessions
                    ),
                    args.input,
                    args.output,
                    deadletter,
                    concurrency=args.concurrency,
                    processes=args.processes,
                    config_text=config_text,
                    config_file=str(args.config),
                    on_progress=lambda done, read: progress.update(task, completed=read, done=done),
                    decoder=decoder,
                    sessions_path=sessions,
                )
            )
    if not args.quiet:
        render_summary(summary, out, title=f"streameval evaluate {args.input.name}")
    out.print(
        f"results: {args.output}  dead letters: {deadletter}"
        + (f"  sessions: {sessions}" if sessions is not None else ""),
        highlight=False,
    )
    failed = False
    if args.fail_under is not None and summary.mean < args.fail_under:
        console.print(f"[bold red]FAIL[/] mean score {summary.mean:.4f} is under {args.fail_under:g}")
        failed = True
    dead = sum(summary.dead_letters.values())
    if args.max_dead_letters is not None and dead > args.max_dead_letters:
        console.print(
            f"[bold red]FAIL[/] {dead} dead letters exceed --max-dead-letters {args.max_dead_letters}"
        )
        failed = True
    for name, rate in sorted(summary.judge_error_rates().items()):
        if args.max_judge_error_rate is not None and rate > args.max_judge_error_rate:
            console.print(
                f"[bold red]FAIL[/] judge {name} failed {rate:.1%} of its answers, over "
                f"--max-judge-error-rate {args.max_judge_error_rate:g}",
                highlight=False,
            )
            failed = True
    if args.labels is not None:
        failed = _human_agreement(args, suites, settings, console, out) or failed
    return EXIT_FAILED if failed else EXIT_OK


def _human_agreement(
    args: argparse.Namespace, suites: LoadedConfig, settings: Settings, console: Console, out: Console
) -> bool:
    """``--labels``: join the labels to the results just written, print the table; True when the gate fails."""
    from .errors import EventError
    from .features.labels import FeedbackDecoder, calibration, human_agreement, join_in_memory
    from .keyspace import Keys
    from .models import GradedResult
    from .summary import render_agreement

    results = [
        GradedResult.model_validate_json(line) for line in args.output.read_bytes().splitlines() if line
    ]
    decoder = FeedbackDecoder(suites.feedback, max_depth=settings.max_event_depth)
    labels, bad = [], 0
    for n, line in enumerate(args.labels.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            labels.append(decoder.decode(line))
        except EventError as exc:
            bad += 1
            console.print(f"{args.labels}:{n}: not a label ({exc.kind}): {exc.reason}", highlight=False)
    rows, layouts, unmatched = join_in_memory(results, labels)
    for _, why in unmatched[:20]:
        console.print(f"unmatched label: {why}", highlight=False)
    figures = {
        Keys.split_pair(pair)[:2]: human_agreement(pair_rows, layouts) for pair, pair_rows in rows.items()
    }
    if not args.quiet:
        render_agreement(figures, out, unmatched=len(unmatched) + bad)
        for pair, pair_rows in sorted(rows.items()):
            tuned = calibration(pair_rows, layouts)
            if tuned.maps:  # what `judge: {calibrate: true, calibration: ...}` would take (docs/feedback.md)
                model, suite = Keys.split_pair(pair)[:2]
                out.print(
                    f"calibration for {model} / {suite} (suggested weights, isotonic maps):", highlight=False
                )
                for judge, entry in tuned.as_dict().items():
                    weight = "-" if entry["weight"] is None else f"{entry['weight']:.3f}"
                    points = ", ".join(f"[{x:.4g}, {y:.4g}]" for x, y in entry["map"])
                    out.print(f"  {judge}: n {entry['n']}, weight {weight}, map [{points}]", highlight=False)
    failed = False
    if args.min_human_kappa is not None:
        for (model, suite), human in sorted(figures.items()):
            kappa = human.lowest_kappa() if human is not None else None
            if kappa is not None and kappa < args.min_human_kappa:
                console.print(
                    f"[bold red]FAIL[/] {model} / {suite}: Cohen's kappa with people {kappa:.3f} is "
                    f"under --min-human-kappa {args.min_human_kappa:g}",
                    highlight=False,
                )
                failed = True
        if not any(h is not None and h.lowest_kappa() is not None for h in figures.values()):
            console.print(
                "[bold red]FAIL[/] --min-human-kappa: no kappa could be computed from the labels "
                f"({len(labels)} read, {len(unmatched)} unmatched)",
                highlight=False,
            )
            failed = True
    return failed


def _line_decoder(
    inputs: Sequence[InputConfig], topic: str, settings: Settings, *, steps: bool = False
) -> Decoder:
    """The decoder of the suite file's input for ``topic``, for a file with one message per line."""
    from .inputs import build_decoder

    spec = next((s for s in inputs if s.topic == topic), None)
    if spec is None:
        known = ", ".join(s.topic for s in inputs) or "none"
        raise ConfigError(
            f"--input-topic {topic}: the suite file has no input for that topic (inputs: {known})"
        )
    if spec.format == "otlp_proto":
        raise ConfigError(
            f"--input-topic {topic}: otlp_proto is binary and has no line form; "
            "give a file of OTLP/JSON exports, one per line, under an otlp_json input"
        )
    return build_decoder(spec, max_depth=settings.max_event_depth, steps=steps)


async def _dead_letter_raw(
    args: argparse.Namespace, settings: Settings, console: Console, out: Console
) -> int:
    import redis.asyncio as aioredis

    from .deadletters import raw_key

    if not settings.redis_url:
        raise UsageError("no Redis: set REDIS_URL or pass --redis-url")
    key = args.key if ":" in args.key else raw_key(settings.redis_prefix, args.key)
    client = aioredis.Redis.from_url(settings.redis_url)
    try:
        raw = cast("bytes | None", await client.get(key))  # a client that does not decode: bytes
    finally:
        await client.aclose()
    if raw is None:
        console.print(f"[bold red]error:[/] {key} is not in Redis (expired, never kept, or another prefix)")
        return EXIT_FAILED
    if args.output is None:
        sys.stdout.buffer.write(raw)
        sys.stdout.buffer.flush()
    else:
        args.output.write_bytes(raw)
        out.print(f"wrote {len(raw)} bytes to {args.output}", highlight=False)
    return EXIT_OK


async def _migrate(args: argparse.Namespace, settings: Settings, out: Console) -> int:
    """``streameval migrate marks``: the count moved on stdout (errors on stderr, by the caller)."""
    import time

    from .keyspace import Keys, connect
    from .migrate import migrate_marks
    from .redis_security import redis_options

    if not settings.redis_url:
        raise UsageError("no Redis: set REDIS_URL or pass --redis-url")
    client = connect(settings.redis_url, **redis_options(settings))
    try:
        moved = await migrate_marks(
            client, Keys(settings.redis_prefix), seen_ttl_s=settings.seen_ttl_s, now=time.time()
        )
    finally:
        await client.aclose()
    out.print(
        f"moved {moved} idempotency marks of the previous layout into the digest buckets", highlight=False
    )
    return EXIT_OK


async def _review(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """``streameval review export``: the review page's labelled items on stdout."""
    from . import keyspace
    from .features.review_page import write_export
    from .redis_security import redis_options

    if not settings.redis_url:
        raise UsageError(
            "no Redis: set REDIS_URL or pass --redis-url (the review page keeps its items there)"
        )
    client = keyspace.connect(settings.redis_url, max_connections=2, **redis_options(settings))
    try:
        n = await write_export(
            client, settings.redis_prefix, args.format, sys.stdout.buffer, model=args.model, suite=args.suite
        )
    finally:
        await client.aclose()
    console.print(f"{n} {args.format} exported", highlight=False)
    return EXIT_OK


async def _produce(args: argparse.Namespace, settings: Settings, topic: str, console: Console) -> int:
    from .connect_check import check_kafka
    from .kafka_io import produce
    from .kafka_security import KafkaSecurity
    from .offline import iter_lines

    if str(args.file) != "-" and not args.file.is_file():
        raise UsageError(f"{args.file}: no such file")
    security = KafkaSecurity.from_settings(settings)
    # one try: a missing broker or a wrong password is one line at once, not retries (CLI_CONNECT_TIMEOUT_S)
    await check_kafka(settings.kafka_bootstrap_servers, security, timeout=CLI_CONNECT_TIMEOUT_S)
    bootstrap = settings.kafka_bootstrap_servers
    if str(args.file) == "-":
        sent = await produce(bootstrap, topic, _lines_as_they_come(sys.stdin.buffer), security=security)
    else:
        with args.file.open("rb") as handle:
            sent = await produce(bootstrap, topic, (raw for _, raw in iter_lines(handle)), security=security)
    console.print(f"sent {sent} messages to {topic}")
    return EXIT_OK


async def _lines_as_they_come(handle: BinaryIO) -> AsyncIterator[bytes]:
    """Non-blank lines of ``handle``, each yielded as soon as it is read (stdin of a live pipe).

    A daemon thread does the blocking reads, so Ctrl-C is not held up by a read in progress.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=1024)

    def read() -> None:
        try:
            for line in iter(handle.readline, b""):
                asyncio.run_coroutine_threadsafe(queue.put(line), loop).result()
        finally:
            asyncio.run_coroutine_threadsafe(queue.put(None), loop)

    threading.Thread(target=read, name="stdin-reader", daemon=True).start()
    while (line := await queue.get()) is not None:
        raw = line.rstrip(b"\r\n")
        if raw.strip():
            yield raw


async def _tail(args: argparse.Namespace, settings: Settings) -> int:
    from .connect_check import check_kafka
    from .kafka_io import tail
    from .kafka_security import KafkaSecurity

    count = 0
    out = sys.stdout.buffer
    security = KafkaSecurity.from_settings(settings)
    await check_kafka(settings.kafka_bootstrap_servers, security, timeout=CLI_CONNECT_TIMEOUT_S)
    async for record in tail(
        settings.kafka_bootstrap_servers, [args.topic], from_beginning=not args.latest, security=security
    ):
        out.write(record.value + b"\n")
        out.flush()
        count += 1
        if args.limit is not None and count >= args.limit:
            break
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
