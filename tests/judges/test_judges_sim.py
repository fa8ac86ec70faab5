"""The simulated judge (demo and tests) and the client's own limits (concurrency, start rate)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time

import httpx
import pytest
from _judges_helpers import event, judge

from streameval.judges import JudgeClient, JudgeHub, build_metric, build_report, build_rubric
from streameval.judges.sim import SimOptions, main, start_judge_sim


async def _score(
    url: str, output: str, *, protocol: str = "openai", kind: str = "rubric", scale: str = "1-5"
) -> float:
    hub = JudgeHub([judge("j", url, weight=1, protocol=protocol, scale=scale)])
    await hub.start()
    [j] = hub.panel(None)
    ev = event(output=output)
    prompt = {
        "rubric": lambda: build_rubric(ev, "qa_simple", scale, blind=True),
        "report": lambda: build_report(ev, blind=True),
        "metric": lambda: build_metric(ev, "equivalence", blind=True),
    }[kind]()
    try:
        verdict = await hub.ask(j, prompt)
    finally:
        await hub.close()
    assert verdict.status == "ok", verdict.reason
    assert verdict.score is not None
    return verdict.score


@pytest.mark.parametrize(
    ("protocol", "kind", "scale"),
    [
        ("openai", "rubric", "1-5"),
        ("anthropic", "rubric", "0-10"),
        ("anthropic", "report", "1-5"),
        ("openai", "metric", "1-5"),
    ],
)
async def test_sim_scores_follow_closeness_to_the_reference_deterministically(
    protocol: str, kind: str, scale: str
) -> None:
    async with start_judge_sim() as url:
        good = await _score(url, "Paris.", protocol=protocol, kind=kind, scale=scale)
        again = await _score(url, "Paris.", protocol=protocol, kind=kind, scale=scale)
        bad = await _score(
            url, "I think it is Berlin, or maybe Madrid.", protocol=protocol, kind=kind, scale=scale
        )
    assert good == again and good > bad


async def test_sim_labels_itself_simulated() -> None:
    async with start_judge_sim() as url, httpx.AsyncClient() as client:
        response = await client.post(f"{url}/v1/messages", json={"model": "m", "system": "x", "messages": []})
    assert response.headers["X-Judge-Simulated"] == "true"
    assert response.json()["content"][0]["text"].count("[simulated judge]") >= 1


def test_sim_rejects_unknown_script_entries() -> None:
    with pytest.raises(ValueError, match="unknown script entries"):
        SimOptions(script=["teapot"])


def test_sim_cli_help() -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0


def test_sim_cli_serves_until_terminated() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "streameval.judges.sim", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and "SIMULATED judge listening" in proc.stdout.readline()
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert response.status_code == 200 and response.json()["choices"][0]["message"]["content"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_max_concurrency_bounds_requests_in_flight() -> None:
    state = {"inflight": 0, "peak": 0}
    gate = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        state["inflight"] += 1
        state["peak"] = max(state["peak"], state["inflight"])
        await gate.wait()
        state["inflight"] -= 1
        return httpx.Response(200, json={"choices": [{"message": {"content": "0.5"}}]})

    client = JudgeClient(
        judge("j", "http://127.0.0.1:1", weight=1, max_concurrency=3), transport=httpx.MockTransport(handler)
    )
    await client.start()
    try:
        tasks = [asyncio.ensure_future(client.complete("s", "u")) for _ in range(10)]
        deadline = time.monotonic() + 5
        while state["inflight"] < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        for _ in range(20):  # give any over-limit request every chance to start
            await asyncio.sleep(0)
        assert state["inflight"] == 3
        gate.set()
        done = await asyncio.gather(*tasks)
    finally:
        await client.close()
    assert state["peak"] == 3 and len(done) == 10


async def test_requests_per_second_spaces_request_starts() -> None:
    sleeps: list[float] = []

    async def record(seconds: float) -> None:
        sleeps.append(seconds)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"choices": [{"message": {"content": "0.5"}}]})

    client = JudgeClient(
        judge("j", "http://127.0.0.1:1", weight=1, requests_per_second=4),
        transport=httpx.MockTransport(handler),
        clock=lambda: 100.0,
        sleep=record,
    )
    await client.start()
    try:
        for _ in range(4):
            await client.complete("s", "u")
    finally:
        await client.close()
    assert sleeps == pytest.approx([0.25, 0.5, 0.75])  # frozen clock: each start waits one more 1/4 s slot
