"""Errors of the code sandbox.

::

    EvaluatorError (streameval.errors)
    └── SandboxError           code "execution_failed" — evaluator-module spec error 503002 (execution failed)
        ├── SandboxTimeout     code "timeout" (also an EvaluatorTimeout)
        └── SandboxUnavailable code "sandbox_unavailable": a confinement mechanism is missing, or
                               the Node modules are not installed; raised by ``start()``, so the
                               worker refuses to start rather than run code unconfined
"""

from __future__ import annotations

from ..errors import EvaluatorError, EvaluatorTimeout

__all__ = ["SEED_ERROR_CODE", "SandboxError", "SandboxTimeout", "SandboxUnavailable"]

#: the evaluator-module spec §9: 503002 = 评估器执行失败 (evaluator execution failed)
SEED_ERROR_CODE = 503002


class SandboxError(EvaluatorError):
    """The user's code could not produce a valid verdict (exception, crash, bad return, limits)."""

    code = "execution_failed"
    seed_code = SEED_ERROR_CODE


class SandboxTimeout(SandboxError, EvaluatorTimeout):
    code = "timeout"


class SandboxUnavailable(SandboxError):
    code = "sandbox_unavailable"
