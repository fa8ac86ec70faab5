"""Install the Node.js modules code evaluators may require: ``python -m streameval.sandbox.setup``.

Runs ``npm ci`` in the package's ``node/`` directory from the committed package-lock.json (exact
versions, integrity hashes checked), with install scripts disabled. Run it once at install or image
build time; nothing is ever downloaded at evaluation time.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from ._launch import NODE_DIR

__all__ = ["main", "sandbox_setup"]


def sandbox_setup(npm: str | None = None) -> None:
    """Install lodash, dayjs, validator and ajv (the evaluator-module spec §4.2) under
    ``streameval/sandbox/node``."""
    npm = npm or shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not on PATH; install Node.js 20 (with npm) first")
    subprocess.run(
        [npm, "ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streameval.sandbox.setup", description=__doc__)
    parser.add_argument("--npm", help="npm executable (default: npm on PATH)")
    options = parser.parse_args(argv)
    try:
        sandbox_setup(options.npm)
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"sandbox setup failed: {exc}", file=sys.stderr)
        return 1
    print(f"Node.js sandbox modules installed in {NODE_DIR / 'node_modules'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
