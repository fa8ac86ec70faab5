"""``/ready`` judge probes (authenticated models listing, cached) and the actionable configuration messages."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import orjson
import pytest
from _judges_helpers import judge

from streameval.judges import JudgeConfig, JudgeError, JudgeProbe, judge_ready_checks
from streameval.judges._errors import status_error
from streameval.judges._hints import explain_status
from streameval.judges.sim import start_judge_sim


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_the_probe_is_authenticated_and_cached(protocol: str) -> None:
    async with start_judge_sim(api_key="right") as url:
        good = JudgeProbe(
            judge("j", url, weight=1, protocol=protocol, api_key_env="K"), environ={"K": "right"}
        )
        bad = JudgeProbe(
            judge("j", url, weight=1, protocol=protocol, api_key_env="K"), environ={"K": "wrong"}
        )
        for _ in range(3):
            await good()
            with pytest.raises(JudgeError, match="refused the credentials"):
                await bad()
    assert good.probes == 1 and bad.probes == 1  # cached: one request each


async def test_the_cache_expires() -> None:
    now = [0.0]
    async with start_judge_sim() as url:
        probe = JudgeProbe(judge("j", url, weight=1), clock=lambda: now[0], ttl_ok_s=60)
        await probe()
        now[0] = 59.0
        await probe()
        now[0] = 61.0
        await probe()
    assert probe.probes == 2


async def test_a_judge_outage_makes_the_check_fail() -> None:
    async with start_judge_sim() as url:
        pass  # the server is gone
    [(name, check)] = judge_ready_checks([judge("j", url, weight=1)])
    assert name == "judge:j"
    with pytest.raises(JudgeError, match="request failed: ConnectError"):
        await check()


def _mock(status: int, body: dict[str, Any]) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(status, content=orjson.dumps(body)))


async def test_a_listing_missing_is_ready_except_for_the_doubled_v1() -> None:
    await JudgeProbe(judge("j", "https://x", weight=1), transport=_mock(404, {}))()
    cfg = JudgeConfig(name="j", protocol="anthropic", base_url="https://x/v1", model="m", weight=1)
    with pytest.raises(JudgeError, match=r"/v1/v1/messages; remove the trailing /v1"):
        await JudgeProbe(cfg, transport=_mock(404, {}))()


UPSTREAM = {
    "error": {
        "message": "litellm.AuthenticationError: AnthropicException - invalid x-api-key",
        "type": "auth_error",
        "code": "401",
    }
}
OWN_KEY = {
    "error": {
        "message": "Authentication Error, Invalid proxy server token passed.",
        "type": "token_not_found_in_db",
        "code": "401",
    }
}


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (UPSTREAM, "its own upstream credential"),
        (OWN_KEY, "check its api_key_env"),
        ({}, "check its api_key_env"),
    ],
)
def test_a_gateway_401_about_its_upstream_key_says_so(body: dict[str, Any], needle: str) -> None:
    cfg = JudgeConfig(
        name="gw", protocol="openai", base_url="https://x/v1", model="m", weight=1, api_key_env="GW_KEY"
    )
    error = explain_status(cfg, 401, orjson.dumps(body), status_error("gw", 401, None))
    assert error.code == "judge_auth" and needle in str(error)
    assert "AnthropicException" not in str(error) and "invalid x-api-key" not in str(error)  # never quoted


async def test_an_anthropic_base_url_ending_in_v1_is_explained_at_start_and_on_404(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from _judges_helpers import event

    from streameval.judges import JudgeHub, build_rubric

    caplog.set_level(logging.WARNING)
    async with start_judge_sim() as url:
        cfg = JudgeConfig(
            name="j", protocol="anthropic", base_url=f"{url}/v1", model="m", weight=1, attempts=1
        )
        hub = JudgeHub([cfg], log_interval_s=None)
        await hub.start()
        try:
            [j] = hub.panel(None)
            verdict = await hub.ask(j, build_rubric(event(), "qa_simple", "1-5", blind=True))
        finally:
            await hub.close()
    assert any("/v1/v1/messages" in r.getMessage() for r in caplog.records)
    assert verdict.status == "error" and verdict.error == "judge_http_error"
    assert "remove the trailing /v1 from base_url" in (verdict.reason or "")
