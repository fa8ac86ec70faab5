"""Kafka and Redis security settings, secrets from files, redaction and the judges' key rules (no servers;
the real TLS and SASL connections are in tests/integration/test_security.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import faust
import pytest
from aiokafka.abc import AbstractTokenProvider
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from streameval._util import redact_url
from streameval.agents.app import create_app, faust_credentials
from streameval.errors import ConfigError
from streameval.judges import JudgeClient, JudgeConfig
from streameval.kafka_security import KafkaSecurity, bootstrap_hosts
from streameval.processor import Processor
from streameval.redis_security import FileCredentials, redis_options
from streameval.settings import load_settings


class StaticToken(AbstractTokenProvider):
    """The OAUTHBEARER hook as a user writes it (e.g. an MSK IAM signer)."""

    async def token(self) -> str:
        return "token-for-tests"


def issues(**overrides: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_settings(**overrides)
    return [issue.path for issue in info.value.issues]


@pytest.mark.parametrize(
    "bootstrap,hosts",
    [
        ("a:9092", ["a:9092"]),
        ("a:9092, b:9093", ["a:9092", "b:9093"]),
        ("SASL_SSL://a:9092,SASL_SSL://b:9092", ["a:9092", "b:9092"]),
        ("kafka://a:9092", ["a:9092"]),
    ],
)
def test_bootstrap_hosts_drop_scheme_prefixes(bootstrap: str, hosts: list[str]) -> None:
    assert bootstrap_hosts(bootstrap) == hosts


def test_faust_app_gets_credentials_and_plain_broker_urls() -> None:
    settings = load_settings(
        kafka_bootstrap_servers="SASL_SSL://broker-1:9096,broker-2:9096",
        kafka_security_protocol="sasl_ssl",
        kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username="svc",
        kafka_sasl_password="pw-in-settings",
    )

    async def never() -> Processor:
        raise AssertionError("not started here")

    app = create_app(settings, never)
    assert [str(url) for url in app.conf.broker] == ["kafka://broker-1:9096", "kafka://broker-2:9096"]
    credentials = app.conf.broker_credentials
    assert isinstance(credentials, faust.SASLCredentials)
    auth = credentials_to_aiokafka_auth(credentials)  # what Faust hands its consumer and producer
    assert auth["security_protocol"] == "SASL_SSL" and auth["sasl_mechanism"] == "SCRAM-SHA-512"
    assert auth["sasl_plain_username"] == "svc" and auth["ssl_context"].verify_mode.name == "CERT_REQUIRED"
    assert "pw-in-settings" not in repr(credentials) and "pw-in-settings" not in repr(
        KafkaSecurity.from_settings(settings)
    )


@pytest.mark.parametrize("protocol,kind", [("SSL", faust.SSLCredentials), ("PLAINTEXT", type(None))])
def test_faust_credentials_per_protocol(protocol: str, kind: type) -> None:
    security = KafkaSecurity.from_settings(load_settings(kafka_security_protocol=protocol))
    assert isinstance(faust_credentials(security), kind)
    assert security.aiokafka_kwargs().get("security_protocol", "PLAINTEXT") == protocol


def test_oauthbearer_token_provider_hook() -> None:
    settings = load_settings(
        kafka_security_protocol="SASL_SSL",
        kafka_sasl_mechanism="OAUTHBEARER",
        kafka_sasl_oauth_token_provider="test_security_settings:StaticToken",
    )
    security = KafkaSecurity.from_settings(settings)
    assert isinstance(security.aiokafka_kwargs()["sasl_oauth_token_provider"], StaticToken)
    assert isinstance(faust_credentials(security), faust.OAuthCredentials)
    assert issues(
        kafka_security_protocol="SASL_SSL",
        kafka_sasl_mechanism="OAUTHBEARER",
        kafka_sasl_oauth_token_provider="no_such_module:Provider",
    ) == ["STREAMEVAL_KAFKA_SASL_OAUTH_TOKEN_PROVIDER"]


@pytest.mark.parametrize(
    "overrides,paths",
    [
        ({"kafka_bootstrap_servers": "SASL_SSL://a:9092"}, ["STREAMEVAL_KAFKA_SECURITY_PROTOCOL"]),
        (
            {"kafka_security_protocol": "SASL_SSL", "kafka_sasl_mechanism": "SCRAM-SHA-256"},
            ["STREAMEVAL_KAFKA_SASL_USERNAME", "STREAMEVAL_KAFKA_SASL_PASSWORD"],
        ),
        ({"kafka_sasl_username": "u", "kafka_sasl_password": "p"}, ["STREAMEVAL_KAFKA_SECURITY_PROTOCOL"]),
        ({"kafka_ssl_ca_file": "/etc/ca.pem"}, ["STREAMEVAL_KAFKA_SSL_CA_FILE"]),
        (
            {"kafka_security_protocol": "SSL", "kafka_ssl_ca_file": "/nonexistent/ca.pem"},
            ["STREAMEVAL_KAFKA_SSL_CA_FILE"],
        ),
        (
            {"kafka_security_protocol": "SSL", "kafka_ssl_key_file": "/k.pem"},
            ["STREAMEVAL_KAFKA_SSL_CERT_FILE"],
        ),
        ({"kafka_sasl_password_file": "/nonexistent/pw"}, ["STREAMEVAL_KAFKA_SASL_PASSWORD_FILE"]),
        ({"kafka_security_protocol": "TLS"}, ["STREAMEVAL_KAFKA_SECURITY_PROTOCOL"]),
        ({"redis_url": "redis://h:6379", "redis_ssl_ca_file": "/ca.pem"}, ["STREAMEVAL_REDIS_SSL_CA_FILE"]),
        ({"redis_url": "redis://:pw@h:6379", "redis_password": "other"}, ["STREAMEVAL_REDIS_PASSWORD"]),
    ],
)
def test_settings_that_cannot_work_fail_at_start_with_the_variable(
    overrides: dict[str, Any], paths: list[str]
) -> None:
    assert issues(**overrides) == paths


def test_secret_files_lose_their_trailing_newline_and_are_reread(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("kafka-pw\n")
    settings = load_settings(
        kafka_security_protocol="SASL_SSL",
        kafka_sasl_mechanism="PLAIN",
        kafka_sasl_username="u",
        kafka_sasl_password_file=str(secret),
    )
    assert KafkaSecurity.from_settings(settings).password == "kafka-pw"
    secret.write_text("")
    assert issues(kafka_sasl_password_file=str(secret)) == ["STREAMEVAL_KAFKA_SASL_PASSWORD_FILE"]  # empty
    secret.write_text("redis-pw\r\n")
    options = redis_options(
        load_settings(
            redis_url="rediss://h:6380/0",
            redis_username="acl-user",
            redis_password_file=str(secret),
            redis_ssl_ca_file="/ca.pem",
        )
    )
    provider = options["credential_provider"]
    assert isinstance(provider, FileCredentials) and provider.get_credentials() == ("acl-user", "redis-pw")
    secret.write_text("rotated\n")  # a new connection reads the rotated secret
    assert provider.get_credentials() == ("acl-user", "rotated")
    assert options["ssl_ca_certs"] == "/ca.pem" and options["ssl_check_hostname"] is True
    assert "rotated" not in repr(provider)
    assert redis_options(load_settings(redis_url="redis://h:6379/0")) == {}


@pytest.mark.parametrize(
    "url,shown",
    [
        ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
        ("rediss://user:p%40ss@h:6380/0", "rediss://user:***@h:6380/0"),
        (
            "rediss://h:6380/0?password=pw&ssl_ca_certs=/etc/ca.pem",
            "rediss://h:6380/0?password=***&ssl_ca_certs=/etc/ca.pem",
        ),
        ("redis://h/0?ssl_password=x&db=1", "redis://h/0?ssl_password=***&db=1"),
        ("https://judge.example/v1?api_key=sk-123", "https://judge.example/v1?api_key=***"),
        ("redis://h:6379/0", "redis://h:6379/0"),
    ],
)
def test_redact_url_hides_passwords_and_secret_parameters(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def judge(**fields: Any) -> JudgeConfig:
    return JudgeConfig(**{"name": "j", "protocol": "openai", "model": "m", "weight": 1.0, **fields})


@pytest.mark.parametrize(
    "base_url,ok",
    [
        ("https://api.example.com/v1", True),
        ("http://127.0.0.1:8000/v1", True),
        ("http://localhost:8000", True),
        ("http://[::1]:8000", True),
        ("http://judge.internal:8000/v1", False),
        ("http://10.0.0.5/v1", False),
    ],
)
def test_plain_http_to_another_host_is_refused(base_url: str, ok: bool) -> None:
    if ok:
        judge(base_url=base_url, api_key_env="JUDGE_KEY")
        return
    with pytest.raises(ValueError, match="base_url: plain http://"):
        judge(base_url=base_url, api_key_env="JUDGE_KEY")
    with pytest.raises(ValueError, match="base_url: plain http://"):
        judge(base_url=base_url, api_key_file="/run/secrets/judge")
    assert judge(base_url=base_url, api_key_env="K", allow_insecure_http=True).allow_insecure_http


@pytest.mark.parametrize(
    "base_url", ["http://10.0.0.5:8080/v1", "http://192.168.1.20:11434/v1", "http://gpu-box:8000/v1"]
)
def test_a_keyless_judge_may_use_plain_http_to_a_private_host(base_url: str) -> None:
    """A local model server (llama.cpp, vLLM, Ollama on the LAN) needs no key: nothing can leak."""
    assert judge(base_url=base_url).base_url == base_url


def test_judge_config_error_names_the_field() -> None:
    from streameval.config import parse_config

    config = {
        "suites": [{"name": "s", "default": True, "evaluators": [{"evaluator": "exact_match"}]}],
        "judges": [
            {
                "name": "j",
                "protocol": "openai",
                "base_url": "http://judge.internal/v1",
                "model": "m",
                "api_key_env": "JUDGE_KEY",
                "weight": 1.0,
            }
        ],
    }
    with pytest.raises(ConfigError) as info:
        parse_config(config)
    assert any(i.path.startswith("judges") and "base_url" in i.message for i in info.value.issues), str(
        info.value
    )


@pytest.mark.parametrize("how", ["api_key_file", "ENV_FILE", "ENV"])
async def test_judge_key_from_a_file_or_the_variable(how: str, tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file\n")
    fields: dict[str, Any] = {"base_url": "https://api.example.com/v1", "api_key_env": "JUDGE_KEY"}
    environ = {"JUDGE_KEY": "sk-from-env\n"}
    if how == "api_key_file":
        fields["api_key_file"] = str(key_file)
    elif how == "ENV_FILE":
        environ = {"JUDGE_KEY_FILE": str(key_file)}
    client = JudgeClient(judge(**fields), environ=environ)
    await client.start()
    try:
        headers = dict(client._route[1])
        expected = "sk-from-env" if how == "ENV" else "sk-from-file"
        assert headers["authorization"] == "Bearer " + expected
    finally:
        await client.close()


async def test_missing_judge_key_file_is_a_config_error(tmp_path: Path) -> None:
    client = JudgeClient(
        judge(base_url="https://api.example.com/v1", api_key_env="K"),
        environ={"K_FILE": str(tmp_path / "missing")},
    )
    with pytest.raises(ConfigError) as info:
        await client.start()
    assert [i.path for i in info.value.issues] == ["K_FILE"]
