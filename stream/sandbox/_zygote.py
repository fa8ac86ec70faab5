"""The Python zygote: a confined, warm process that forks one confined child per evaluation.

Started by the worker as ``python -I -m streameval.sandbox._zygote`` with an empty environment; it
speaks :mod:`._wire` frames on stdin/stdout. The first frame is the handshake
``{"allow_weaker": bool, "max_memory_mb": int}``; the answer is ``{"ready": true, "missing": [...]}``
or ``{"error": "..."}`` when a mechanism is missing and weaker confinement was not allowed.

Zygote (once): allowed modules imported, uid nobody when started as root, user + network namespace,
rlimits (address space, file size 0, few descriptors, no core), Landlock ruleset and seccomp
program built. Child (per call): descriptors closed, RLIMIT_AS = its own size + memory_mb,
RLIMIT_CPU, Landlock with no rules, seccomp deny list, then the user's code. The zygote kills the
child at the wall-clock deadline; the worker kills the zygote if even that does not answer.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import json
import math
import os
import resource
import select
import signal
import sys
import time
from collections import OrderedDict
from types import CodeType
from typing import Any

from . import _confine
from ._wire import read_frame, write_frame

__all__ = ["ALLOWED_MODULES", "MAX_RESULT_BYTES", "main"]

# the evaluator-module spec §4.2 names Node modules only; the Python list is ours: a short, pure-compute
# extension (documented in docs/sandbox.md). Everything here is imported in the zygote.
ALLOWED_MODULES = (
    "json",
    "math",
    "statistics",
    "re",
    "datetime",
    "collections",
    "itertools",
    "difflib",
    "string",
    "functools",
    "operator",
    "typing",
    "dataclasses",
    "decimal",
    "fractions",
    "unicodedata",
    "textwrap",
    "bisect",
    "heapq",
    "copy",
    "random",
    "hashlib",
    "base64",
    "time",
    "asyncio",
)
_SUBMODULES = ("collections.abc",)
#: The child's serialised result may not exceed this (the evaluator-module spec's results are a verdict, not a
#: payload).
MAX_RESULT_BYTES = 64 * 1024
_CHILD_NOFILE = 16  # stdio, the result pipe, and asyncio's epoll + self-pipe
_ZYGOTE_NOFILE = 64
_CODE_CACHE = 256
_FILENAME = "<evaluator>"


def _refuse_import(
    name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
) -> Any:
    top = name.partition(".")[0]
    if level != 0:
        raise ImportError("relative imports are not available in code evaluators")
    if top not in ALLOWED_MODULES:
        raise ImportError(
            f"module {name!r} is not allowed in code evaluators; allowed: {', '.join(ALLOWED_MODULES)}"
        )
    if name not in sys.modules:  # importing it would need file access, which the child does not have
        raise ImportError(f"module {name!r} is not preloaded in the sandbox; import {top!r} instead")
    return __import__(name, globals, locals, fromlist, level)


def _refuse(what: str) -> Any:
    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(f"{what} is not available in code evaluators (no file system, no console)")

    return refused


def _safe_builtins() -> dict[str, Any]:
    # Convenience, not the security boundary: Python-level restrictions can be escaped by
    # introspection; the kernel confinement holds regardless (see the hostile tests).
    safe = dict(vars(builtins))
    safe["__import__"] = _refuse_import
    for name in ("open", "input", "breakpoint", "help", "exit", "quit"):
        safe[name] = _refuse(name)
    return safe


class Zygote:
    def __init__(self, allow_weaker: bool, max_memory_mb: int) -> None:
        for module in ALLOWED_MODULES + _SUBMODULES:
            __import__(module)
        self.mechanisms = _confine.probe()
        self.missing = self.mechanisms.missing
        if self.missing and not allow_weaker:
            raise RuntimeError(
                "refusing to run code evaluators: this machine lacks "
                + "; ".join(self.missing)
                + " (set STREAMEVAL_ALLOW_WEAKER_SANDBOX=1 to run with weaker confinement)"
            )
        self.builtins = _safe_builtins()
        self.codes: OrderedDict[str, CodeType] = OrderedDict()
        self.devnull = os.open(os.devnull, os.O_RDWR)
        self.seccomp = _confine.seccomp_program("python-child") if self.mechanisms.seccomp else None
        self.landlock_abi = self.mechanisms.landlock_abi
        # Prebuilt in the zygote (the child only applies it): a ruleset granting nothing.
        self.ruleset = _confine.landlock_ruleset(self.landlock_abi) if self.landlock_abi else -1
        _confine.drop_root()
        if self.mechanisms.user_namespaces:
            _confine.unshare_network()
        baseline = _vm_size()
        _confine.set_limit(resource.RLIMIT_CORE, 0)
        _confine.set_limit(resource.RLIMIT_FSIZE, 0)
        _confine.set_limit(resource.RLIMIT_NOFILE, _ZYGOTE_NOFILE)
        # The zygote itself never grows much; this cap bounds each child's own (lower) limit.
        _confine.set_limit(resource.RLIMIT_AS, baseline + (max_memory_mb + 256) * 2**20)

    def compiled(self, code: str) -> CodeType:
        found = self.codes.get(code)
        if found is None:
            found = compile(code, _FILENAME, "exec")
            self.codes[code] = found
            if len(self.codes) > _CODE_CACHE:
                self.codes.popitem(last=False)
        else:
            self.codes.move_to_end(code)
        return found

    def serve(self, request: dict[str, Any]) -> Any:
        try:
            code = self.compiled(request["code"])
        except (SyntaxError, ValueError) as exc:  # checked at config load; kept for direct callers
            return {"error": "exception", "message": f"the code does not compile: {exc}"}
        timeout_s = request["timeout_ms"] / 1000
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; coverage cannot follow it
            try:  # whatever happens, the child never returns into the zygote's loop
                os.close(read_end)
                self._child(code, request, write_end)
            finally:
                os._exit(70)
        os.close(write_end)
        try:
            return self._collect(pid, read_end, time.monotonic() + timeout_s, request["timeout_ms"])
        finally:
            os.close(read_end)

    # -- the parent side of one call -------------------------------------------------------------
    def _collect(self, pid: int, fd: int, deadline: float, timeout_ms: int) -> Any:
        pidfd = os.pidfd_open(pid)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.register(pidfd, select.POLLIN)
        data = bytearray()
        open_pipe, exited, too_large = True, False, False
        try:
            while not exited or open_pipe:
                left = deadline - time.monotonic()
                if left <= 0:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    return {
                        "error": "timeout",
                        "message": f"timeout: the code ran longer than {timeout_ms} ms",
                    }
                for ready, _ in poller.poll(max(1, math.ceil(left * 1000))):
                    if ready == pidfd:
                        exited = True
                        poller.unregister(pidfd)
                    elif ready == fd:
                        chunk = os.read(fd, 65536)
                        if not chunk:
                            open_pipe = False
                            poller.unregister(fd)
                        elif len(data) + len(chunk) > MAX_RESULT_BYTES + 64:
                            too_large = True
                            os.kill(pid, signal.SIGKILL)
                        else:
                            data += chunk
        finally:
            os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        if too_large:
            return {"error": "too_large", "message": f"the result is larger than {MAX_RESULT_BYTES} bytes"}
        if os.WIFSIGNALED(status):
            sig = signal.Signals(os.WTERMSIG(status)).name
            if sig in ("SIGXCPU", "SIGKILL"):
                return {"error": "timeout", "message": f"timeout: the code used up its CPU time ({sig})"}
            return {"error": "crash", "message": f"the code's process died from {sig}"}
        if not data:
            code = os.waitstatus_to_exitcode(status)
            return {
                "error": "no_result",
                "message": f"the code ended its process (exit code {code}) without returning a result",
            }
        try:
            return json.loads(data)
        except ValueError:
            return {"error": "no_result", "message": "the code's process wrote a malformed result"}

    # -- the child ----------------------------------------------------------------------------
    def _child(self, code: CodeType, request: dict[str, Any], write_end: int) -> None:  # pragma: no cover
        try:
            # Park the two descriptors the child keeps above the low numbers, then put them at 3/4.
            high_write = os.dup2(write_end, _ZYGOTE_NOFILE - 2)
            high_rules = os.dup2(self.ruleset, _ZYGOTE_NOFILE - 1) if self.ruleset >= 0 else -1
            for target in (0, 1, 2):  # stdin was the request pipe; prints go nowhere
                os.dup2(self.devnull, target)
            os.dup2(high_write, 3)
            ruleset = os.dup2(high_rules, 4) if high_rules >= 0 else -1
            os.closerange(5, _ZYGOTE_NOFILE)
            # memory_mb on top of what this process already maps (the zygote grows with its code cache)
            ceiling = resource.getrlimit(resource.RLIMIT_AS)[1]
            memory = min(_vm_size() + request["memory_mb"] * 2**20, ceiling)
            _confine.set_limit(resource.RLIMIT_AS, memory)
            _confine.set_limit(resource.RLIMIT_CPU, math.ceil(request["timeout_ms"] / 1000) + 1)
            _confine.set_limit(resource.RLIMIT_NOFILE, _CHILD_NOFILE)
            __import__("random").seed()  # children would otherwise share the zygote's state
            _confine.set_no_new_privs()
            if ruleset >= 0:
                _confine.landlock_restrict(ruleset)
            if self.seccomp is not None:
                _confine.apply_seccomp(self.seccomp)
        except BaseException as exc:
            _write(3, _error("setup", f"sandbox setup failed: {exc}"))
            os._exit(1)
        try:
            reply = _run(code, request, self.builtins)
        except BaseException:
            reply = _error(
                "exception", "the code failed and its error could not be described (out of memory?)"
            )
        _write(3, reply)
        os._exit(0)


def _run(code: CodeType, request: dict[str, Any], safe_builtins: dict[str, Any]) -> bytes:
    """Run the user's module and its ``evaluate``; the reply frame's JSON body, never raising."""
    namespace: dict[str, Any] = {"__builtins__": safe_builtins, "__name__": "evaluator"}
    try:
        exec(code, namespace)
        evaluate = namespace.get("evaluate")
        if not callable(evaluate):
            raise TypeError("the code defines no function evaluate(input, output, expected, metadata)")
        args = request["args"]
        value = evaluate(args["input"], args["output"], args["expected"], args["metadata"])
        if inspect.iscoroutine(value):
            value = asyncio.run(value)
    except MemoryError:
        return _error("memory", f"the code exceeded its memory limit of {request['memory_mb']} MB")
    except BaseException as exc:
        return _error("exception", _describe(exc))
    try:
        text = json.dumps({"ok": value}, ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError, RecursionError) as exc:
        return _error("exception", f"the result is not JSON-serialisable: {exc}")
    except MemoryError:
        return _error("memory", f"the code exceeded its memory limit of {request['memory_mb']} MB")
    if len(text) > MAX_RESULT_BYTES:
        return _error("too_large", f"the result is larger than {MAX_RESULT_BYTES} bytes")
    return text


def _error(kind: str, message: str) -> bytes:
    return json.dumps({"error": kind, "message": message}).encode()


def _describe(exc: BaseException) -> str:
    line = None
    tb = exc.__traceback__
    while tb is not None:  # walked, not extracted: a 100,000-frame traceback must not allocate
        if tb.tb_frame.f_code.co_filename == _FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    where = f" (line {line})" if line is not None else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _write(fd: int, data: bytes) -> None:  # pragma: no cover - runs in the child
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:  # the zygote gave up on us (timeout): nothing left to say
        return


def _vm_size() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("cannot read VmSize from /proc/self/status")


def main() -> None:
    requests, replies = 0, os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing but frames may reach the reply pipe
    try:
        hello = read_frame(requests)
        zygote = Zygote(bool(hello["allow_weaker"]), int(hello["max_memory_mb"]))
    except Exception as exc:
        write_frame(replies, {"error": str(exc)})
        return
    write_frame(replies, {"ready": True, "missing": zygote.missing})
    while True:
        try:
            request = read_frame(requests)
        except EOFError:
            return
        write_frame(replies, zygote.serve(request))


if __name__ == "__main__":
    main()
