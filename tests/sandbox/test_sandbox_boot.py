"""The sandbox's processes start without importing the rest of streameval (stream/sandbox/_boot.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from streameval.sandbox import _boot, _evaluator


def imported_by(*args: str) -> set[str]:
    """Modules imported by ``python -I _boot.py ARGS`` (stdin empty: the zygote ends at once)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-I", _boot.__file__, *args],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env={},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [
        line.rpartition("|")[2].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    ]
    return set(lines)


@pytest.mark.parametrize("entry", _boot.ENTRIES)
def test_an_entry_module_runs_with_only_its_siblings_imported(entry: str) -> None:
    modules = imported_by(entry, "--help") if entry == "_launch" else imported_by(entry)
    ours = {m for m in modules if m.startswith("streameval")}
    # the entry module runs as __main__; its sibling imports show it ran
    assert ours == {"streameval.sandbox._confine", "streameval.sandbox._wire"}
    assert not modules & {"pydantic", "httpx", "redis", "orjson", "faust"}


def test_an_unknown_entry_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-I", _boot.__file__, "setup"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "_zygote,_launch" in done.stderr


def test_the_pools_start_their_processes_through_boot() -> None:
    assert _evaluator._python_pool().argv[:4] == [sys.executable, "-I", _boot.__file__, "_zygote"]
    assert _evaluator._node_pool(128).argv[:4] == [sys.executable, "-I", _boot.__file__, "_launch"]
