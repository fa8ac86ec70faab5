"""Sandboxed code evaluators (the evaluator-module spec §4): user code in Python or Node.js, confined by the kernel.

Importing this package registers the evaluator ``code``. See docs/sandbox.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._confine import Mechanisms, probe
from ._errors import SEED_ERROR_CODE, SandboxError, SandboxTimeout, SandboxUnavailable
from ._evaluator import NODE_MODULES, CodeEvaluator, CodeParams, allow_weaker_sandbox
from ._zygote import ALLOWED_MODULES

if TYPE_CHECKING:
    from .setup import sandbox_setup

__all__ = [
    "ALLOWED_MODULES",
    "NODE_MODULES",
    "SEED_ERROR_CODE",
    "CodeEvaluator",
    "CodeParams",
    "Mechanisms",
    "SandboxError",
    "SandboxTimeout",
    "SandboxUnavailable",
    "allow_weaker_sandbox",
    "probe",
    "sandbox_setup",
]


def __getattr__(name: str) -> object:
    # Imported on first use, not here: `python -m streameval.sandbox.setup` would otherwise find
    # the module already imported by this package and warn (runpy's RuntimeWarning).
    if name == "sandbox_setup":
        from .setup import sandbox_setup

        return sandbox_setup
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
