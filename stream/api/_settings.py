"""Settings of the HTTP server (the ``streameval api`` command and the worker's web server).

Environment variables ``STREAMEVAL_<FIELD>`` like :class:`streameval.settings.Settings`; documented
in docs/api.md (a test checks every field is).
"""

from __future__ import annotations

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from ..errors import ConfigError, ConfigIssue
from ..registry import DEFAULT_MAX_CODE_BYTES, DEFAULT_MAX_EVALUATORS, RegistryLimits

__all__ = ["ApiSettings", "load_api_settings"]


class ApiSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMEVAL_", frozen=True, extra="ignore")

    api_token: SecretStr | None = Field(
        default=None, description="bearer token required by every write (POST/PUT/DELETE); unset: writes are refused"
    )
    web_host: str = Field(default="127.0.0.1", description="address the HTTP server binds (0.0.0.0 in containers)")
    web_port: int | None = Field(
        default=None, ge=0, le=65535,
        description="worker: serve /health, /ready, /metrics, the API and pages on this port (unset: no server); "
        "`streameval api` defaults to 8080",
    )  # fmt: skip
    registry_resync_s: float = Field(
        default=5.0, gt=0, description="workers re-read the evaluator registry at least this often (pub/sub is instant)"
    )
    ready_timeout_s: float = Field(default=2.0, gt=0, description="limit of each /ready check, s")
    registry_max_evaluators: int = Field(
        default=DEFAULT_MAX_EVALUATORS, ge=1,
        description="most custom evaluators the registry holds (a create beyond answers 409); "
        "a worker loads at most this many",
    )  # fmt: skip
    registry_max_code_bytes: int = Field(
        default=DEFAULT_MAX_CODE_BYTES, ge=1, le=800_000,
        description="largest code of one custom evaluator, UTF-8 bytes (a write beyond answers 400)",
    )  # fmt: skip

    def registry_limits(self) -> RegistryLimits:
        return RegistryLimits(max_evaluators=self.registry_max_evaluators, max_code_bytes=self.registry_max_code_bytes)


def load_api_settings(**overrides: object) -> ApiSettings:
    try:
        return ApiSettings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigError(
            [ConfigIssue(file="<environment>", path="STREAMEVAL_" + ".".join(str(p) for p in e["loc"]).upper(),
                         message=e["msg"]) for e in exc.errors()]
        ) from None
