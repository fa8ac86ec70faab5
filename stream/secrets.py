"""Secrets given inline or as files (``…_FILE`` settings, as Kubernetes and Docker mount them).

A secret file's trailing newline is stripped (``echo token > file`` and secret volumes add one);
nothing else is changed. Values are read when used, so a rotated secret file is picked up by the
next connection. Nothing here logs a value.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

__all__ = ["check_secret_file", "read_secret", "read_secret_file"]


def read_secret_file(path: str) -> str:
    """The content of ``path`` without its trailing newline(s); ``OSError`` if unreadable."""
    return Path(path).read_text(encoding="utf-8").rstrip("\r\n")


def check_secret_file(path: str | None) -> str | None:
    """Validator for a ``…_FILE`` setting: the file must be readable and not empty (after the newline)."""
    if path is None:
        return None
    try:
        content = read_secret_file(path)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(f"cannot read secret file {path}: {type(exc).__name__}: {why}") from None
    if not content:
        raise ValueError(f"secret file {path} is empty")
    return path


def read_secret(value: SecretStr | None, path: str | None) -> str | None:
    """The secret from ``path`` when set, else ``value``; trailing newlines stripped either way."""
    if path is not None:
        return read_secret_file(path)
    return None if value is None else value.get_secret_value().rstrip("\r\n")
