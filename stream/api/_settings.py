"""Settings of the HTTP server (the ``streameval api`` command and the worker's web server).

Environment variables ``STREAMEVAL_<FIELD>`` like :class:`streameval.settings.Settings`; documented
in docs/api.md (a test checks every field is).
"""

from __future__ import annotations

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ..errors import ConfigError, ConfigIssue
from ..registry import DEFAULT_MAX_CODE_BYTES, DEFAULT_MAX_EVALUATORS, RegistryLimits
from ..secrets import check_secret_file, read_secret
from ._security import Access

__all__ = ["ApiSettings", "load_api_settings"]


class ApiSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMEVAL_", frozen=True, extra="ignore")

    api_token: SecretStr | None = Field(
        default=None,
        description="bearer token required by every write (POST/PUT/DELETE); unset: writes are refused",
    )
    web_host: str = Field(
        default="127.0.0.1", description="address the HTTP server binds (0.0.0.0 in containers)"
    )
    web_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="worker: serve /health, /ready, /metrics, the API and pages on this port (unset: no server); "
        "`streameval api` defaults to 8080",
    )
    registry_resync_s: float = Field(
        default=5.0,
        gt=0,
        description="workers re-read the evaluator registry at least this often (pub/sub is instant)",
    )
    ready_timeout_s: float = Field(default=2.0, gt=0, description="limit of each /ready check, s")
    registry_max_evaluators: int = Field(
        default=DEFAULT_MAX_EVALUATORS,
        ge=1,
        description="most custom evaluators the registry holds (a create beyond answers 409); "
        "a worker loads at most this many",
    )
    registry_max_code_bytes: int = Field(
        default=DEFAULT_MAX_CODE_BYTES,
        ge=1,
        le=800_000,
        description="largest code of one custom evaluator, UTF-8 bytes (a write beyond answers 400)",
    )

    def registry_limits(self) -> RegistryLimits:
        return RegistryLimits(
            max_evaluators=self.registry_max_evaluators, max_code_bytes=self.registry_max_code_bytes
        )

    api_token_file: str | None = Field(
        default=None,
        description="file holding the API token (trailing newline stripped), instead of STREAMEVAL_API_TOKEN",
    )
    api_token_min_length: int = Field(
        default=16,
        ge=1,
        description="shortest API token accepted at start (a shorter one is a start-up error)",
    )
    api_read_auth: bool = Field(
        default=False,
        description="require the token for API reads too; /ready then shows its details only with it",
    )
    api_health_auth: bool = Field(
        default=False, description="require the token for /health (kubelet probes cannot send it)"
    )
    api_metrics_auth: bool = Field(
        default=False, description="require the token for /metrics (Prometheus: bearer token)"
    )

    @field_validator("api_token_file")
    @classmethod
    def _readable(cls, value: str | None) -> str | None:
        return check_secret_file(value)

    def token(self) -> str | None:
        """The API token from its file or variable, trailing newline stripped; None when unset."""
        return read_secret(self.api_token, self.api_token_file) or None

    def access(self) -> Access:
        return Access(reads=self.api_read_auth, health=self.api_health_auth, metrics=self.api_metrics_auth)


def load_api_settings(**overrides: object) -> ApiSettings:
    """API settings from the environment; a bad value, or a token too short, is a :class:`ConfigError`."""
    try:
        api = ApiSettings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigError(
            [
                ConfigIssue(
                    file="<environment>",
                    path="STREAMEVAL_" + ".".join(str(p) for p in e["loc"]).upper(),
                    message=e["msg"],
                )
                for e in exc.errors()
            ]
        ) from None
    issues = []
    if api.api_token is not None and api.api_token_file is not None:
        issues.append(
            ConfigIssue(
                file="<environment>",
                path="STREAMEVAL_API_TOKEN_FILE",
                message="set either the token or the token file, not both",
            )
        )
    token = api.token()
    if token is not None and len(token) < api.api_token_min_length:
        where = "STREAMEVAL_API_TOKEN_FILE" if api.api_token_file else "STREAMEVAL_API_TOKEN"
        issues.append(
            ConfigIssue(
                file="<environment>",
                path=where,
                message=(
                    f"the token has {len(token)} characters; at least {api.api_token_min_length} are required "
                    "(STREAMEVAL_API_TOKEN_MIN_LENGTH)"
                ),
            )
        )
    if (api.api_read_auth or api.api_health_auth or api.api_metrics_auth) and token is None:
        issues.append(
            ConfigIssue(
                file="<environment>",
                path="STREAMEVAL_API_READ_AUTH",
                message="reads need a token but none is set (STREAMEVAL_API_TOKEN or _FILE)",
            )
        )
    if issues:
        raise ConfigError(issues)
    return api
