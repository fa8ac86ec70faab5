"""Start a sandbox process without importing the rest of streameval.

``python -I .../streameval/sandbox/_boot.py _zygote|_launch [args...]`` runs that module as
``__main__``. ``python -m streameval.sandbox._zygote`` would first run ``streameval/__init__.py``
(the whole library: pydantic, httpx, every evaluator), ~1 s of CPU per start, paid again for every
Node.js host replaced after a timeout; under load a replacement then missed the next call's
deadline. The entry modules need only their siblings (``_confine``, ``_wire``) and the standard
library, so the two packages are registered as empty modules over their directories first.
"""

from __future__ import annotations

import runpy
import sys
import types
from pathlib import Path

__all__ = ["ENTRIES", "main"]

ENTRIES = ("_zygote", "_launch")


def main() -> None:
    entry = sys.argv[1] if len(sys.argv) > 1 else ""
    if entry not in ENTRIES:
        raise SystemExit(f"usage: python -I {__file__} {{{','.join(ENTRIES)}}} [arguments]")
    here = Path(__file__).resolve().parent
    for name, directory in (("streameval", here.parent), ("streameval.sandbox", here)):
        package = types.ModuleType(name)
        package.__path__ = [str(directory)]
        sys.modules[name] = package
    sys.argv = [f"streameval.sandbox.{entry}", *sys.argv[2:]]
    runpy.run_module(f"streameval.sandbox.{entry}", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
