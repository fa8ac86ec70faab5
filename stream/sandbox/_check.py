"""Config-load checks of evaluator code: it compiles, and it defines the function. Nothing is run.

Python: ``compile`` plus a look at the module's top level for ``def evaluate`` / ``async def
evaluate`` / ``evaluate = ...``. Node.js: the code is compiled (never run) by ``node`` inside the
same CommonJS wrapper the host uses, and must assign ``module.exports`` (or ``exports.evaluate``).
Each failure is a ``ValueError`` whose message the config loader shows with the field path.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess

__all__ = ["check_node", "check_python", "node_binary"]

_NODE_COMPILE = r"""
const vm = require('vm');
let src = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (c) => { src += c; });
process.stdin.on('end', () => {
  try {
    new vm.Script('(function (exports, require, module, __filename, __dirname) {' + src + '\n})',
                  { filename: 'evaluator.js' });
  } catch (e) {
    const line = /evaluator\.js:(\d+)/.exec(String(e.stack));
    process.stdout.write(e.name + ': ' + e.message + (line ? ' (line ' + line[1] + ')' : ''));
    process.exit(1);
  }
});
"""
_EXPORTS = re.compile(r"\bmodule\.exports\s*=|\bexports\.evaluate\s*=")


def check_python(code: str) -> None:
    try:
        tree = ast.parse(code, "<evaluator>")
        compile(tree, "<evaluator>", "exec")
    except SyntaxError as exc:
        raise ValueError(f"Python code does not compile: {exc.msg} (line {exc.lineno})") from None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "evaluate":
            return
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "evaluate" for t in node.targets
        ):
            return
    raise ValueError(
        "Python code must define a top-level function evaluate(input, output, expected, metadata)"
    )


def node_binary() -> str:
    """The node executable: ``$STREAMEVAL_NODE`` or ``node`` on PATH; ``ValueError`` when absent."""
    node = os.environ.get("STREAMEVAL_NODE") or shutil.which("node")
    if not node:
        raise ValueError("Node.js code evaluators need node (v20+) on PATH or in STREAMEVAL_NODE")
    return node


def check_node(code: str) -> None:
    node = node_binary()
    try:
        done = subprocess.run(
            [node, "-e", _NODE_COMPILE],
            input=code.encode(),
            capture_output=True,
            env={},
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(f"cannot check the Node.js code with {node}: {exc}") from None
    if done.returncode != 0:
        message = (
            done.stdout.decode("utf-8", "replace").strip() or done.stderr.decode("utf-8", "replace")[-300:]
        )
        raise ValueError(f"Node.js code does not compile: {message}")
    if not _EXPORTS.search(code):
        raise ValueError(
            "Node.js code must export its function: module.exports = async function evaluate(input, output, expected, metadata)"
        )
