"""A real LiteLLM proxy for the gateway tests, in its own virtual environment made once and cached.

LiteLLM's proxy pins many packages of its own, so it never enters our environment: the first test
that needs it makes ``<cache>/litellm-<version>`` (``python -m venv`` + ``pip install
'litellm[proxy]==<version>'``, a few minutes once; a lock file keeps parallel runs from installing
twice) and later runs reuse it. ``<cache>`` is ``$STREAMEVAL_TEST_CACHE``, else
``~/.cache/streameval-test``. An install that fails fails the test with pip's last lines: a gateway
test never passes without a gateway.

The proxy serves mock models (``mock_response``: no upstream, no network beyond loopback):
``gw-json`` answers the rubric's JSON, ``gw-prose`` a refusal, ``gw-429`` LiteLLM's mock rate-limit
error, ``gw-slow`` the JSON after ``mock_delay``. Both protocols are served by the same proxy:
OpenAI at ``{url}/v1``, Anthropic at ``{url}`` (``/v1/messages``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

__all__ = ["LITELLM_VERSION", "MASTER_KEY", "RUBRIC_ANSWER", "ensure_litellm", "run_gateway"]

LITELLM_VERSION = "1.106.2"
MASTER_KEY = "sk-streameval-test-master"
RUBRIC_ANSWER = json.dumps(
    {
        "scores": {c: {"score": 4, "justification": "mock"} for c in ("accuracy", "conciseness", "clarity")},
        "overall_score": 4.0,
        "strengths": ["mock"],
        "weaknesses": ["mock"],
        "reasoning": "LiteLLM mock_response",
    },
    separators=(",", ":"),
)
_INSTALL_TIMEOUT_S = 1800


def _cache() -> Path:
    root = os.environ.get("STREAMEVAL_TEST_CACHE") or str(Path.home() / ".cache" / "streameval-test")
    return Path(root)


def ensure_litellm() -> Path:
    """The ``litellm`` executable of the cached environment, made on first use."""
    venv = _cache() / f"litellm-{LITELLM_VERSION}"
    exe = venv / "bin" / "litellm"
    marker = venv / ".installed"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"litellm-{LITELLM_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file() and exe.is_file():
            return exe
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        done = subprocess.run(
            [
                str(venv / "bin" / "pip"),
                "install",
                "-q",
                "--disable-pip-version-check",
                f"litellm[proxy]=={LITELLM_VERSION}",
            ],
            capture_output=True,
            text=True,
            timeout=_INSTALL_TIMEOUT_S,
        )
        if done.returncode != 0:
            tail = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("WARNING"))[
                -2000:
            ]
            raise RuntimeError(f"installing litellm[proxy]=={LITELLM_VERSION} into {venv} failed:\n{tail}")
        marker.write_text(LITELLM_VERSION)
    return exe


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(directory: Path) -> Path:
    import yaml  # here, not at the top: `python3 litellm_gateway.py` makes the environment with the stdlib alone

    def model(name: str, **params: object) -> dict[str, object]:
        return {
            "model_name": name,
            "litellm_params": {"model": f"openai/{name}", "api_key": "sk-upstream-unused", **params},
        }

    config = {
        "model_list": [
            model("gw-json", mock_response=RUBRIC_ANSWER),
            model("gw-prose", mock_response="I am unable to evaluate this material."),
            model("gw-429", mock_response="litellm.RateLimitError"),
            model("gw-slow", mock_response=RUBRIC_ANSWER, mock_delay=0.3),
        ],
        "general_settings": {"master_key": MASTER_KEY},
        "litellm_settings": {"num_retries": 0},
    }
    path = directory / "litellm.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@contextlib.contextmanager
def run_gateway(
    directory: Path, *, startup_s: float = 180.0
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start the proxy on a free loopback port; yields ``(url, process)``; stops it afterwards."""
    exe = ensure_litellm()
    port = _free_port()
    log = (directory / "litellm.log").open("wb")
    proc = subprocess.Popen(
        [
            str(exe),
            "--config",
            str(_config(directory)),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--num_workers",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=directory,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_s
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health/liveliness", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                tail = (directory / "litellm.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the LiteLLM proxy did not start (exit {proc.poll()}):\n{tail}")
            time.sleep(0.5)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


if __name__ == "__main__":  # .ci/run makes the environment ahead of the tests, with any python3
    print(ensure_litellm())
