"""A scripted, SIMULATED judge server (aiohttp) speaking both judge protocols, for tests and the demo.

It is not an LLM. It reads the evaluation data block out of the prompt and scores the output by its
closeness to the reference (rapidfuzz token-set ratio; without a reference, by length), then answers
in the shape the prompt asks for: the multi-judge spec's standard (1-5) or overall (0-10) JSON, the
report-quality spec's report JSON, or the RAG-evaluation spec's single number. Every reasoning text starts
with ``[simulated judge]`` and every response carries the header ``X-Judge-Simulated: true``. The same input
always gets the same scores.

Endpoints: each protocol's path (:data:`~._protocols.PROTOCOLS`) with and without a ``/v1`` root:
``POST /v1/chat/completions`` and ``/chat/completions`` (OpenAI), ``POST /v1/messages`` and ``/messages``
(Anthropic), and the models listings ``GET /v1/models`` and ``/models``; requests and answers are read and
built by the protocol's own :class:`~._protocols.Protocol` methods. Faults, decided per request from a seeded RNG (or by ``script`` for the first requests):
latency (fixed | uniform | exponential), HTTP 500 (``error_rate``), HTTP 429 with ``Retry-After``
(``rate_limit_rate``), hangs longer than any client timeout (``timeout_rate``), malformed answers
(``malformed_rate``: prose, fenced JSON, broken JSON or no score at all).

Use :func:`start_judge_sim` in-process, or ``streameval judge-sim --port P`` (:func:`main`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hashlib
import itertools
import random
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from aiohttp import web
from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from ._protocols import PROTOCOLS, Protocol

__all__ = ["FAULTS", "SimOptions", "build_app", "demo_judges", "main", "start_judge_sim"]

#: what ``script`` entries may say; the malformed kinds are also what ``malformed_rate`` picks from
FAULTS = ("ok", "500", "429", "timeout", "prose", "fenced", "broken", "garbage")
_MALFORMED = ("prose", "fenced", "broken", "garbage")
_DATA = re.compile(r"<evaluation_data>\n(.*)\n</evaluation_data>", re.DOTALL)
_SHAPE = re.compile(r'^(\{"scores".*\})$', re.MULTILINE)
_WEIGHT = re.compile(r"^- (\w+) \(.*?\) \[weight ([\d.]+)\]", re.MULTILINE)
_TAG = "[simulated judge]"


@dataclass
class SimOptions:
    latency_ms: float = 0.0
    latency_dist: Literal["fixed", "uniform", "exponential"] = "fixed"
    latency_spread_ms: float = 0.0  # uniform: +/- this much around latency_ms
    error_rate: float = 0.0
    rate_limit_rate: float = 0.0
    retry_after_s: float = 1.0
    timeout_rate: float = 0.0
    hang_s: float = 30.0
    malformed_rate: float = 0.0
    script: Sequence[str] = ()  # faults for the first requests, in arrival order (see FAULTS)
    reply: str | None = None  # answer this text verbatim instead of scoring
    seed: int = 0
    api_key: str | None = None  # when set, a request without this key (Bearer or x-api-key) gets 401
    reject_structured: bool = False  # answer 400 to requests with response_format / tools
    requests: list[dict[str, Any]] | None = field(default=None, repr=False)  # received bodies go here

    def __post_init__(self) -> None:
        unknown = [f for f in self.script if f not in FAULTS]
        if unknown:
            raise ValueError(f"unknown script entries {unknown}; valid: {', '.join(FAULTS)}")


class _Sim:
    def __init__(self, options: SimOptions) -> None:
        self.o = options
        self.rng = random.Random(options.seed)
        self.script = iter(options.script)
        self.counter = itertools.count()

    def fault(self) -> str:
        scripted = next(self.script, None)
        if scripted is not None:
            return scripted
        roll = self.rng.random()
        for name, rate in (
            ("500", self.o.error_rate),
            ("429", self.o.rate_limit_rate),
            ("timeout", self.o.timeout_rate),
            ("malformed", self.o.malformed_rate),
        ):
            if roll < rate:
                return self.rng.choice(_MALFORMED) if name == "malformed" else name
            roll -= rate
        return "ok"

    def latency_s(self) -> float:
        o = self.o
        if o.latency_dist == "uniform":
            ms = o.latency_ms + self.rng.uniform(-o.latency_spread_ms, o.latency_spread_ms)
        elif o.latency_dist == "exponential":
            ms = self.rng.expovariate(1.0 / o.latency_ms) if o.latency_ms > 0 else 0.0
        else:
            ms = o.latency_ms
        return max(0.0, ms) / 1000.0

    def refuse_key(self, request: web.Request) -> web.Response | None:
        """401 when an ``api_key`` is set and the request does not carry it."""
        if self.o.api_key is None or self.o.api_key in (
            request.headers.get("x-api-key"),
            request.headers.get("authorization", "").removeprefix("Bearer "),
        ):
            return None
        return web.json_response(
            {"error": {"type": "authentication_error", "message": "invalid api key"}},
            status=401,
            headers={"X-Judge-Simulated": "true"},
        )

    async def models(self, request: web.Request) -> web.Response:
        """The models listing (both protocols' shape, roughly): what ``/ready`` probes."""
        if (refused := self.refuse_key(request)) is not None:
            return refused
        return web.json_response(
            {"object": "list", "data": [{"id": "simulated", "object": "model"}]},
            headers={"X-Judge-Simulated": "true"},
        )

    async def handle(self, proto: Protocol, request: web.Request) -> web.StreamResponse:
        if (refused := self.refuse_key(request)) is not None:
            return refused
        body = await request.json()
        if self.o.requests is not None:
            self.o.requests.append(body)
        structured = proto.structured(body)
        if structured and self.o.reject_structured:
            return web.json_response(
                {
                    "error": {
                        "type": "invalid_request_error",
                        "message": "response_format / tools are not supported",
                    }
                },
                status=400,
                headers={"X-Judge-Simulated": "true"},
            )
        fault = self.fault()
        delay = self.latency_s()
        if delay:
            await asyncio.sleep(delay)
        headers = {"X-Judge-Simulated": "true"}
        if fault == "timeout":
            await asyncio.sleep(self.o.hang_s)
        if fault == "500":
            return web.json_response(
                {"error": {"message": "simulated server error"}}, status=500, headers=headers
            )
        if fault == "429":
            headers["Retry-After"] = f"{self.o.retry_after_s:g}"
            return web.json_response(
                {"error": {"message": "simulated rate limit"}}, status=429, headers=headers
            )
        system, user = proto.prompts(body)
        text = (
            self.o.reply
            if self.o.reply is not None
            else _answer(system, user, str(body.get("model", "")), fault)
        )
        tokens = (max(1, len(system + user) // 4), max(1, len(text) // 4))
        payload = proto.answer(body, text, next(self.counter), tokens)
        return web.json_response(payload, headers=headers, dumps=lambda d: orjson.dumps(d).decode())


def _closeness(output: str, reference: str) -> float:
    """Token-set similarity in [0, 1], case and punctuation ignored (1.0 when one contains the other)."""
    return fuzz.token_set_ratio(output, reference, processor=default_process) / 100.0


def _quality(user: str) -> tuple[float, str]:
    """0-1 quality of the output in the data block, and how it was judged."""
    match = _DATA.search(user)
    data = orjson.loads(match.group(1)) if match else {}
    output = str(data.get("output", ""))
    reference = data.get("reference")
    if isinstance(reference, list):
        reference = max(reference, key=lambda r: _closeness(output, str(r)), default=None)
    if reference is not None:
        q = _closeness(output, str(reference))
        return q, f"closeness {q:.2f} to the reference"
    words = len(output.split())
    q = 0.0 if not words else min(1.0, 0.5 + words / 200.0)
    return q, f"no reference; {words} word(s) of output"


def _offset(model: str, name: str) -> float:
    """A fixed per-judge, per-criterion lean in [-0.5, 0.5] so simulated judges differ a little."""
    return (hashlib.sha256(f"{model}\x00{name}".encode()).digest()[0] % 11 - 5) / 10.0


def _answer(system: str, user: str, model: str, fault: str) -> str:
    quality, why = _quality(user)
    if "single number between 0 and 1" in system:
        return f"{min(1.0, max(0.0, quality + _offset(model, 'metric') / 10)):.2f}"
    shape = _SHAPE.search(system)
    criteria = list(orjson.loads(shape.group(1))["scores"]) if shape else []
    ten = "on a 0-10 scale" in system
    low, high = (0.0, 10.0) if ten else (1.0, 5.0)
    step = 0.5 if ten else 1.0
    scores = {
        c: min(
            high,
            max(
                low,
                round((low + quality * (high - low) + _offset(model, c) * (2 if ten else 1)) / step) * step,
            ),
        )
        for c in criteria
    }
    weights = {name: float(w) for name, w in _WEIGHT.findall(system) if name in scores}
    total = sum(weights.values())
    overall = round(sum(s * weights.get(c, 0.0) for c, s in scores.items()) / total, 2) if total else low
    reasoning = f"{_TAG} {why}"
    if fault == "garbage":
        return f"{_TAG} I cannot evaluate this."
    if fault == "prose":
        return "\n".join(
            [
                f"{_TAG} Evaluation:",
                *(f"{c}: {s:g}" for c, s in scores.items()),
                f"Overall score: {overall:g}",
            ]
        )
    document = {
        "scores": {c: {"score": s, "justification": f"{_TAG} {why}"} for c, s in scores.items()},
        "overall_score": overall,
        "strengths": [f"{_TAG} {why}"] if quality >= 0.5 else [],
        "weaknesses": [] if quality >= 0.5 else [f"{_TAG} far from the reference ({why})"],
        "reasoning": reasoning,
    }
    text = orjson.dumps(document).decode()
    if fault == "fenced":
        return f"Here is my evaluation:\n```json\n{text}\n```"
    if fault == "broken":
        return text[: len(text) * 2 // 3]
    return text


def build_app(options: SimOptions) -> web.Application:
    sim = _Sim(options)
    app = web.Application()
    posts: dict[str, Protocol] = {}
    gets: set[str] = set()
    for proto in PROTOCOLS.values():  # each path as given, and below /v1 (OpenAI-compatible roots end in /v1)
        for prefix in ("/", "/v1/"):
            posts.setdefault(prefix + proto.path.removeprefix("v1/"), proto)
            gets.add(prefix + proto.models_path.removeprefix("v1/"))
    for path, proto in posts.items():
        app.router.add_post(path, functools.partial(sim.handle, proto))
    for path in gets:
        app.router.add_get(path, sim.models)
    return app


@contextlib.asynccontextmanager
async def start_judge_sim(host: str = "127.0.0.1", port: int = 0, **options: Any) -> AsyncIterator[str]:
    """Serve a simulated judge until the block exits; yields its base URL (``http://host:port``).

    Judges point at it with ``base_url: <url>/v1`` (openai) or ``base_url: <url>`` (anthropic).
    ``options`` are :class:`SimOptions` fields. ``port=0`` picks a free port.
    """
    runner = web.AppRunner(build_app(SimOptions(**options)), access_log=None, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]  # the real port when port=0
    try:
        yield f"http://{host}:{bound}"
    finally:
        await runner.cleanup()


def demo_judges(base_url: str) -> list[dict[str, Any]]:
    """The demo's three SIMULATED judges as a ``judges:`` config fragment (the multi-judge spec's panel shape).

    Weights 0.30 / 0.30 / 0.40 and protocols as the multi-judge spec's DeepSeek (OpenAI, 1-5), GLM (Anthropic,
    1-5) and MiniMax (Anthropic, 0-10) judges; all three point at the simulated judge at ``base_url``
    (as yielded by :func:`start_judge_sim`) and are named ``sim-*`` so nobody mistakes them for models.
    """
    return [
        {
            "name": "sim-deepseek",
            "protocol": "openai",
            "base_url": f"{base_url}/v1",
            "model": "simulated-deepseek-chat",
            "weight": 0.30,
            "scale": "1-5",
        },
        {
            "name": "sim-glm",
            "protocol": "anthropic",
            "base_url": base_url,
            "model": "simulated-glm-4.7",
            "weight": 0.30,
            "scale": "1-5",
        },
        {
            "name": "sim-minimax",
            "protocol": "anthropic",
            "base_url": base_url,
            "model": "simulated-minimax-m2.1",
            "weight": 0.40,
            "scale": "0-10",
        },
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """``streameval judge-sim``: run the simulated judge in the foreground until interrupted."""
    from .._cliargs import EXIT_CODES, _Formatter

    parser = argparse.ArgumentParser(
        prog="streameval judge-sim",
        description="Run a SIMULATED LLM judge (OpenAI and Anthropic protocols) for tests and demos.",
        epilog=EXIT_CODES,
        formatter_class=_Formatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--port", type=int, default=8700, help="port to listen on")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="added latency of each answer, ms")
    parser.add_argument(
        "--latency-dist",
        choices=["fixed", "uniform", "exponential"],
        default="fixed",
        help="distribution of the added latency",
    )
    parser.add_argument(
        "--latency-spread-ms", type=float, default=0.0, help="spread of the latency distribution, ms"
    )
    parser.add_argument("--error-rate", type=float, default=0.0, help="share of requests answered HTTP 500")
    parser.add_argument("--rate-limit-rate", type=float, default=0.0, help="share answered HTTP 429")
    parser.add_argument("--retry-after-s", type=float, default=1.0, help="Retry-After sent with a 429")
    parser.add_argument("--timeout-rate", type=float, default=0.0, help="share that hang for --hang-s")
    parser.add_argument("--hang-s", type=float, default=30.0, help="how long a hanging request hangs, s")
    parser.add_argument(
        "--malformed-rate", type=float, default=0.0, help="share answered with malformed text"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed of the rates and scores")
    parser.add_argument("--api-key", default=None, help="answer 401 to requests without this key")
    parser.add_argument(
        "--reject-structured", action="store_true", help="answer 400 to response_format / tools"
    )
    args = parser.parse_args(argv)
    options = {k: v for k, v in vars(args).items() if k not in ("host", "port")}

    async def serve() -> None:
        async with start_judge_sim(args.host, args.port, **options) as url:
            print(f"SIMULATED judge listening on {url} (openai: {url}/v1, anthropic: {url})", flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
