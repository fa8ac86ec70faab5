"""Runtime settings from the environment (pydantic-settings), validated at start.

Every field can be set by an environment variable ``STREAMEVAL_<FIELD>`` (e.g. ``STREAMEVAL_APP_ID``);
the two connection strings also answer to their conventional names ``KAFKA_BOOTSTRAP_SERVERS`` and
``REDIS_URL``. Nothing is read at import time: call :func:`load_settings`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

from .envelope import DEFAULT_MAX_DEAD_LETTER_BYTES, DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_EVENT_DEPTH
from .errors import ConfigError, ConfigIssue
from .kafka_security import kafka_security_issues
from .outputs import OutputTopics
from .redis_security import redis_security_issues
from .secrets import check_secret_file

__all__ = ["Settings", "load_settings"]


class Settings(BaseSettings, OutputTopics):  # the output topics' settings: streameval.outputs
    model_config = SettingsConfigDict(env_prefix="STREAMEVAL_", frozen=True, extra="ignore")

    kafka_bootstrap_servers: str = Field(
        default="localhost:9092",
        validation_alias=AliasChoices("KAFKA_BOOTSTRAP_SERVERS", "STREAMEVAL_KAFKA_BOOTSTRAP_SERVERS"),
        description="comma-separated host:port list of Kafka brokers",
    )
    redis_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("REDIS_URL", "STREAMEVAL_REDIS_URL"),
        description="redis:// URL of the state store (redis+cluster://host:port for a Redis Cluster); "
        "unset: the demo starts an embedded server",
    )
    config: str | None = Field(default=None, description="path of the suites YAML file")
    shadow: str | None = Field(
        default=None,
        description="a suites YAML whose suites run as shadow candidates of "
        "the live suites of the same names (docs/versions.md)",
    )
    shadow_sample: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description="share of events (by event-id hash) the --shadow file's candidates evaluate",
    )
    app_id: str = Field(default="streameval", min_length=1, description="Faust app id = Kafka consumer group")
    topic_requests: str = Field(default="evals.requests", description="input topic of request events")
    topic_feedback: str = Field(
        default="evals.feedback",
        description="input topic of human labels (docs/feedback.md); the worker reads it too",
    )
    topic_partitions: int = Field(default=4, ge=1, description="partitions of topics the worker creates")
    topic_replication: int = Field(default=1, ge=1, description="replication factor of created topics")
    redis_prefix: str = Field(default="streameval:", description="prefix of every Redis key")
    windows: Annotated[tuple[int, ...], NoDecode] = Field(
        default=(60,),
        description="tumbling window sizes in seconds (comma-separated); all-time is always kept",
    )
    window_ttl_s: int = Field(
        default=7 * 86400, ge=60, description="how long window aggregates stay in Redis"
    )
    seen_ttl_s: int = Field(
        default=7 * 86400,
        ge=60,
        description="replay horizon: how long an event stays marked as counted (a compact mark per event)",
    )
    redelivery_ttl_s: int = Field(
        default=3600,
        ge=0,
        description="redelivery horizon: how long an event's encoded result is kept to publish again on redelivery "
        "(until the broker acknowledged it: then only its published mark)",
    )
    record_linger_ms: float = Field(
        default=50.0,
        ge=0,
        le=1000,
        description="while the worker is busy (its last record call went out within this time), how long a "
        "batch's record call waits for the batches evaluated after it, to be recorded together in one script "
        "call per model x suite pair (fewer, fuller calls: Redis CPU; those results wait up to that long more); "
        "a trickle waits for nothing; 0: only the batches ready in the same turn of the event loop",
    )
    compare_ttl_s: int | None = Field(
        default=None,
        ge=0,
        description="how long each version's compact per-event scores are kept for /api/v1/stats/compare and "
        "backfill comparisons (between this and twice this); unset: 3 days when a shadow suite file is given "
        "(STREAMEVAL_SHADOW) or in a backfill, else none (set it on the live worker to compare a later backfill "
        "with it); 0 keeps none (docs/performance.md: its cost)",
    )
    label_join_ttl_s: int | None = Field(
        default=None,
        ge=0,
        description="how long each result's verdicts are kept to join human labels (docs/feedback.md); unset: 7 "
        "days when the suite file has a feedback: or review: section or a human_agreement alert rule, else the "
        "join is off; 0 keeps none and turns the join off (docs/performance.md: its cost)",
    )
    label_join_buckets: int = Field(
        default=16384,
        ge=16,
        le=1 << 20,
        description="hashes the kept verdicts are spread over; at most ~128 results per bucket and TTL keep them "
        "compact (listpacks): buckets >= results per STREAMEVAL_LABEL_JOIN_TTL_S / 128",
    )
    session_shards: int = Field(
        default=6,
        ge=1,
        le=16384,
        description="hash tags the sessions' state and due index are spread over (docs/sessions.md): one append "
        "call per shard and batch; every worker must use the same number, and a change leaves open sessions behind",
    )
    label_wait_s: float = Field(
        default=900.0,
        gt=0,
        description="how long a label whose result is not there yet waits before it is dead-lettered as unmatched",
    )
    label_max_pending: int = Field(
        default=100_000, ge=1, description="labels waiting for their results at most (beyond: dead-lettered)"
    )
    label_max_rows: int = Field(
        default=100_000,
        ge=1,
        description="joined labels kept per model x suite and window (and all time); beyond, new ones are counted "
        "as full and not kept",
    )
    examples: int | None = Field(
        default=None,
        ge=0,
        le=200,
        description="drill-down: the lowest-scored results and a sample of the failed ones kept per window x model x suite "
        "(each kind); unset: 20 when the suite file has alert rules or score-shift detection (alerts list the "
        "window's lowest-scored ids), else none; 0 keeps none (docs/performance.md: its cost)",
    )
    example_ttl_s: int = Field(
        default=86400,
        ge=60,
        description="how long a window's examples stay in Redis after their last change (at least twice the "
        "largest window, at most STREAMEVAL_WINDOW_TTL_S)",
    )
    redis_wait_replicas: int = Field(
        default=0,
        ge=0,
        le=16,
        description="replicas that must hold a batch's Redis writes before its results are published (WAIT; "
        "0: don't wait, a failover can lose the last acknowledged writes; docs/scaling.md)",
    )
    redis_wait_timeout_ms: int = Field(
        default=1000,
        ge=1,
        le=600_000,
        description="how long one WAIT for STREAMEVAL_REDIS_WAIT_REPLICAS lasts; fewer replicas by then: the "
        "batch is retried, nothing is published",
    )
    all_time_ttl_s: int = Field(
        default=90 * 86400,
        ge=3600,
        description="all-time aggregates of a model × suite expire this long after its last event",
    )
    max_pairs: int = Field(
        default=10_000,
        ge=1,
        description="most model × suite pairs aggregated; events of further pairs aggregate under the model (overflow)",
    )
    max_event_bytes: int = Field(
        default=DEFAULT_MAX_EVENT_BYTES, ge=1024, description="larger events are dead-lettered as too_large"
    )
    max_event_depth: int = Field(
        default=DEFAULT_MAX_EVENT_DEPTH,
        ge=2,
        le=1000,
        description="deeper JSON nesting is dead-lettered as invalid_json (checked before parsing)",
    )
    eval_processes: int = Field(
        default=0,
        ge=0,
        le=256,
        description="evaluation processes per worker for suites without judges or async evaluators "
        "(0 = evaluate in the worker's own process; docs/performance.md)",
    )
    batch_max: int = Field(
        default=256,
        ge=1,
        le=100_000,
        description="most events a worker evaluates and records in Redis together",
    )
    batch_wait_ms: float = Field(
        default=10.0, gt=0, le=10_000, description="how long a partial batch waits for more events, ms"
    )
    batches_in_flight: int = Field(
        default=4,
        ge=1,
        le=1000,
        description="events in flight (taken, not yet acknowledged) are at most this x batch_max, in batches of any "
        "size (rule results go out at once, judged ones when their panels end; offsets are committed in order); "
        "keeps slow judges busy",
    )
    fetch_wait_ms: int = Field(
        default=10,
        ge=0,
        le=60_000,
        description="longest a caught-up fetch waits on the broker, ms (Tansu answers only when it ends)",
    )
    broker_session_timeout: float = Field(
        default=10.0,
        gt=0,
        description="Kafka consumer session timeout, s (Tansu holds JoinGroup for half of it)",
    )
    data_dir: str | None = Field(
        default=None,
        description="Faust's data directory (it keeps nothing there with the memory store); default: <tmp>/streameval-faust/<app id>",
    )
    log_level: str = Field(default="info", description="crit | error | warn | info | debug")
    public_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s]+$",
        description="the dashboard's address as people reach it (https://evals.example.com): alert "
        "notifications link to the window and its worst examples there (docs/notify.md)",
    )
    metrics_max_models: int = Field(
        default=50,
        ge=0,
        description="distinct model names with their own label in the quality metrics; later ones are 'other'",
    )
    max_message_bytes: int = Field(
        default=1_000_000,
        ge=16_384,
        description="largest message the worker produces (the producer's max_request_size); at most the "
        "broker's message.max.bytes",
    )
    dead_letter_max_bytes: int = Field(
        default=DEFAULT_MAX_DEAD_LETTER_BYTES,
        ge=4096,
        description="largest encoded dead letter; above it raw keeps the event's head and tail and the whole "
        "event is kept in Redis",
    )
    dead_letter_raw_ttl_s: int = Field(
        default=7 * 86400,
        ge=60,
        description="how long Redis keeps the whole event of a truncated dead letter",
    )
    dead_letter_raw_budget_bytes: int = Field(
        default=256 << 20,
        ge=0,
        description="most bytes of whole events Redis keeps for truncated dead letters, all together (0: none)",
    )
    stall_after_s: float = Field(
        default=120.0,
        gt=0,
        description="a taken batch not published after this long is a stall: logged, /ready answers 503",
    )
    publish_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="longest the broker may take to answer a produce request (the producer's request timeout); "
        "Faust's default is 20 minutes, during which a lost answer holds every later result",
    )
    shutdown_grace_s: float = Field(
        default=20.0, gt=0, description="SIGTERM: how long the worker may take to stop before it exits anyway"
    )
    # Kafka and Redis security (streameval.kafka_security, streameval.redis_security, docs/security.md)
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT",
        description="how Kafka clients connect: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
    )
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] = Field(
        default="PLAIN",
        description="SASL mechanism with SASL_*: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
    )
    kafka_sasl_username: str | None = Field(default=None, description="SASL user name (PLAIN, SCRAM)")
    kafka_sasl_password: SecretStr | None = Field(default=None, description="SASL password (PLAIN, SCRAM)")
    kafka_sasl_password_file: str | None = Field(
        default=None,
        description="file holding the SASL password (trailing newline stripped); instead of the password",
    )
    kafka_sasl_oauth_token_provider: str | None = Field(
        default=None,
        description="OAUTHBEARER: `module:name` of an aiokafka AbstractTokenProvider (class or factory)",
    )
    kafka_ssl_ca_file: str | None = Field(
        default=None, description="PEM CA bundle that signs the brokers' certificates; unset: system CAs"
    )
    kafka_ssl_cert_file: str | None = Field(
        default=None, description="client certificate (PEM) for mutual TLS"
    )
    kafka_ssl_key_file: str | None = Field(
        default=None, description="client private key (PEM) for mutual TLS"
    )
    kafka_ssl_key_password: SecretStr | None = Field(
        default=None, description="password of an encrypted client key"
    )
    kafka_ssl_key_password_file: str | None = Field(
        default=None, description="file holding the client key's password"
    )
    kafka_ssl_check_hostname: bool = Field(
        default=True, description="check that a broker's certificate names its host"
    )
    redis_username: str | None = Field(
        default=None, description="Redis ACL user (instead of putting it in REDIS_URL)"
    )
    redis_password: SecretStr | None = Field(
        default=None, description="Redis password (instead of putting it in REDIS_URL)"
    )
    redis_password_file: str | None = Field(
        default=None,
        description="file holding the Redis password, read for each new connection (trailing newline stripped)",
    )
    redis_ssl_ca_file: str | None = Field(
        default=None, description="with rediss://: PEM CA bundle that signs the server's certificate"
    )
    redis_ssl_cert_file: str | None = Field(
        default=None, description="with rediss://: client certificate (PEM) for mutual TLS"
    )
    redis_ssl_key_file: str | None = Field(
        default=None, description="with rediss://: client private key (PEM)"
    )
    redis_ssl_check_hostname: bool = Field(
        default=True, description="with rediss://: check that the server's certificate names its host"
    )

    @field_validator("kafka_sasl_password_file", "kafka_ssl_key_password_file", "redis_password_file")
    @classmethod
    def _readable_secret(cls, value: str | None) -> str | None:
        return check_secret_file(value)

    @field_validator("kafka_security_protocol", "kafka_sasl_mechanism", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("windows", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(int(part) for part in value.replace(" ", "").split(",") if part)
        if isinstance(value, int):
            return (value,)
        return value

    @field_validator("windows")
    @classmethod
    def _positive(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or any(size <= 0 for size in value):
            raise ValueError("window sizes must be positive whole seconds")
        return tuple(sorted(set(value)))

    @field_validator("dead_letter_max_bytes")
    @classmethod
    def _dead_letters_fit(cls, value: int, info: ValidationInfo) -> int:
        # room for the key and the record's framing in the same produce request
        limit = info.data.get("max_message_bytes")
        if limit is not None and value > limit - 2048:
            raise ValueError(
                f"must be at least 2048 under STREAMEVAL_MAX_MESSAGE_BYTES ({limit}), got {value}"
            )
        return value


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment plus ``overrides``; a bad value is a :class:`ConfigError`."""
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
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
    except SettingsError as exc:  # a value the environment source could not even parse
        raise ConfigError([ConfigIssue(file="<environment>", path="", message=str(exc))]) from None
    issues = kafka_security_issues(settings) + redis_security_issues(settings)
    if issues:
        raise ConfigError(issues)
    return settings
