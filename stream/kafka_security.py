"""Kafka client security in one place: every client (the Faust app's consumer and producer, the topic
admin, ``produce``, ``tail``, ``/ready``'s broker check) is built from one :class:`KafkaSecurity`.

Settings (streameval.settings, docs/security.md): ``STREAMEVAL_KAFKA_SECURITY_PROTOCOL`` (PLAINTEXT,
SSL, SASL_PLAINTEXT, SASL_SSL), ``…_SASL_MECHANISM`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512,
OAUTHBEARER), ``…_SASL_USERNAME``, ``…_SASL_PASSWORD`` or ``…_SASL_PASSWORD_FILE``,
``…_SASL_OAUTH_TOKEN_PROVIDER``, ``…_SSL_CA_FILE``, ``…_SSL_CERT_FILE`` and ``…_SSL_KEY_FILE``
(mutual TLS), ``…_SSL_KEY_PASSWORD(_FILE)``, ``…_SSL_CHECK_HOSTNAME``.

OAUTHBEARER token-provider hook: ``STREAMEVAL_KAFKA_SASL_OAUTH_TOKEN_PROVIDER=package.module:name``
names an :class:`aiokafka.abc.AbstractTokenProvider` subclass, or a callable returning an instance,
importable by the worker (e.g. a provider signing MSK IAM tokens). It is called with no arguments.
"""

from __future__ import annotations

import importlib
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .errors import ConfigIssue
from .secrets import read_secret

if TYPE_CHECKING:
    from pydantic import SecretStr

__all__ = [
    "PROTOCOLS",
    "SASL_MECHANISMS",
    "KafkaSecurity",
    "KafkaSettings",
    "bootstrap_hosts",
    "kafka_security_issues",
]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_ENV = "STREAMEVAL_"


class KafkaSettings(Protocol):
    """The Kafka fields of :class:`streameval.settings.Settings` (the settings import this module, not the reverse)."""

    @property
    def kafka_bootstrap_servers(self) -> str: ...
    @property
    def kafka_security_protocol(self) -> str: ...
    @property
    def kafka_sasl_mechanism(self) -> str: ...
    @property
    def kafka_sasl_username(self) -> str | None: ...
    @property
    def kafka_sasl_password(self) -> SecretStr | None: ...
    @property
    def kafka_sasl_password_file(self) -> str | None: ...
    @property
    def kafka_sasl_oauth_token_provider(self) -> str | None: ...
    @property
    def kafka_ssl_ca_file(self) -> str | None: ...
    @property
    def kafka_ssl_cert_file(self) -> str | None: ...
    @property
    def kafka_ssl_key_file(self) -> str | None: ...
    @property
    def kafka_ssl_key_password(self) -> SecretStr | None: ...
    @property
    def kafka_ssl_key_password_file(self) -> str | None: ...
    @property
    def kafka_ssl_check_hostname(self) -> bool: ...


def bootstrap_hosts(bootstrap: str) -> list[str]:
    """``host:port`` entries of a bootstrap string; a ``kafka://`` or ``SASL_SSL://``-style prefix is dropped
    (the protocol comes from ``STREAMEVAL_KAFKA_SECURITY_PROTOCOL``, checked against the prefix at start)."""
    return [entry.strip().split("://", 1)[-1] for entry in bootstrap.split(",") if entry.strip()]


def _scheme_protocols(bootstrap: str) -> set[str]:
    return {e.strip().split("://", 1)[0].upper() for e in bootstrap.split(",") if "://" in e} - {"KAFKA"}


@dataclass(frozen=True)
class KafkaSecurity:
    """How clients authenticate and encrypt; the default is plaintext without authentication."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = None
    token_provider: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: str | None = None
    check_hostname: bool = True

    @classmethod
    def from_settings(cls, settings: KafkaSettings) -> KafkaSecurity:
        """The settings' security; secret files are read now (a rotated file counts from the next start)."""
        return cls(
            protocol=settings.kafka_security_protocol,
            mechanism=settings.kafka_sasl_mechanism,
            username=settings.kafka_sasl_username,
            password=read_secret(settings.kafka_sasl_password, settings.kafka_sasl_password_file),
            token_provider=settings.kafka_sasl_oauth_token_provider,
            ca_file=settings.kafka_ssl_ca_file,
            cert_file=settings.kafka_ssl_cert_file,
            key_file=settings.kafka_ssl_key_file,
            key_password=read_secret(settings.kafka_ssl_key_password, settings.kafka_ssl_key_password_file),
            check_hostname=settings.kafka_ssl_check_hostname,
        )

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def describe(self) -> str:
        """``SASL_SSL, SCRAM-SHA-512, user 'eval'``: for logs and errors (never a secret)."""
        parts = [self.protocol]
        if self.sasl:
            parts.append(self.mechanism)
            if self.mechanism != "OAUTHBEARER" and self.username:
                parts.append(f"user {self.username!r}")
        if self.cert_file:
            parts.append("client certificate")
        return ", ".join(parts)

    def __repr__(self) -> str:  # dataclass repr would print the password
        return f"KafkaSecurity({self.describe()})"

    def ssl_context(self) -> ssl.SSLContext | None:
        """A verifying client context (system CAs unless a CA file is set), or None without TLS."""
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=self.ca_file)
        context.check_hostname = self.check_hostname
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file, password=self.key_password)
        return context

    def token_provider_instance(self) -> Any:
        """The OAUTHBEARER provider named by ``token_provider`` (``module:name``), instantiated."""
        if not self.token_provider:
            raise ValueError("OAUTHBEARER needs STREAMEVAL_KAFKA_SASL_OAUTH_TOKEN_PROVIDER")
        module, _, name = self.token_provider.partition(":")
        if not name:
            module, _, name = self.token_provider.rpartition(".")
        target = getattr(importlib.import_module(module), name)
        return target()

    def aiokafka_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for any aiokafka client (producer, consumer, admin, connection)."""
        if self.protocol == "PLAINTEXT":
            return {}
        kwargs: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            kwargs["ssl_context"] = self.ssl_context()
        if self.sasl:
            kwargs["sasl_mechanism"] = self.mechanism
            if self.mechanism == "OAUTHBEARER":
                kwargs["sasl_oauth_token_provider"] = self.token_provider_instance()
            else:
                kwargs["sasl_plain_username"] = self.username
                kwargs["sasl_plain_password"] = self.password
        return kwargs


def kafka_security_issues(settings: KafkaSettings) -> list[ConfigIssue]:
    """Settings that cannot work together, each with the variable to fix (checked at start)."""
    issues: list[ConfigIssue] = []

    def issue(field: str, message: str) -> None:
        issues.append(ConfigIssue(file="<environment>", path=_ENV + field.upper(), message=message))

    protocol, mechanism = settings.kafka_security_protocol, settings.kafka_sasl_mechanism
    named = _scheme_protocols(settings.kafka_bootstrap_servers)
    if named and named != {protocol}:
        issue(
            "kafka_security_protocol",
            f"is {protocol} but the bootstrap servers name {', '.join(sorted(named))}; "
            "set the protocol here and give plain host:port bootstrap servers",
        )
    if settings.kafka_sasl_password is not None and settings.kafka_sasl_password_file is not None:
        issue("kafka_sasl_password_file", "set either the password or the password file, not both")
    if settings.kafka_ssl_key_password is not None and settings.kafka_ssl_key_password_file is not None:
        issue("kafka_ssl_key_password_file", "set either the key password or the key password file, not both")
    if protocol.startswith("SASL_"):
        if mechanism == "OAUTHBEARER":
            if not settings.kafka_sasl_oauth_token_provider:
                issue("kafka_sasl_oauth_token_provider", "OAUTHBEARER needs a token provider (module:name)")
        else:
            if not settings.kafka_sasl_username:
                issue("kafka_sasl_username", f"{protocol} with {mechanism} needs a user name")
            if settings.kafka_sasl_password is None and settings.kafka_sasl_password_file is None:
                issue("kafka_sasl_password", f"{protocol} with {mechanism} needs a password (or _FILE)")
    elif settings.kafka_sasl_username or settings.kafka_sasl_password or settings.kafka_sasl_password_file:
        issue(
            "kafka_security_protocol",
            f"SASL credentials are set but the protocol is {protocol} (use SASL_SSL or SASL_PLAINTEXT)",
        )
    tls_files = ("kafka_ssl_ca_file", "kafka_ssl_cert_file", "kafka_ssl_key_file")
    if protocol not in ("SSL", "SASL_SSL"):
        for field in tls_files:
            if getattr(settings, field):
                issue(field, f"is set but the protocol is {protocol}, which does not use TLS")
    if bool(settings.kafka_ssl_cert_file) != bool(settings.kafka_ssl_key_file) and not (
        settings.kafka_ssl_cert_file and not settings.kafka_ssl_key_file  # a PEM holding both is fine
    ):
        issue("kafka_ssl_cert_file", "a client key needs its certificate")
    if not issues and protocol in ("SSL", "SASL_SSL"):
        try:
            KafkaSecurity.from_settings(settings).ssl_context()
        except (OSError, ssl.SSLError) as exc:
            issue("kafka_ssl_ca_file", f"cannot load the TLS files: {type(exc).__name__}: {exc}")
    if not issues and protocol.startswith("SASL_") and mechanism == "OAUTHBEARER":
        try:
            KafkaSecurity.from_settings(settings).token_provider_instance()
        except Exception as exc:  # import or construction failed: say which and why
            issue(
                "kafka_sasl_oauth_token_provider",
                f"cannot load the token provider: {type(exc).__name__}: {exc}",
            )
    return issues
