"""The worker's composition root without Faust (streameval.runtime): checks, building, the alert side effect."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import redis.asyncio as aioredis

from streameval.api._stats import recent_alerts_key
from streameval.errors import ConfigError
from streameval.models import Alert, format_time
from streameval.outputs import OUTPUTS, Publish
from streameval.pipeline import Source
from streameval.runtime import Runtime, load_worker_config
from streameval.settings import Settings
from streameval.windows import WindowCloser

SIZE = 10
SUITE = """
suites:
  - {name: qa, default: true, evaluators: [{evaluator: exact_match}]}
windowing: {allowed_lateness_s: 1, lease_s: 7}
alerts:
  - {name: low, metric: mean_score, comparator: "<", threshold: 0.9, window: 10, min_count: 1}
"""


def settings_for(tmp_path: Path, redis_url: str, prefix: str, suite: str = SUITE) -> Settings:
    path = tmp_path / "suites.yaml"
    path.write_text(suite)
    return Settings(config=str(path), redis_url=redis_url, redis_prefix=prefix, windows=(SIZE,))


def test_config_is_checked_before_anything_connects(tmp_path: Path) -> None:
    unreachable = "redis://127.0.0.1:1/0"
    with pytest.raises(ConfigError, match="no suite config"):
        load_worker_config(Settings(redis_url=unreachable))
    with pytest.raises(ConfigError, match="no Redis"):
        load_worker_config(Settings(config=str(tmp_path / "absent.yaml"), redis_url=None))
    for output in OUTPUTS:  # every output topic of the table is refused as an input, by its setting's name
        reading_it = SUITE + f"inputs: [{{topic: {output.setting}-topic, format: native}}]\n"
        settings = settings_for(tmp_path, unreachable, "p:", reading_it).model_copy(
            update={output.setting: f"{output.setting}-topic"}
        )
        with pytest.raises(ConfigError, match=output.env):
            load_worker_config(settings)
    config = load_worker_config(settings_for(tmp_path, unreachable, "p:"))
    assert config.input_topics == ["evals.requests"] and [r.name for r in config.suites.alerts] == ["low"]


async def test_built_runtime_evaluates_and_closes_windows_once_with_the_alert_kept(
    tmp_path: Path, redis_url: str, prefix: str, aredis: aioredis.Redis
) -> None:
    runtime = await Runtime.build(load_worker_config(settings_for(tmp_path, redis_url, prefix)))
    try:
        built = runtime.closer
        assert (
            built.allowed_lateness_s == 1
            and built.lease_ms == 7000
            and [r.name for r in built.rules] == ["low"]
        )
        seconds, _ = await aredis.time()
        now = float(seconds)
        events = [
            orjson.dumps(
                {
                    "id": f"e{i}",
                    "model": "m",
                    "output": out,
                    "expected": "Paris",
                    "timestamp": format_time(now),
                }
            )
            for i, out in enumerate(["Paris", "Rome"])
        ]
        published = await runtime.processor.process_batch(
            [(raw, Source("t", 0, i)) for i, raw in enumerate(events)]
        )
        assert [m.kind for m in published] == ["result", "result"]

        async def later() -> float:  # the window of `now` has ended and its lateness passed
            return now + 2 * SIZE + 2

        # the built closer with a clock of the test's, so the window is due without waiting for it
        runtime.closer = WindowCloser(runtime.processor.store, built.rules, allowed_lateness_s=1, clock=later)
        sent: list[Publish] = []

        async def send(message: Publish) -> None:
            sent.append(message)

        assert await runtime.close_windows(send) == 1
        assert await runtime.close_windows(send) == 0  # published once
        assert sorted(m.kind for m in sent) == ["aggregate", "alert"]
        [alert] = [Alert.model_validate_json(m.value) for m in sent if m.kind == "alert"]
        assert alert.rule == "low" and alert.value == pytest.approx(0.5)
        # the dashboard's recent alerts hold exactly what went to the alert topic
        assert await aredis.lrange(recent_alerts_key(prefix), 0, -1) == [
            m.value for m in sent if m.kind == "alert"
        ]
    finally:
        await runtime.close()
