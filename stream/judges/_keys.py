"""A judge's API key (from a file, ``<api_key_env>_FILE`` or the variable) and the plain-HTTP rule."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..errors import ConfigError, ConfigIssue
from ..secrets import read_secret_file
from ._config import JudgeConfig
from ._urls import insecure_http_problem

__all__ = ["api_key", "insecure_http_problem"]


def api_key(cfg: JudgeConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """The key: ``api_key_file``, else the file named by ``<api_key_env>_FILE``, else ``<api_key_env>``.

    None when the judge has no key; :class:`ConfigError` naming the variable or file when it is missing."""
    env = os.environ if environ is None else environ
    path, where = cfg.api_key_file, "api_key_file"
    if path is None and cfg.api_key_env is not None and env.get(f"{cfg.api_key_env}_FILE"):
        path, where = env[f"{cfg.api_key_env}_FILE"], f"{cfg.api_key_env}_FILE"
    if path is not None:
        try:
            key = read_secret_file(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                [
                    ConfigIssue(
                        file="<environment>",
                        path=where,
                        message=(
                            f"judge {cfg.name!r}: cannot read its API key file {path}: {type(exc).__name__}"
                        ),
                    )
                ]
            ) from None
        if not key:
            raise ConfigError(
                [
                    ConfigIssue(
                        file="<environment>",
                        path=where,
                        message=f"judge {cfg.name!r}: its API key file {path} is empty",
                    )
                ]
            )
        return key
    if cfg.api_key_env is None:
        return None
    key = env.get(cfg.api_key_env, "").rstrip("\r\n")
    if not key:
        raise ConfigError(
            [
                ConfigIssue(
                    file="<environment>",
                    path=cfg.api_key_env,
                    message=f"judge {cfg.name!r} needs its API key in this variable "
                    f"(or a file named by {cfg.api_key_env}_FILE)",
                )
            ]
        )
    return key
