"""Shared by the judge benchmarks: the simulated judge in a subprocess, its CPU, and the box's ceiling.

Not a benchmark itself. The ceiling is what a minimal client (a bare aiohttp loop, no pipeline) gets
from the same simulator with the same request bodies and the same number of requests in flight, in
the same run: the most any judge client can do on this box with this simulator. The simulator's own
cost is read from /proc (CPU seconds per request it answered).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from streameval.config import parse_config
from streameval.judges import PROTOCOLS
from streameval.judges._protocols import endpoint
from streameval.judges.sim import demo_judges, start_judge_sim
from streameval.pipeline import Pipeline

__all__ = ["Sim", "bare_ceiling", "panel_bodies", "start_sim"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Sim:
    proc: subprocess.Popen[bytes]
    url: str

    def cpu_s(self) -> float:
        """User + system CPU seconds the simulator has used so far (Linux /proc)."""
        fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


async def start_sim(latency_ms: float, dist: str = "fixed", spread_ms: float = 0.0) -> Sim:
    """One simulator process serving the three demo judges, answering after ``latency_ms``."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streameval.judges.sim",
            "--port",
            str(port),
            "--latency-ms",
            str(latency_ms),
            "--latency-dist",
            dist,
            "--latency-spread-ms",
            str(spread_ms),
        ],
        stdout=subprocess.DEVNULL,
    )
    sim = Sim(proc, f"http://127.0.0.1:{port}")
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return sim
        except OSError:
            await asyncio.sleep(0.05)
    sim.stop()
    raise RuntimeError(f"the judge simulator at {sim.url} did not start")


async def panel_bodies() -> list[tuple[str, bytes]]:
    """(path, body) of the three demo judges' requests for one qa_simple event, as the pipeline sends them."""
    requests: list[dict[str, Any]] = []
    async with start_judge_sim(requests=requests) as url:
        judges = demo_judges(url)
        _, suites = parse_config(
            {
                "judges": judges,
                "suites": [{"name": "judged", "evaluators": [{"evaluator": "exact_match"}], "judge": {}}],
            }
        )
        pipeline = Pipeline(suites)
        await pipeline.start()
        try:
            await pipeline.process(
                orjson.dumps(
                    {
                        "id": "b",
                        "model": "m",
                        "input": "What is the capital of France?",
                        "output": "The capital of France is Paris.",
                        "expected": "Paris",
                        "category": "qa_simple",
                        "suite": "judged",
                    }
                )
            )
        finally:
            await pipeline.close()
    # each judge's endpoint below the simulator's root, as its protocol builds it
    path = {
        j["model"]: endpoint(j["base_url"], PROTOCOLS[j["protocol"]].path).raw_path.decode() for j in judges
    }
    return [(path[body["model"]], orjson.dumps(body)) for body in requests]


async def bare_ceiling(
    url: str, bodies: list[tuple[str, bytes]], in_flight: int, seconds: float
) -> tuple[float, float]:
    """(requests/s, this process's CPU seconds per request) of a bare aiohttp loop keeping ``in_flight``
    requests (cycling over ``bodies``) in flight: the floor of any aiohttp-based judge client's CPU."""
    done = 0
    headers = {"content-type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=in_flight)) as session:

        async def loop(n: int, until: float) -> None:
            nonlocal done
            path, body = bodies[n % len(bodies)]
            while time.perf_counter() < until:
                async with session.post(url + path, data=body, headers=headers) as answer:
                    await answer.read()
                done += 1

        await asyncio.gather(
            *(loop(n, time.perf_counter() + 0.5) for n in range(in_flight))
        )  # connections up
        done = 0
        began, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(loop(n, began + seconds) for n in range(in_flight)))
        return done / (time.perf_counter() - began), (time.process_time() - cpu) / max(1, done)
