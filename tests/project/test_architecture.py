"""docs/architecture.md stays true: every file it names exists, and each change's count matches its files."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
# a repository path in backticks: a directory part, or a file name with an extension
PATH = re.compile(r"`((?:[\w.<>-]+/)+(?:[\w.<>-]+)?|[\w<>-]+\.(?:py|md|json|toml))`")
KINDS = ("evaluator", "judge protocol", "output topic", "alert metric", "input format")


def _rows() -> dict[str, tuple[list[str], int]]:
    table = DOC.split("## Where each kind of change goes", 1)[1]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[2].isdigit():
            rows[cells[0]] = (PATH.findall(cells[1]), int(cells[2]))
    return rows


def test_every_named_file_exists() -> None:
    named = set(PATH.findall(DOC))
    assert len(named) > 20, "the pattern no longer finds the page's file names"
    missing = [p for p in sorted(named) if "<" not in p and not (ROOT / p).exists()]
    assert missing == [], f"docs/architecture.md names files that do not exist: {missing}"
    for placeholder in (p for p in named if "<" in p):
        assert (ROOT / placeholder.rsplit("/", 1)[0]).is_dir(), placeholder


def test_each_kind_of_change_has_its_files_counted() -> None:
    rows = _rows()
    for kind in KINDS:
        [row] = [r for r in rows if kind in r]
        files, count = rows[row]
        assert len(files) == count, f"{row!r}: {count} stated, {len(files)} listed: {files}"


def test_the_output_row_names_what_the_output_table_needs() -> None:
    """A new output topic's row lists the table module, and the table module says where its kinds go."""
    from streameval.outputs import OUTPUTS

    [row] = [r for r in _rows() if "output topic" in r]
    files, _ = _rows()[row]
    assert "stream/outputs.py" in files and "stream/models.py" in files
    for output in OUTPUTS:
        assert (ROOT / "schemas" / output.schema).is_file()
        assert output.model.__module__ == "streameval.models"


def test_no_module_shadows_a_package_of_the_distribution() -> None:
    """``stream/X.py`` and a package mapped to ``streameval.X`` (pyproject ``package-dir``) cannot both exist:
    the module would hide the package in a checkout and the wheel would hold both under one name."""
    import tomllib

    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    mapped = {name.removeprefix("streameval.") for name in package_dir if name.startswith("streameval.")}
    assert "examples" in mapped, "the pattern no longer finds the mapped packages"
    shadowing = sorted(name for name in mapped if (ROOT / "stream" / f"{name}.py").exists())
    assert shadowing == [], f"modules in stream/ with the name of a mapped package: {shadowing}"


#: per row of the change table: existing examples of that kind of change (a file naming any of them has a
#: part in that kind of change), each with whether to match case-insensitively
EXAMPLES: dict[str, list[tuple[str, bool]]] = {
    "evaluator": [("bleu_simple", False)],
    "judge protocol": [("AnthropicMessages", False), ("v1/messages", False), ("x-api-key", False)],
    "output topic": [("topic_aggregates", True)],
    "alert metric": [("p95_latency_ms", False)],
    "input format": [("otlp_json", False), ("otlp_proto", False)],
}
#: files that use a feature without being part of adding one: suite files, benchmarks and their page, this
#: page, and the glossary (it maps the spec documents to the code that implements them)
USERS = (
    "tests/",
    "bench/",
    "examples/",
    "deploy/",
    "docs/architecture.md",
    "docs/glossary.md",
    "docs/benchmarks.md",
)


def _tracked_files() -> list[str]:
    import subprocess

    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [f for f in listed.splitlines() if not f.startswith(USERS) and (ROOT / f).is_file()]


def _naming(files: list[str], word: str, ignore_case: bool) -> set[str]:
    pattern = re.compile(re.escape(word), re.IGNORECASE if ignore_case else 0)
    found = set()
    for name in files:
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:  # a binary file
            continue
        if pattern.search(text):
            found.add(name)
    return found


def _listed(path: str, patterns: list[str]) -> bool:
    """``path`` is one of the row's files, a placeholder (``<name>``) standing for any file name there."""
    for listed in patterns:
        if "<" in listed:
            folder, _, tail = listed.rpartition("/")
            suffix = tail[tail.index(">") + 1 :]
            if path.startswith(folder + "/") and path.endswith(suffix) and "/" not in path[len(folder) + 1 :]:
                return True
        elif path == listed:
            return True
    return False


def test_each_row_lists_every_file_its_examples_live_in() -> None:
    files = _tracked_files()
    assert "stream/pipeline.py" in files, "git ls-files found no sources"
    rows = _rows()
    assert set(EXAMPLES) == set(KINDS)
    for kind, examples in EXAMPLES.items():
        [row] = [r for r in rows if kind in r]
        listed, _ = rows[row]
        for word, ignore_case in examples:
            naming = _naming(files, word, ignore_case)
            assert naming, f"{word!r} ({kind}) is named nowhere: pick another example"
            outside = sorted(f for f in naming if not _listed(f, listed))
            assert outside == [], (
                f"{row!r}: {outside} name the existing example {word!r} but are not in the row; "
                "add them to docs/architecture.md (or make them derive what they need from a listed file)"
            )


def test_the_usage_check_would_catch_a_missing_file() -> None:
    """Without docs/suites.md in its row, the evaluator example is found outside the row."""
    naming = _naming(_tracked_files(), "bleu_simple", False)
    assert "docs/suites.md" in naming
    assert not _listed("docs/suites.md", ["stream/evaluators/<name>.py", "docs/metrics.md"])
    assert _listed("stream/evaluators/bleu.py", ["stream/evaluators/<name>.py"])
    assert not _listed("stream/evaluators/sub/bleu.py", ["stream/evaluators/<name>.py"])


def test_every_package_directory_is_in_the_distribution() -> None:
    """Each folder of stream/ with an ``__init__.py`` is listed in pyproject's ``packages``: setuptools leaves
    an unlisted one out of the wheel, and only the installed package (other Pythons, the wheel check) fails."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(("streameval", *init.parent.relative_to(ROOT / "stream").parts))
        for init in (ROOT / "stream").rglob("__init__.py")
        if "node_modules" not in init.parts
    }
    assert len(found) > 10, "the walk no longer finds the packages"
    assert sorted(found - listed) == [], "packages missing from pyproject's [tool.setuptools] packages"
