"""Settings of the HTTP server (the ``streameval api`` command and the worker's web server).

Environment variables ``STREAMEVAL_<FIELD>`` like :class:`streameval.settings.Settings`; documented
in docs/api.md (a test checks every field is).
"""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ..errors import ConfigError, ConfigIssue
from ..registry import DEFAULT_MAX_CODE_BYTES, DEFAULT_MAX_EVALUATORS, RegistryLimits
from ..secrets import check_secret_file, read_secret
from ._security import Access, Identities

__all__ = ["NAME_PATTERN", "ApiSettings", "load_api_settings"]

#: a person's name in STREAMEVAL_REVIEW_TOKENS_FILE (and STREAMEVAL_API_TOKEN_NAME): the annotator of labels
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$"


def _review_tokens(path: str | None) -> list[tuple[str, str, int]]:
    """``(name, token, line)`` of each line ``name:token`` of the file (blank lines and ``#`` comments left out)."""
    if path is None:
        return []
    out = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            text = line.strip()
            if text and not text.startswith("#"):
                name, _, token = text.partition(":")
                out.append((name.strip(), token.strip(), number))
    return out


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

    api_token_name: str = Field(
        default="api",
        pattern=NAME_PATTERN,
        description="who STREAMEVAL_API_TOKEN is: the annotator of labels sent from the review page with it",
    )
    review_tokens_file: str | None = Field(
        default=None,
        description="the review page's people: one `name:token` a line; each token may use the review "
        "endpoints only, and its name is the annotator of the labels sent with it",
    )
    review_page: bool | None = Field(
        default=None,
        description="serve the review page (/review) and its API; unset: a worker does when its suite file "
        "keeps review items (review.keep), `streameval api` does not",
    )

    guard_tokens_file: str | None = Field(
        default=None,
        description="the guard's callers: one `name:token` a line; each token may call POST /api/v1/check "
        "only, and its name is logged with its checks (docs/guard.md)",
    )
    guard_max_body_bytes: int = Field(
        default=256 * 1024,
        ge=1024,
        le=1 << 20,
        description="largest body of POST /api/v1/check, bytes (413 beyond)",
    )
    guard_max_text_chars: int = Field(
        default=64 * 1024,
        ge=1,
        description="longest input, output and expected of a check, characters (400 naming the field beyond)",
    )
    guard_log_texts: bool = Field(
        default=False,
        description="log each check's output text (INFO; off: only id, suite, decision, latency)",
    )
    guard_workers: int = Field(
        default=0,
        ge=0,
        le=256,
        description="`streameval guard`: server processes on the one port (0: one per CPU)",
    )

    @field_validator("api_token_file", "review_tokens_file", "guard_tokens_file")
    @classmethod
    def _readable(cls, value: str | None) -> str | None:
        return check_secret_file(value)

    def identities(self) -> Identities:
        """The named tokens (checked by :func:`load_api_settings`)."""
        named = [] if self.token() is None else [(self.api_token_name, self.token() or "")]
        return Identities(tuple(named + [(n, t) for n, t, _ in _review_tokens(self.review_tokens_file)]))

    def guard_identities(self) -> Identities:
        """The tokens that may call ``POST /api/v1/check``: the API token and the guard's named tokens."""
        named = [] if self.token() is None else [(self.api_token_name, self.token() or "")]
        return Identities(tuple(named + [(n, t) for n, t, _ in _review_tokens(self.guard_tokens_file)]))

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
    issues += _review_token_issues(api, token)
    issues += _review_token_issues(api, token, "guard_tokens_file")
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


def _review_token_issues(
    api: ApiSettings, token: str | None, field: str = "review_tokens_file"
) -> list[ConfigIssue]:
    """Each bad line of STREAMEVAL_REVIEW_TOKENS_FILE (or the guard's, ``field``): a name that is not one, a
    short or repeated token."""
    issues = []
    names = {api.api_token_name} if token is not None else set()
    tokens = {token} if token is not None else set()
    path = getattr(api, field)
    for name, value, number in _review_tokens(path):
        where = f"STREAMEVAL_{field.upper()} line {number}"
        problem = None
        if not re.match(NAME_PATTERN, name):
            problem = f"{name!r} is not a name (letters, digits, . _ @ -; at most 128) before ':'"
        elif len(value) < api.api_token_min_length:
            problem = (
                f"the token of {name!r} has {len(value)} characters; at least {api.api_token_min_length} "
                "are required (STREAMEVAL_API_TOKEN_MIN_LENGTH)"
            )
        elif name in names:
            problem = f"{name!r} is named twice (or is STREAMEVAL_API_TOKEN_NAME)"
        elif value in tokens:
            problem = f"the token of {name!r} is another name's token too"
        if problem:
            issues.append(ConfigIssue(file=path or "", path=where, message=problem))
        names.add(name)
        tokens.add(value)
    return issues
