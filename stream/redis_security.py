"""Redis TLS and ACL settings next to ``REDIS_URL`` (docs/security.md).

``rediss://`` in the URL turns TLS on; ``STREAMEVAL_REDIS_SSL_CA_FILE``, ``…_SSL_CERT_FILE``,
``…_SSL_KEY_FILE`` and ``…_SSL_CHECK_HOSTNAME`` add what redis-py would otherwise take as URL query
parameters; ``STREAMEVAL_REDIS_USERNAME`` and ``STREAMEVAL_REDIS_PASSWORD`` (or ``…_PASSWORD_FILE``, read
again for every new connection, so a rotated secret is picked up) keep the password out of the URL.
:func:`redis_options` gives the keyword arguments for ``Redis.from_url`` / ``ConnectionPool.from_url``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from redis.credentials import CredentialProvider

from .errors import ConfigIssue
from .secrets import read_secret

if TYPE_CHECKING:
    from pydantic import SecretStr

__all__ = ["FileCredentials", "RedisSettings", "redis_options", "redis_security_issues"]


class RedisSettings(Protocol):
    """The Redis fields of :class:`streameval.settings.Settings` (the settings import this module, not the reverse)."""

    @property
    def redis_url(self) -> str | None: ...
    @property
    def redis_username(self) -> str | None: ...
    @property
    def redis_password(self) -> SecretStr | None: ...
    @property
    def redis_password_file(self) -> str | None: ...
    @property
    def redis_ssl_ca_file(self) -> str | None: ...
    @property
    def redis_ssl_cert_file(self) -> str | None: ...
    @property
    def redis_ssl_key_file(self) -> str | None: ...
    @property
    def redis_ssl_check_hostname(self) -> bool: ...


class FileCredentials(CredentialProvider):
    """ACL user name and password, the password read from its file for each new connection."""

    def __init__(self, username: str | None, password_file: str) -> None:
        self.username, self.password_file = username, password_file

    def get_credentials(self) -> tuple[str] | tuple[str, str]:
        password = read_secret(None, self.password_file) or ""
        return (self.username, password) if self.username else (password,)

    async def get_credentials_async(self) -> tuple[str] | tuple[str, str]:
        return self.get_credentials()

    def __repr__(self) -> str:
        return f"FileCredentials(username={self.username!r})"


def redis_options(settings: RedisSettings) -> dict[str, Any]:
    """Extra keyword arguments for redis-py's ``from_url`` built from the Redis settings ({} when none)."""
    options: dict[str, Any] = {}
    if settings.redis_password_file:
        options["credential_provider"] = FileCredentials(
            settings.redis_username, settings.redis_password_file
        )
    else:
        if settings.redis_username:
            options["username"] = settings.redis_username
        if settings.redis_password is not None:
            options["password"] = read_secret(settings.redis_password, None)
    if settings.redis_ssl_ca_file:
        options["ssl_ca_certs"] = settings.redis_ssl_ca_file
    if settings.redis_ssl_cert_file:
        options["ssl_certfile"] = settings.redis_ssl_cert_file
        options["ssl_keyfile"] = settings.redis_ssl_key_file
    if _tls(settings.redis_url):
        options["ssl_check_hostname"] = settings.redis_ssl_check_hostname
    return options


def _tls(url: str | None) -> bool:
    return bool(url) and urlsplit(url or "").scheme in (
        "rediss",
        "rediss+cluster",
    )  # TLS to a node or a cluster


def redis_security_issues(settings: RedisSettings) -> list[ConfigIssue]:
    """Redis settings that cannot work together, each with the variable to fix."""
    issues: list[ConfigIssue] = []

    def issue(field: str, message: str) -> None:
        issues.append(ConfigIssue(file="<environment>", path="STREAMEVAL_" + field.upper(), message=message))

    if settings.redis_password is not None and settings.redis_password_file is not None:
        issue("redis_password_file", "set either the password or the password file, not both")
    if settings.redis_url and not _tls(settings.redis_url):
        for field in ("redis_ssl_ca_file", "redis_ssl_cert_file", "redis_ssl_key_file"):
            if getattr(settings, field):
                issue(field, "is set but REDIS_URL is not rediss:// or rediss+cluster:// (TLS)")
    if (
        settings.redis_url
        and urlsplit(settings.redis_url).password
        and (settings.redis_password is not None or settings.redis_password_file is not None)
    ):
        issue("redis_password", "REDIS_URL carries a password too; give it in one place")
    if settings.redis_ssl_key_file and not settings.redis_ssl_cert_file:
        issue("redis_ssl_key_file", "a client key needs its certificate (STREAMEVAL_REDIS_SSL_CERT_FILE)")
    return issues
