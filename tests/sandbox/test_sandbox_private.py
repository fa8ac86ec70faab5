"""The Node.js sandbox host works when streameval is installed under a directory only root may enter.

Run as root, the host becomes uid nobody, which cannot pass a 0700 directory (a checkout in
``mktemp -d``, a virtualenv under /root). The worker then gives the host a readable copy of its files
(stream/sandbox/_stage.py); the launcher says why and what to do when the host still cannot read them.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import streameval
from streameval.sandbox import NODE_MODULES, probe
from streameval.sandbox._launch import NODE_DIR
from streameval.sandbox._stage import host_node_dir, others_can_read

_READY = shutil.which("node") is not None and all(
    (NODE_DIR / "node_modules" / m).is_dir() for m in NODE_MODULES
)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the host drops privileges only when root")
needs_sandbox = pytest.mark.skipif(
    bool(probe().missing), reason=f"sandbox mechanisms missing: {probe().missing}"
)
needs_node = pytest.mark.skipif(
    not _READY, reason="node or the sandbox modules are missing (python -m streameval.sandbox.setup)"
)


@pytest.fixture
def private() -> Iterator[Path]:
    """A directory like ``mktemp -d`` makes: mode 0700, owned by the test's user."""
    path = Path(tempfile.mkdtemp(prefix="streameval-private-"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="streameval-open-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _tree(root: Path) -> Path:
    (root / "node" / "lib").mkdir(parents=True)
    (root / "node" / "host.js").write_text("'use strict';\n")
    (root / "node" / "lib" / "index.js").write_text("module.exports = 1;\n")
    for path in (root, root / "node", root / "node" / "lib"):
        path.chmod(0o755)
    return root / "node"


@pytest.mark.parametrize(
    ("spoil", "readable"),
    [
        (None, True),
        ("parent 0700", False),
        ("file 0600", False),
        ("subdirectory 0700", False),
        ("symbolic link", False),
    ],
)
def test_others_can_read(open_dir: Path, spoil: str | None, readable: bool) -> None:
    node = _tree(open_dir / "pkg")
    if spoil == "parent 0700":
        (open_dir / "pkg").chmod(0o700)
    elif spoil == "file 0600":
        (node / "lib" / "index.js").chmod(0o600)
    elif spoil == "subdirectory 0700":
        (node / "lib").chmod(0o700)
    elif spoil == "symbolic link":
        (node / "link.js").symlink_to(node / "host.js")
    assert others_can_read(node) is readable


@needs_root
def test_a_private_node_dir_is_staged_readable_and_removed_at_exit(private: Path) -> None:
    node = _tree(private / "pkg")
    (node / "lib" / "index.js").chmod(0o600)  # a umask 077 checkout
    script = (
        "import sys; from pathlib import Path; from streameval.sandbox._stage import host_node_dir, others_can_read\n"
        "staged = host_node_dir(Path(sys.argv[1]))\n"
        "assert host_node_dir(Path(sys.argv[1])) == staged  # once per process\n"
        "print(staged, others_can_read(staged))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(node)], capture_output=True, text=True, timeout=60, check=True
    )
    staged, readable = done.stdout.split()
    assert readable == "True"
    assert Path(staged) != node and Path(staged).name == "node"
    assert not Path(staged).exists(), "the staged copy outlived its process"


@needs_root
def test_a_readable_node_dir_is_used_in_place(open_dir: Path) -> None:
    node = _tree(open_dir / "pkg")
    assert host_node_dir(node) == node


@needs_root
@needs_sandbox
@needs_node
@pytest.mark.parametrize("private_file", ["node directory", "node binary"])
def test_the_launcher_says_why_the_host_cannot_start(
    private: Path, open_dir: Path, private_file: str
) -> None:
    node, node_dir = str(shutil.which("node")), _tree(open_dir / "pkg")
    if private_file == "node directory":
        node_dir = _tree(private / "pkg")
    else:
        (private / "node").symlink_to(node)
        node = str(private / "node")
    (node_dir / "openssl.cnf").write_text("")
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-m",
            "streameval.sandbox._launch",
            "--data-mb",
            "512",
            "--node-dir",
            str(node_dir),
            "--",
            node,
            str(node_dir / "host.js"),
        ],
        capture_output=True,
        timeout=30,
        env={},
        check=False,
    )
    (size,) = struct.unpack(">I", done.stdout[:4])
    error = json.loads(done.stdout[4 : 4 + size])["error"]
    assert error.startswith("the Node.js sandbox host runs as uid nobody (65534; the worker runs as root)")
    if private_file == "node directory":
        assert f"cannot read {node_dir} (it may not enter {private}): install streameval where" in error
    else:
        assert f"cannot run {node} (it may not enter {private}): install Node.js where every user" in error


@needs_root
@needs_sandbox
@needs_node
def test_node_evaluators_run_from_a_package_in_a_private_directory(private: Path) -> None:
    """The whole package, Node modules included, copied under a 0700 directory and imported from there."""
    package = private / "streameval"
    shutil.copytree(Path(streameval.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    script = r"""
import asyncio, uuid
import streameval
from streameval.evaluators import build_evaluator
from streameval.models import RequestEvent
from streameval.sandbox._stage import host_node_dir

async def main():
    evaluator = build_evaluator("code", {"language": "nodejs", "code": (
        "const _ = require('lodash');\n"
        "module.exports = async (input, output) => ({ passed: _.words(output).length === 2, reason: 'ok' });")})
    await evaluator.start()
    try:
        score = await evaluator.aevaluate(RequestEvent(id=str(uuid.uuid4()), model="m", output="hello world"))
    finally:
        await evaluator.close()
    print(streameval.__file__, host_node_dir(), score.passed, score.reason)

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(private)},
        cwd=private,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    imported, staged, passed, reason = done.stdout.split()
    assert Path(imported).is_relative_to(package)
    assert not Path(staged).is_relative_to(private)
    assert (passed, reason) == ("True", "ok")
