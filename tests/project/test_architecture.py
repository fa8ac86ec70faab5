"""docs/architecture.md stays true: every file it names exists, and each change's count matches its files."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
# a repository path in backticks: a directory part, or a file name with an extension
PATH = re.compile(r"`((?:[\w.<>-]+/)+(?:[\w.<>-]+)?|[\w<>-]+\.(?:py|md|json))`")
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
