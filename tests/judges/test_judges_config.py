"""Judge config validation: weights sum to 1 (sum shown), names, suite judge blocks, key handling."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from streameval.config import parse_config
from streameval.errors import ConfigError
from streameval.judges import JudgeClient, JudgeConfig, SuiteJudgeConfig, check_panel_weights, panel_score
from streameval.judges._pressure import BackpressureConfig
from streameval.judges.sim import demo_judges
from streameval.models import JudgeVerdict


def _judges(*weights: float, enabled: tuple[bool, ...] | None = None) -> list[dict[str, Any]]:
    flags = enabled or (True,) * len(weights)
    return [
        {
            "name": f"j{i}",
            "protocol": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "model": f"m{i}",
            "weight": w,
            "enabled": e,
        }
        for i, (w, e) in enumerate(zip(weights, flags, strict=True))
    ]


def _config(
    judges: list[dict[str, Any]], judge_block: dict[str, Any] | None = None, **suite: Any
) -> dict[str, Any]:
    s = {
        "name": "qa",
        "default": True,
        "evaluators": [{"evaluator": "exact_match"}],
        "judge": judge_block or {},
    }
    s.update(suite)
    return {"judges": judges, "suites": [s]}


def test_seed_003_weights_are_accepted() -> None:
    config, suites = parse_config(_config(_judges(0.30, 0.30, 0.40)))  # 0.3+0.3+0.4 != 1.0 in floats
    assert [j.name for j in suites.judges] == ["j0", "j1", "j2"]
    assert config.suites[0].judge is not None and config.suites[0].judge.metrics_weight == 0.4


@pytest.mark.parametrize(
    ("weights", "enabled", "shown"),
    [
        ((0.3, 0.3, 0.3), None, "sum to 0.9"),
        ((0.5, 0.6), None, "sum to 1.1"),
        ((0.3, 0.3, 0.4), (True, True, False), "sum to 0.6"),  # only enabled judges count
    ],
)
def test_weights_not_summing_to_one_is_a_config_error_showing_the_sum(
    weights: tuple[float, ...], enabled: tuple[bool, ...] | None, shown: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_config(_judges(*weights, enabled=enabled)))
    assert shown in str(info.value) and "judges" in info.value.issues[0].path


def test_disabled_judge_does_not_count() -> None:
    _, suites = parse_config(_config(_judges(0.5, 0.5, 0.7, enabled=(True, True, False))))
    assert [j.enabled for j in suites.judges] == [True, True, False]


def test_suite_subset_panel_weights_are_checked_on_the_subset() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_config(_judges(0.3, 0.3, 0.4), {"judges": ["j0", "j1"]}))
    assert "sum to 0.6" in str(info.value) and info.value.issues[0].path == "suites[0].judge.judges"


@pytest.mark.parametrize(
    ("block", "path", "words"),
    [
        ({"judges": ["nope"]}, "suites[0].judge.judges[0]", "unknown judge 'nope'"),
        (
            {"mode": "fallback", "fallbacks": [{"evaluator": "missing", "prompt": "equivalence"}]},
            "suites[0].judge.fallbacks[0].evaluator",
            "no evaluator named 'missing'",
        ),
        ({"min_judges": 4}, "suites[0].judge.min_judges", "more than the panel"),
        ({"mode": "fallback"}, "suites[0].judge", "non-empty 'fallbacks'"),
        ({"default_category": "poetry"}, "suites[0].judge.default_category", "unknown category"),
        ({"sample_rate": 1.5}, "suites[0].judge.sample_rate", "less than or equal to 1"),
        ({"prompt": "essay"}, "suites[0].judge.prompt", "'rubric' or 'report'"),
    ],
)
def test_bad_judge_blocks(block: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_config(_judges(0.3, 0.3, 0.4), block))
    assert any(i.path == path and words in i.message for i in info.value.issues), info.value.issues


def test_judge_block_without_judges_list() -> None:
    with pytest.raises(ConfigError, match="no top-level 'judges' list"):
        parse_config(_config([]))


def test_duplicate_judge_names() -> None:
    judges = _judges(0.5, 0.5)
    judges[1]["name"] = "j0"
    with pytest.raises(ConfigError, match="repeated: j0"):
        parse_config(_config(judges))


def test_reserved_panel_result_name() -> None:
    with pytest.raises(ConfigError, match="reserved"):
        parse_config(_config(_judges(1.0), evaluators=[{"evaluator": "exact_match", "name": "judge_panel"}]))


def test_keys_cannot_be_written_into_the_config() -> None:
    fields = _judges(1.0)[0] | {"api_key": "sk-should-not-be-here"}
    with pytest.raises(ValidationError) as info:
        JudgeConfig(**fields)
    assert "sk-should-not-be-here" not in str(info.value.errors(include_input=False))
    with pytest.raises(ConfigError) as cfg_info:
        parse_config(
            {"judges": [fields], "suites": [{"name": "s", "evaluators": [{"evaluator": "exact_match"}]}]}
        )
    assert "sk-should-not-be-here" not in str(cfg_info.value)


def test_defaults_follow_seed_003() -> None:
    cfg = JudgeConfig(**_judges(1.0)[0])
    assert (
        cfg.temperature,
        cfg.max_tokens,
        cfg.blind,
        cfg.attempts,
        cfg.retry_wait_s,
        cfg.scale,
        cfg.enabled,
    ) == (0.3, 2048, True, 3, 2.0, "1-5", True)


async def test_missing_key_variable_fails_at_start_naming_the_variable_only() -> None:
    cfg = JudgeConfig(**(_judges(1.0)[0] | {"api_key_env": "STREAMEVAL_TEST_NO_SUCH_KEY"}))
    client = JudgeClient(cfg, environ={})
    with pytest.raises(ConfigError, match="STREAMEVAL_TEST_NO_SUCH_KEY"):
        await client.start()


def test_demo_judges_fragment_is_seed_003_panel() -> None:
    judges = demo_judges("http://127.0.0.1:8700")
    assert [j["weight"] for j in judges] == [0.30, 0.30, 0.40]
    assert [j["protocol"] for j in judges] == ["openai", "anthropic", "anthropic"]
    assert [j["scale"] for j in judges] == ["1-5", "1-5", "0-10"]
    assert all("sim" in j["name"] and "simulated" in j["model"] for j in judges)
    assert check_panel_weights([JudgeConfig(**j) for j in judges]) is None


def _verdict(name: str, score: float | None, weight: float, ok: bool = True) -> JudgeVerdict:
    return JudgeVerdict(
        name=name,
        model="m",
        weight=weight,
        status="ok" if ok else "error",
        prompt="standard",
        scale="1-5",
        score=score,
    )


panels = st.lists(st.tuples(st.floats(0, 10), st.floats(0.01, 1), st.booleans()), min_size=1, max_size=6)


@given(panels, st.floats(0.1, 10), st.randoms())
def test_panel_score_invariants(panel: list[tuple[float, float, bool]], factor: float, rnd: Any) -> None:
    verdicts = [_verdict(f"j{i}", s, w, ok) for i, (s, w, ok) in enumerate(panel)]
    score = panel_score(verdicts)
    answered = [v for v in verdicts if v.status == "ok"]
    if not answered:
        assert score is None
        return
    assert score is not None and 0.0 <= score <= 10.0 + 1e-9
    assert min(v.score for v in answered) - 1e-6 <= score <= max(v.score for v in answered) + 1e-6  # type: ignore[type-var]
    scaled = [
        _verdict(v.name, v.score, min(1.0, v.weight * factor) if factor < 1 else v.weight, v.status == "ok")
        for v in verdicts
    ]
    if factor < 1:  # scaling every weight by the same factor changes nothing
        assert panel_score(scaled) == pytest.approx(score, abs=1e-5)
    shuffled = list(verdicts)
    rnd.shuffle(shuffled)
    assert panel_score(shuffled) == pytest.approx(score, abs=1e-5)  # order of judges does not matter


def test_the_documented_example_config_loads() -> None:
    import pathlib
    import re

    import yaml

    doc = (pathlib.Path(__file__).parents[2] / "docs" / "judges.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", doc, re.DOTALL)
    assert block is not None
    config, suites = parse_config(yaml.safe_load(block.group(1)))
    assert [j.weight for j in config.judges] == [0.30, 0.30, 0.40]
    assert [s.config.judge.mode for s in suites.all if s.config.judge] == ["blend", "blend", "fallback"]


def test_public_api_names() -> None:
    from streameval import judges

    assert len(set(judges.__all__)) == len(judges.__all__)
    assert all(getattr(judges, name, None) is not None for name in judges.__all__)
    assert {
        "JudgeConfig",
        "SuiteJudgeConfig",
        "JudgeHub",
        "JudgeCache",
        "JudgeError",
        "map_httpx_error",
        "PANEL_RESULT_NAME",
        "sampled",
        "parse_answer",
    } <= set(judges.__all__)


@pytest.mark.parametrize(
    "key", [*JudgeConfig.model_fields, *SuiteJudgeConfig.model_fields, *BackpressureConfig.model_fields]
)
def test_every_judge_option_is_documented(key: str) -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "judges.md").read_text(encoding="utf-8")
    assert f"| `{key}` |" in doc
