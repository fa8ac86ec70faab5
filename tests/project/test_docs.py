"""The README documents every option a user can set, and its set-up commands are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streameval.cli import _parser
from streameval.config import EvaluatorSpec, Match, SessionConfig, SuiteConfig
from streameval.evaluators import evaluator_names
from streameval.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = README + "".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))


def first_screen_commands() -> list[str]:
    head = README.split("---", 1)[0]
    block = re.search(r"```bash\n(.*?)```", head, flags=re.S)
    assert block, "the README's first screen has no bash block"
    return [line for line in block.group(1).splitlines() if line and not line.startswith("#")]


def test_two_setup_commands_on_the_first_screen() -> None:
    commands = first_screen_commands()
    assert len(commands) == 2
    assert commands[0].endswith("streameval demo")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert first_screen_commands()[1] in ci.splitlines()


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_is_documented(name: str) -> None:
    assert f"`STREAMEVAL_{name.upper()}`" in README


# the evaluators test modules register (``test_*``) are left out: whether they are registered yet
# depends on which test folders were collected before this one
@pytest.mark.parametrize("name", [n for n in evaluator_names() if not n.startswith("test_")])
def test_every_evaluator_is_documented(name: str) -> None:
    assert f"`{name}`" in DOCS


def cli_options() -> list[tuple[str, str]]:
    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    out = []
    for command, subparser in sub.choices.items():  # type: ignore[attr-defined]
        for action in subparser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    out.append((command, option))
        out.append((command, ""))
    return out


@pytest.mark.parametrize(("command", "option"), cli_options())
def test_every_cli_command_and_option_is_documented(command: str, option: str) -> None:
    row = next((line for line in README.splitlines() if line.startswith(f"| `streameval {command}")), None)
    assert row is not None, f"no row for streameval {command}"
    assert option in row


@pytest.mark.parametrize(
    "key",
    [f"suites[].{k}" for k in SuiteConfig.model_fields]
    + [f"suites[].evaluators[].{k}" for k in EvaluatorSpec.model_fields],
)
def test_every_suite_key_is_documented(key: str) -> None:
    assert f"`{key}`" in README
    for field in Match.model_fields:
        assert f"`{field}`" in README


@pytest.mark.parametrize("key", [f"sessions[].{k}" for k in SessionConfig.model_fields])
def test_every_session_key_is_documented(key: str) -> None:
    assert f"`{key}`" in README
    assert f"`{key.removeprefix('sessions[].')}`" in (ROOT / "docs" / "sessions.md").read_text(
        encoding="utf-8"
    )


def input_keys() -> list[str]:
    from streameval.inputs import JsonInput, NativeInput, OtlpInput

    return sorted(
        {f"inputs[].{k}" for model in (NativeInput, JsonInput, OtlpInput) for k in model.model_fields}
    )


@pytest.mark.parametrize("key", input_keys())
def test_every_input_key_is_documented(key: str) -> None:
    assert f"`{key}`" in (ROOT / "docs" / "inputs.md").read_text(encoding="utf-8")
    assert f"`{key.removeprefix('inputs[].')}`" in README  # the README's suite-key table lists it too


def test_every_input_format_is_documented() -> None:
    from streameval.inputs import FORMATS

    assert [f for f in FORMATS if f"`{f}`" not in README or f"`{f}`" not in DOCS.split(README, 1)[1]] == []
