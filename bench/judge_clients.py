"""HTTP client variants against one simulated judge: requests/s and client CPU per request.

    python bench/judge_clients.py [--in-flight 8,64,192] [--latency-ms 0] [--seconds 4]

Each variant keeps N requests in flight (the demo panel's three request bodies, in turn) against one
simulator subprocess, for ``--seconds``. Printed per variant and N: requests/s, the client's CPU per
request (this process, ``time.process_time``) and the simulator's (from /proc). With
``--latency-ms 0`` the rate is CPU-bound, so CPU per request is the figure to compare; with 200 the
rate / (N / latency) shows what each variant loses at that concurrency.

Variants: ``httpx`` (one ``httpx.AsyncClient``, pool of N: what the judges used before),
``httpx-shards`` (N / 16 clients of 16 connections, round robin), ``judgeclient`` (streameval's
``JudgeClient`` with its default aiohttp transport, max_concurrency N: what the judges use now) and
``aiohttp`` (a bare ``aiohttp.ClientSession`` loop: the floor), ``aiohttp-tuned`` (the same loop with
``skip_auto_headers``, no cookie jar, ``auto_decompress=False`` and a prebuilt header dict) and
``pyreqwest`` (the Rust reqwest client, only when the package is installed: it is not a dependency).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable

import aiohttp
import httpx
import orjson
from _judgesim import Sim, panel_bodies, start_sim

from streameval.judges import JudgeClient, JudgeConfig

Bodies = list[tuple[str, bytes]]


async def _loop(call: Callable[[int], Awaitable[None]], in_flight: int, seconds: float) -> int:
    done = 0

    async def worker(n: int) -> None:
        nonlocal done
        while time.perf_counter() < until:
            await call(n)
            done += 1

    until = time.perf_counter() + seconds
    await asyncio.gather(*(worker(n) for n in range(in_flight)))
    return done


Call = Callable[[int], Awaitable[None]]
Close = Callable[[], Awaitable[None]]


async def _httpx(url: str, bodies: Bodies, in_flight: int, shard: int | None) -> tuple[Call, Close]:
    size = shard or in_flight
    limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
    clients = [httpx.AsyncClient(limits=limits) for _ in range(max(1, in_flight // size))]
    turn = itertools.cycle(clients)
    payloads = [(path, orjson.loads(body)) for path, body in bodies]

    async def call(n: int) -> None:
        path, body = payloads[n % len(payloads)]
        (await next(turn).post(url + path, json=body)).json()

    async def close() -> None:
        for client in clients:
            await client.aclose()

    return call, close


async def _judgeclient(url: str, bodies: Bodies, in_flight: int) -> tuple[Call, Close]:
    config = JudgeConfig(
        name="bench",
        protocol="openai",
        base_url=f"{url}/v1",
        model="simulated-deepseek-chat",
        weight=1,
        max_concurrency=in_flight,
    )
    client = JudgeClient(config)
    await client.start()
    messages = orjson.loads(bodies[0][1])["messages"]
    system, user = messages[0]["content"], messages[1]["content"]

    async def call(n: int) -> None:
        await client.complete(system, user)

    return call, client.close


async def _aiohttp(url: str, bodies: Bodies, in_flight: int) -> tuple[Call, Close]:
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=in_flight))
    headers = {"content-type": "application/json"}

    async def call(n: int) -> None:
        path, body = bodies[n % len(bodies)]
        async with session.post(url + path, data=body, headers=headers) as answer:
            orjson.loads(await answer.read())

    return call, session.close


async def _aiohttp_tuned(url: str, bodies: Bodies, in_flight: int) -> tuple[Call, Close]:
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=in_flight),
        cookie_jar=aiohttp.DummyCookieJar(),
        auto_decompress=False,
        skip_auto_headers=("User-Agent", "Accept-Encoding"),
    )
    headers = {"content-type": "application/json"}
    urls = [(url + path, body) for path, body in bodies]

    async def call(n: int) -> None:
        target, body = urls[n % len(urls)]
        async with session.post(target, data=body, headers=headers) as answer:
            orjson.loads(await answer.read())

    return call, session.close


async def _pyreqwest(url: str, bodies: Bodies, in_flight: int) -> tuple[Call, Close]:
    from pyreqwest.client import ClientBuilder  # not a dependency: pip install pyreqwest to measure it

    client = ClientBuilder().max_connections(in_flight).build()
    urls = [(url + path, body) for path, body in bodies]

    async def call(n: int) -> None:
        target, body = urls[n % len(urls)]
        request = client.post(target).header("content-type", "application/json").body_bytes(body).build()
        answer = await request.send()
        orjson.loads(bytes(await answer.bytes()))

    return call, client.close


async def _measure(sim: Sim, call: Call, in_flight: int, seconds: float) -> tuple[float, float, float]:
    await _loop(call, in_flight, 0.5)  # connections up
    cpu, sim_cpu, began = time.process_time(), sim.cpu_s(), time.perf_counter()
    count = await _loop(call, in_flight, seconds)
    elapsed = time.perf_counter() - began
    return count / elapsed, (time.process_time() - cpu) / count, (sim.cpu_s() - sim_cpu) / count


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", default="8,64,192")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--variants", default="httpx,httpx-shards,judgeclient,aiohttp")
    args = parser.parse_args()
    bodies = await panel_bodies()
    sim = await start_sim(args.latency_ms)
    print(f"one simulator, latency {args.latency_ms:g} ms")
    print("variant        in flight   requests/s   rate/ideal   client us/req   sim us/req")
    try:
        for n in (int(v) for v in args.in_flight.split(",")):
            for variant in args.variants.split(","):
                if variant in ("httpx", "httpx-shards"):
                    call, close = await _httpx(sim.url, bodies, n, 16 if variant == "httpx-shards" else None)
                elif variant == "judgeclient":
                    call, close = await _judgeclient(sim.url, bodies, n)
                elif variant == "aiohttp-tuned":
                    call, close = await _aiohttp_tuned(sim.url, bodies, n)
                elif variant == "pyreqwest":
                    call, close = await _pyreqwest(sim.url, bodies, n)
                else:
                    call, close = await _aiohttp(sim.url, bodies, n)
                try:
                    rate, client_cpu, sim_cpu = await _measure(sim, call, n, args.seconds)
                finally:
                    await close()
                ideal = f"{rate / (n / (args.latency_ms / 1000)):10.3f}" if args.latency_ms else f"{'-':>10}"
                print(
                    f"{variant:14s} {n:9d} {rate:12.0f}   {ideal} {client_cpu * 1e6:15.0f} {sim_cpu * 1e6:12.0f}",
                    flush=True,
                )
    finally:
        sim.stop()


if __name__ == "__main__":
    asyncio.run(main())
