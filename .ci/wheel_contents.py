"""Check that a built wheel holds every tracked file of the packaged directories.

Usage: python .ci/wheel_contents.py WHEEL (from the repository root). The directories and the
package each one becomes are read from pyproject.toml's ``[tool.setuptools] package-dir``, so a file
added under stream/, agents/, schemas/ or examples/ without a matching package-data pattern (a web
asset, a schema, the Node host) fails CI here, even when the demo does not need it.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile


def expected_names() -> set[str]:
    with open("pyproject.toml", "rb") as file:
        package_dir: dict[str, str] = tomllib.load(file)["tool"]["setuptools"]["package-dir"]
    by_source = {source.rstrip("/"): package.replace(".", "/") for package, source in package_dir.items()}
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--", *by_source], capture_output=True, text=True, check=True
    ).stdout.split("\0")
    names = set()
    for path in filter(None, tracked):
        source = max((s for s in by_source if path.startswith(s + "/")), key=len)
        names.add(by_source[source] + path[len(source) :])
    return names


def main(wheel: str) -> int:
    expected = expected_names()
    with zipfile.ZipFile(wheel) as archive:
        present = set(archive.namelist())
    missing = sorted(expected - present)
    for name in missing:
        print(f"missing from the wheel: {name}", file=sys.stderr)
    print(f"wheel contents: {len(expected) - len(missing)} of {len(expected)} tracked package files present")
    return 1 if missing or not expected else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
