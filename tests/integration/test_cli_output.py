"""Every command writes its results to stdout and its progress and diagnostics to stderr.

One case per command of the parser (a new command without a case fails), each run as a user runs it:
a process with its two streams read apart, on the real broker and Redis where the command needs them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
import pytest
import redis

from streameval.cli import _parser
from streameval.deadletters import raw_key
from streameval.embedded import EmbeddedBroker, free_port
from streameval.kafka_io import produce

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SUITES = EXAMPLES / "suites.yaml"


@dataclass
class Ctx:
    broker: EmbeddedBroker
    redis_url: str
    prefix: str
    topics: dict[str, str]
    tmp: Path

    def env(self, **extra: str) -> dict[str, str]:
        if extra.pop(
            "own_servers", ""
        ):  # demo and up start their own broker (and Redis): the bare environment
            return {**os.environ, "STREAMEVAL_LOG_LEVEL": "info", **extra}
        return {
            **os.environ,
            "KAFKA_BOOTSTRAP_SERVERS": self.broker.bootstrap,
            "REDIS_URL": self.redis_url,
            "STREAMEVAL_REDIS_PREFIX": self.prefix,
            "STREAMEVAL_TOPIC_REQUESTS": self.topics["requests"],
            "STREAMEVAL_LOG_LEVEL": "info",
            **extra,
        }

    def events(self, n: int) -> Path:
        path = self.tmp / f"events-{n}.jsonl"
        lines = (EXAMPLES / "events.jsonl").read_bytes().splitlines()[:n]
        path.write_bytes(b"\n".join(lines) + b"\n")
        return path


@dataclass
class Ran:
    """What a command printed, and what each stream must (or must not) hold."""

    code: int | None
    out: str
    err: str
    out_has: list[str] = field(default_factory=list)
    err_has: list[str] = field(default_factory=list)
    code_is: int | None = 0


def run(ctx: Ctx, *args: str, timeout: float = 120, **env: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "streameval", *args],
        capture_output=True,
        timeout=timeout,
        env=ctx.env(**env),
        stdin=subprocess.DEVNULL,
    )
    return done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")


def serve(
    ctx: Ctx, args: list[str], ready: Callable[[Path], bool], stop: int, **env: str
) -> tuple[int, str, str]:
    """A long-running command: started, stopped by ``stop`` once ``ready(stdout file)``, its streams read."""
    out_path, err_path = ctx.tmp / f"{args[0]}.out", ctx.tmp / f"{args[0]}.err"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streameval", *args], stdout=out, stderr=err, env=ctx.env(**env)
        )
        try:
            deadline = time.monotonic() + 180
            while not ready(out_path):
                assert proc.poll() is None, err_path.read_text(errors="replace")[-3000:]
                assert time.monotonic() < deadline, err_path.read_text(errors="replace")[-3000:]
                time.sleep(0.2)
            proc.send_signal(stop)
            code = proc.wait(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return code, out_path.read_text(errors="replace"), err_path.read_text(errors="replace")


def answers(port: int) -> Callable[[Path], bool]:
    def ready(_: Path) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    return ready


def case_check(ctx: Ctx) -> Ran:
    code, out, err = run(ctx, "check", str(SUITES))
    return Ran(code, out, err, out_has=["qa: version ", "OK (5 suites)"])


def case_evaluate(ctx: Ctx) -> Ran:
    result = ctx.tmp / "results.jsonl"
    code, out, err = run(
        ctx, "evaluate", "--config", str(SUITES), "--input", str(ctx.events(30)), "--output", str(result),
        "--fail-under", "0.99",
    )  # fmt: skip
    assert len(result.read_bytes().splitlines()) > 20
    # the summary is the result; the failed gate is a diagnostic (and the exit code)
    return Ran(
        code, out, err, out_has=["streameval evaluate", f"results: {result}"], err_has=["FAIL"], code_is=1
    )


def case_compare(ctx: Ctx) -> Ran:
    strict = ctx.tmp / "strict.yaml"
    strict.write_text(SUITES.read_text().replace("threshold: 0.6", "threshold: 0.9"))
    code, out, err = run(ctx, "compare", str(SUITES), str(strict), "--input", str(ctx.events(30)))
    return Ran(code, out, err, out_has=["strict.yaml against suites.yaml", "pass→fail"])


def case_produce(ctx: Ctx) -> Ran:
    code, out, err = run(ctx, "produce", str(ctx.events(3)), "--topic", ctx.topics["requests"])
    return Ran(code, out, err, out_has=[f"sent 3 messages to {ctx.topics['requests']}"])


def case_tail(ctx: Ctx) -> Ran:
    topic = ctx.topics["results"]
    asyncio.run(produce(ctx.broker.bootstrap, topic, [b'{"n": 1}', b'{"n": 2}']))
    code, out, err = run(ctx, "tail", "--topic", topic, "--limit", "2")
    # sorted: the lines carry no key, so they may land on different partitions, read in partition order
    assert sorted(out.splitlines()) == ['{"n": 1}', '{"n": 2}']
    return Ran(code, out, err)


def case_backfill(ctx: Ctx) -> Ran:
    asyncio.run(
        produce(ctx.broker.bootstrap, ctx.topics["requests"], ctx.events(5).read_bytes().splitlines())
    )
    code, out, err = run(ctx, "backfill", "--config", str(SUITES), "--from", "0", "--dry-run")
    return Ran(code, out, err, out_has=["dry run", "events to evaluate"])


def case_dead_letter_raw(ctx: Ctx) -> Ran:
    digest = "ab" * 32
    client = redis.Redis.from_url(ctx.redis_url)
    client.set(raw_key(ctx.prefix, digest), b"the whole event", ex=60)
    client.close()
    missing = run(ctx, "dead-letter-raw", "cd" * 32)
    assert missing[0] == 1 and missing[1] == "" and "is not in Redis" in missing[2]
    code, out, err = run(ctx, "dead-letter-raw", digest)
    assert out == "the whole event"
    return Ran(code, out, err)


def case_demo(ctx: Ctx) -> Ran:
    code, out, err = run(
        ctx,
        "demo",
        "--events",
        "20",
        "--no-judges",
        timeout=240,
        TMPDIR=str(ctx.tmp),
        REDIS_URL=ctx.redis_url,
        own_servers="1",
    )
    return Ran(code, out, err, out_has=["20 events →", "next:"], err_has=["sent 20 events to"])


def case_up(ctx: Ctx) -> Ran:
    ports = {"kafka": free_port(), "redis": free_port(), "web": free_port()}
    args = ["up", "--state-dir", str(ctx.tmp / "state"), "--no-judges"]
    args += [x for name, port in ports.items() for x in (f"--{name}-port", str(port))]
    code, out, err = serve(
        ctx,
        args,
        lambda out: "Ctrl-C stops everything." in out.read_text(),
        signal.SIGINT,
        REDIS_URL="",
        own_servers="1",
    )
    return Ran(code, out, err, out_has=["streameval is up", "/dashboard"], err_has=["stopped; state kept in"])


def case_worker(ctx: Ctx) -> Ran:
    port = free_port()
    args = ["worker", "--config", str(SUITES), "--app-id", f"cli-out-{ctx.topics['requests']}"]
    code, out, err = serve(ctx, args, answers(port), signal.SIGTERM, STREAMEVAL_WEB_PORT=str(port))
    return Ran(code, out, err, err_has=["INFO"])  # a service: its log is all it writes


def case_api(ctx: Ctx) -> Ran:
    port = free_port()
    code, out, err = serve(ctx, ["api", "--port", str(port)], answers(port), signal.SIGTERM)
    return Ran(code, out, err, err_has=[f"streameval api on http://127.0.0.1:{port}"])


def case_judge_sim(ctx: Ctx) -> Ran:
    port = free_port()
    code, out, err = serve(
        ctx, ["judge-sim", "--port", str(port)], lambda out: "listening" in out.read_text(), signal.SIGINT
    )
    return Ran(code, out, err, out_has=[f"SIMULATED judge listening on http://127.0.0.1:{port}"])


def case_migrate(ctx: Ctx) -> Ran:
    code, out, err = run(ctx, "migrate", "marks")
    return Ran(code, out, err, out_has=["moved 0 idempotency marks"])


def case_review(ctx: Ctx) -> Ran:
    code, out, err = run(ctx, "review", "export")
    assert out == ""  # the data (JSONL items) goes to stdout: none kept under this prefix
    return Ran(code, out, err, err_has=["0 items exported"])


def case_redact(ctx: Ctx) -> Ran:
    config = ctx.tmp / "redact.yaml"
    config.write_text(
        "suites:\n  - {name: qa, default: true, evaluators: [{evaluator: exact_match}]}\nredact: {}\n"
    )
    code, out, err = run(ctx, "redact", "--config", str(config), "mail ana@example.com")
    return Ran(code, out, err, out_has=["mail [EMAIL_1]"], err_has=["redacted: EMAIL 1"])


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"received")

    def log_message(self, format: str, *args: object) -> None:
        pass


def case_notify(ctx: Ctx) -> Ran:
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    secret = ctx.tmp / "hook.key"
    secret.write_text("s3cret-signing-key")
    config = ctx.tmp / "notify.yaml"
    config.write_text(
        "suites:\n  - {name: qa, default: true, evaluators: [{evaluator: exact_match}]}\nnotify:\n"
        f"  - {{name: hook, kind: webhook, url: 'http://127.0.0.1:{server.server_port}/hook', "
        f"signing_secret_file: '{secret}'}}\n"
    )
    try:
        code, out, err = run(ctx, "notify", "test", "--config", str(config), "--channel", "hook")
    finally:
        server.shutdown()
    return Ran(code, out, err, out_has=["hook (webhook)"])


GUARDED = (
    "suites:\n  - name: qa\n    default: true\n    evaluators: [{evaluator: exact_match}]\n"
    "    guard: {block_below: 0.5}\n"
)


def case_guard(ctx: Ctx) -> Ran:
    config = ctx.tmp / "guard.yaml"
    config.write_text(GUARDED)
    port = free_port()
    code, out, err = serve(
        ctx,
        ["guard", "--config", str(config), "--port", str(port), "--workers", "1"],
        answers(port),
        signal.SIGTERM,
    )
    return Ran(code, out, err, err_has=[f"streameval guard listening on http://127.0.0.1:{port}"])


def case_check_one(ctx: Ctx) -> Ran:
    """The answer (JSON) on stdout; a blocked answer is exit 1 with nothing on stderr (it is the result)."""
    config = ctx.tmp / "guard.yaml"
    config.write_text(GUARDED)
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streameval",
            "guard",
            "--config",
            str(config),
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ctx.env(STREAMEVAL_API_TOKEN="check-one-token-0123"),
    )
    try:
        deadline = time.monotonic() + 120
        while not answers(port)(ctx.tmp):
            assert server.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        done = subprocess.run(
            [sys.executable, "-m", "streameval", "check-one", "--url", f"http://127.0.0.1:{port}"],
            input=b'{"model": "m", "output": "Lyon", "expected": "Paris"}',
            capture_output=True,
            timeout=60,
            env=ctx.env(STREAMEVAL_API_TOKEN="check-one-token-0123"),  # checks need a token, as the write API
        )
    finally:
        server.terminate()
        server.wait(timeout=60)
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    return Ran(done.returncode, out, err, out_has=['"decision":"block"'], code_is=1)


CASES: dict[str, Callable[[Ctx], Ran]] = {
    "api": case_api,
    "backfill": case_backfill,
    "check": case_check,
    "check-one": case_check_one,
    "compare": case_compare,
    "dead-letter-raw": case_dead_letter_raw,
    "demo": case_demo,
    "evaluate": case_evaluate,
    "guard": case_guard,
    "judge-sim": case_judge_sim,
    "migrate": case_migrate,
    "notify": case_notify,
    "produce": case_produce,
    "redact": case_redact,
    "review": case_review,
    "tail": case_tail,
    "up": case_up,
    "worker": case_worker,
}


def commands() -> list[str]:
    sub = next(a for a in _parser()._actions if a.dest == "command")
    return sorted(sub.choices)  # type: ignore[attr-defined]


def test_every_command_has_a_case() -> None:
    assert sorted(CASES) == commands()


@pytest.mark.parametrize("command", commands())
def test_results_on_stdout_diagnostics_on_stderr(
    command: str, broker: EmbeddedBroker, redis_url: str, prefix: str, topics: dict[str, str], tmp_path: Path
) -> None:
    ran = CASES[command](Ctx(broker, redis_url, prefix, topics, tmp_path))
    assert ran.code == ran.code_is, ran.err[-3000:]
    assert "Traceback" not in ran.err
    for text in ran.out_has:
        assert text in ran.out and text not in ran.err, (text, ran.out[-2000:], ran.err[-2000:])
    for text in ran.err_has:
        assert text in ran.err and text not in ran.out, (text, ran.out[-2000:], ran.err[-2000:])
    if not ran.err_has:
        assert ran.err == "", ran.err[-2000:]  # a command that has nothing to complain about is silent there
    if not ran.out_has and command in ("worker", "api"):
        assert ran.out == "", ran.out[-2000:]  # a service logs; it has no results to print
