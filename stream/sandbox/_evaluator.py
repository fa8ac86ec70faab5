"""The ``code`` evaluator (the evaluator-module spec §4): user code in Python or Node.js, run confined per event.

.. code-block:: yaml

    - evaluator: code
      params:
        language: nodejs          # python | nodejs
        timeout_ms: 5000          # the evaluator-module spec §4.3: 5 s
        memory_mb: 128            # the evaluator-module spec §4.3: 128 MB
        code: |
          module.exports = async function evaluate(input, output, expected, metadata) {
            return { passed: output.length >= 100, score: Math.min(1, output.length / 100) };
          };

Errors (exception, crash, memory, bad return) fail the evaluator with error ``execution_failed``
(the evaluator-module spec's code 503002) and the reason; a timeout with ``timeout``. ``start()`` raises
:class:`SandboxUnavailable` when the machine cannot confine code, unless the operator set
``STREAMEVAL_ALLOW_WEAKER_SANDBOX=1``: code never runs unconfined silently.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from ..evaluators._base import Evaluator, Params, Score, register
from ..evaluators._base import Params as ParamsBase
from ..models import RequestEvent
from . import _boot
from ._check import check_node, check_python, node_binary
from ._errors import SandboxError, SandboxUnavailable
from ._launch import NODE_DIR
from ._pool import SandboxPool, acquire_pool, default_slots, release_pool
from ._result import to_score
from ._stage import host_node_dir

__all__ = ["NODE_MODULES", "CodeEvaluator", "CodeParams", "allow_weaker_sandbox"]

#: the evaluator-module spec §4.2: the modules Node.js code may require
NODE_MODULES = ("lodash", "dayjs", "validator", "ajv")
MAX_MEMORY_MB = 2048
_NODE_RECYCLE_AFTER = 1000  # calls; bounds what a long-lived host can accumulate
_NODE_DATA_HEADROOM_MB = 384  # node's own code, stacks and buffers on top of the JS heap
_BOOT = _boot.__file__  # starts the zygote and the Node launcher without importing all of streameval


def allow_weaker_sandbox() -> bool:
    """The operator's explicit opt-in (``STREAMEVAL_ALLOW_WEAKER_SANDBOX``) to run without a missing mechanism."""
    return os.environ.get("STREAMEVAL_ALLOW_WEAKER_SANDBOX", "").strip().lower() in ("1", "true", "yes")


class CodeParams(Params):
    language: Literal["python", "nodejs"] = Field(description="python or nodejs")
    code: str = Field(
        min_length=1,
        max_length=200_000,
        description="defines evaluate(input, output, expected, metadata) -> {passed, score?, reason?, details?}",
    )
    timeout_ms: int = Field(
        default=5000, ge=1, le=60_000, description="wall-clock limit per call (default: 5 s)"
    )
    memory_mb: int = Field(default=128, ge=16, le=MAX_MEMORY_MB, description="memory limit (default: 128 MB)")

    @field_validator("code")
    @classmethod
    def _check_code(cls, code: str, info: ValidationInfo) -> str:
        # `language` is declared first, so it is validated (or has failed) by now
        language = info.data.get("language")
        if language == "python":
            check_python(code)
        elif language == "nodejs":
            check_node(code)
        return code


def _python_pool() -> SandboxPool:
    return SandboxPool(
        "Python sandbox zygote",
        [sys.executable, "-I", _BOOT, "_zygote"],
        default_slots(),
        hello={"allow_weaker": allow_weaker_sandbox(), "max_memory_mb": MAX_MEMORY_MB},
    )


def _node_pool(memory_mb: int) -> SandboxPool:
    missing = [m for m in NODE_MODULES if not (NODE_DIR / "node_modules" / m / "package.json").is_file()]
    if missing:
        raise SandboxUnavailable(
            f"the Node.js sandbox modules are not installed ({', '.join(missing)} missing); "
            "run `python -m streameval.sandbox.setup` once after installing streameval"
        )
    try:
        node = node_binary()
    except ValueError as exc:
        raise SandboxUnavailable(str(exc)) from None
    node_dir = host_node_dir()
    node_argv = [
        node,
        f"--max-old-space-size={memory_mb}",
        "--disallow-code-generation-from-strings",
        f"--openssl-config={node_dir / 'openssl.cnf'}",
        str(node_dir / "host.js"),
    ]
    launcher = [
        sys.executable,
        "-I",
        _BOOT,
        "_launch",
        "--data-mb",
        str(memory_mb + _NODE_DATA_HEADROOM_MB),
        "--allow-weaker",
        str(int(allow_weaker_sandbox())),
        "--node-dir",
        str(node_dir),
    ]
    return SandboxPool(
        f"Node.js sandbox host ({memory_mb} MB)",
        [*launcher, "--", *node_argv],
        default_slots(),
        recycle_after=_NODE_RECYCLE_AFTER,
        restart_on=frozenset({"timeout"}),
    )


@register
class CodeEvaluator(Evaluator):
    """Runs the user's ``evaluate`` in the sandbox and validates what it returns."""

    name = "code"
    summary = "user code (Python or Node.js) run in a kernel-confined sandbox"
    Params = CodeParams
    params: CodeParams
    is_async = True

    def __init__(self, params: ParamsBase) -> None:
        super().__init__(params)
        self._pool: SandboxPool | None = None
        self._key: tuple[Any, ...] = (
            ("python",) if self.params.language == "python" else ("nodejs", self.params.memory_mb)
        )

    async def start(self) -> None:
        if self._pool is None:
            memory = self.params.memory_mb
            factory = _python_pool if self.params.language == "python" else (lambda: _node_pool(memory))
            self._pool = await acquire_pool(self._key, factory)

    async def close(self) -> None:
        if self._pool is not None:
            self._pool = None
            await release_pool(self._key)

    async def aevaluate(self, event: RequestEvent) -> Score:
        if self._pool is None:
            raise SandboxError("the code evaluator was not started (the pipeline calls start() first)")
        request: dict[str, Any] = {
            "code": self.params.code,
            "args": {
                "input": event.input,
                "output": event.output,
                "expected": event.expected,
                "metadata": event.metadata,
            },
            "timeout_ms": self.params.timeout_ms,
            "memory_mb": self.params.memory_mb,
        }
        return to_score(await self._pool.call(request, self.params.timeout_ms))
