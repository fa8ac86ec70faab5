"""``calibrate: true``: the panel uses each judge's calibrated score; the verdicts keep the raw ones."""

from __future__ import annotations

import orjson
import pytest

from streameval.config import parse_config
from streameval.errors import ConfigError
from streameval.judges.sim import start_judge_sim
from streameval.pipeline import Pipeline


def config(url: str, judge: dict[str, object]) -> dict[str, object]:
    return {
        "judges": [
            {"name": "sim", "protocol": "openai", "base_url": f"{url}/v1", "model": "s", "weight": 1.0}
        ],
        "suites": [
            {
                "name": "qa",
                "default": True,
                "evaluators": [{"evaluator": "exact_match"}],
                "judge": {"consistency_rate": 0, **judge},
            }
        ],
    }


async def test_the_calibrated_panel_and_the_raw_verdict() -> None:
    # a lenient judge: people give half of what it says
    halve = [[0.0, 0.0], [1.0, 0.5]]
    async with start_judge_sim() as url:
        outcomes = {}
        for name, judge in [("raw", {}), ("calibrated", {"calibrate": True, "calibration": {"sim": halve}})]:
            _, suites = parse_config(config(url, judge))
            pipeline = Pipeline(suites)
            await pipeline.start()
            try:
                raw = orjson.dumps(
                    {
                        "id": "e1",
                        "model": "m",
                        "output": "Paris",
                        "expected": "Paris",
                        "category": "qa_simple",
                    }
                )
                outcomes[name] = (await pipeline.process(raw)).result
            finally:
                await pipeline.close()
    raw, calibrated = outcomes["raw"], outcomes["calibrated"]
    assert raw is not None and calibrated is not None and raw.judge and calibrated.judge
    judge_score = raw.judge.judges[0].score
    assert calibrated.judge.judges[0].score == judge_score  # the verdict keeps the raw score
    assert calibrated.judge.panel_score == pytest.approx(judge_score / 2)  # type: ignore[operator]
    assert "calibrated to human labels" in calibrated.judge.reason


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        ({"calibrate": True}, "needs mode blend and a calibration map"),
        ({"calibration": {"sim": [[0.5, 0.2], [0.4, 0.3]]}}, "judge scores must ascend"),
        ({"calibration": {"sim": [[0.1, 0.9], [0.4, 0.3]]}}, "human scores must not descend"),
        ({"calibration": {"sim": [[0.1, 1.5]]}}, "within 0-1"),
    ],
)
def test_bad_calibration_fails_at_start_with_its_path(judge: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_config(config("http://127.0.0.1:9", judge))
    assert "suites[0].judge" in str(info.value)
