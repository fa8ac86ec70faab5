"""docker-compose.yml, the Dockerfile and the Kubernetes manifests parse and reference real things.

Docker is not available on the development and CI machines, so these are checked statically: every
file they copy or mount exists, every environment variable is a real setting, the suites they ship
are a valid config, and the Kubernetes objects reference each other by the right names.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import REGISTRY

from streameval import telemetry  # noqa: F401  (defines the metrics)
from streameval.api import ApiSettings
from streameval.config import load_config, parse_config
from streameval.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"


def setting_env_names() -> set[str]:
    names = {f"STREAMEVAL_{name.upper()}" for name in [*Settings.model_fields, *ApiSettings.model_fields]}
    return names | {"KAFKA_BOOTSTRAP_SERVERS", "REDIS_URL"}


def test_compose_services_and_references() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"kafka", "redis", "worker"}
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert (
        "broker,controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]
    )  # KRaft, no ZooKeeper
    worker = services["worker"]
    assert (ROOT / worker["build"]["context"] / worker["build"]["dockerfile"]).is_file()
    assert set(worker["environment"]) <= setting_env_names()
    assert worker["environment"]["KAFKA_BOOTSTRAP_SERVERS"].split(":")[0] == "kafka"
    assert worker["environment"]["REDIS_URL"].startswith("redis://redis:")
    for volume in worker["volumes"]:
        host, container, *_ = volume.split(":")
        assert (ROOT / host).is_file(), volume
        if container == worker["environment"]["STREAMEVAL_CONFIG"]:
            load_config(ROOT / host)
    assert set(worker["depends_on"]) == {"kafka", "redis"}


def test_dockerfile_copies_real_paths_and_runs_the_cli() -> None:
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    for source in re.findall(r"^COPY (?!--from)(.+) \S+$", text, flags=re.M):
        for path in source.split():
            assert (ROOT / path).exists(), path
    assert 'ENTRYPOINT ["streameval"]' in text
    assert re.search(r"^USER \d+", text, flags=re.M), "the image must not run as root"


def manifests() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}


def test_k8s_objects_reference_each_other() -> None:
    objects = {(d["kind"], d["metadata"]["name"]): d for d in manifests()}
    deployment = objects[("Deployment", "streameval-worker")]
    spec = deployment["spec"]["template"]["spec"]
    assert (
        deployment["spec"]["selector"]["matchLabels"].items()
        <= deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    [container] = spec["containers"]
    for source in container["envFrom"]:
        kind, ref = (
            ("ConfigMap", source["configMapRef"])
            if "configMapRef" in source
            else ("Secret", source["secretRef"])
        )
        assert (kind, ref["name"]) in objects
    for volume in spec["volumes"]:
        if "configMap" in volume:
            assert ("ConfigMap", volume["configMap"]["name"]) in objects
    mounts = {m["name"] for m in container["volumeMounts"]}
    assert mounts == {v["name"] for v in spec["volumes"]}


def test_k8s_settings_are_real_and_the_suites_valid() -> None:
    objects = {(d["kind"], d["metadata"]["name"]): d for d in manifests()}
    settings = objects[("ConfigMap", "streameval-settings")]["data"]
    assert set(settings) <= setting_env_names()
    secret = objects[("Secret", "streameval-keys")]["stringData"]
    assert "REDIS_URL" in secret
    suites_map = objects[("ConfigMap", "streameval-suites")]["data"]
    mount = next(
        m
        for m in objects[("Deployment", "streameval-worker")]["spec"]["template"]["spec"]["containers"][0][
            "volumeMounts"
        ]
        if m["name"] == "suites"
    )
    assert settings["STREAMEVAL_CONFIG"] == f"{mount['mountPath']}/suites.yaml"
    shipped = yaml.safe_load(suites_map["suites.yaml"])
    parse_config(shipped)
    assert shipped == yaml.safe_load((ROOT / "examples" / "suites.yaml").read_text())


def test_workers_expose_probes_and_prometheus_annotations() -> None:
    objects = {(d["kind"], d["metadata"]["name"]): d for d in manifests()}
    settings = objects[("ConfigMap", "streameval-settings")]["data"]
    port = int(settings["STREAMEVAL_WEB_PORT"])
    assert settings["STREAMEVAL_WEB_HOST"] == "0.0.0.0"  # reachable from the kubelet and Prometheus
    template = objects[("Deployment", "streameval-worker")]["spec"]["template"]
    annotations = template["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == port and annotations["prometheus.io/path"] == "/metrics"
    [container] = template["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["http"] == port
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "http"}
    assert "STREAMEVAL_API_TOKEN" in objects[("Secret", "streameval-keys")]["stringData"]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["worker"]
    assert compose["expose"] == [str(port)] and compose["environment"]["STREAMEVAL_WEB_PORT"] == str(port)
    assert re.search(rf"^EXPOSE {port}$", (ROOT / "deploy" / "Dockerfile").read_text(), flags=re.M)


def test_the_guard_deployment_serves_a_guarded_suite_file_and_scales_on_cpu() -> None:
    from streameval.features.guard import guard_section

    objects = {(d["kind"], d["metadata"]["name"]): d for d in manifests()}
    deployment = objects[("Deployment", "streameval-guard")]
    template = deployment["spec"]["template"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    [container] = template["spec"]["containers"]
    assert container["args"][0] == "guard"
    config = container["args"][container["args"].index("--config") + 1]
    [mount] = container["volumeMounts"]
    [volume] = template["spec"]["volumes"]
    assert mount["name"] == volume["name"] and config == f"{mount['mountPath']}/suites.yaml"
    suites_map = objects[("ConfigMap", volume["configMap"]["name"])]["data"]
    _, loaded = parse_config(yaml.safe_load(suites_map["suites.yaml"]))
    assert any(guard_section(s) is not None for s in loaded.all)
    env = {e["name"] for e in container["env"]}
    assert env <= setting_env_names()
    token = next(e for e in container["env"] if e["name"] == "STREAMEVAL_API_TOKEN")["valueFrom"][
        "secretKeyRef"
    ]
    assert token["key"] in objects[("Secret", token["name"])]["stringData"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "http"}
    service = objects[("Service", "streameval-guard")]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    hpa = objects[("HorizontalPodAutoscaler", "streameval-guard")]
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "streameval-guard",
    }
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"


def exported_metric_names() -> set[str]:
    """Every sample name the worker's /metrics can show (counters with _total, histograms with _bucket...)."""
    names: set[str] = set()
    for metric in REGISTRY.collect():
        names.add(metric.name)
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"]}
        names.update(metric.name + s for s in suffixes.get(metric.type, []))
    return names


def test_alert_rules_use_real_metrics() -> None:
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yaml").read_text())
    alerts = [rule for group in rules["groups"] for rule in group["rules"]]
    assert alerts and all({"alert", "expr", "labels", "annotations"} <= set(rule) for rule in alerts)
    known = exported_metric_names()
    for rule in alerts:
        for name in re.findall(r"\bstreameval_[a-z_]+", rule["expr"]):
            assert name in known, f"{rule['alert']}: {name} is not a metric the worker exports"


def test_redis_cluster_options_parse_and_point_the_worker_at_a_cluster() -> None:
    base = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    override = yaml.safe_load((ROOT / "deploy" / "compose" / "redis-cluster.yml").read_text())["services"]
    nodes = {name for name in override if name.startswith("redis-") and name != "redis-cluster-init"}
    assert len(nodes) == 6 and all("--cluster-enabled yes" in " ".join(override[n]["command"]) for n in nodes)
    init = " ".join(override["redis-cluster-init"]["command"])
    assert "--cluster-replicas 1" in init and all(f"{n}:6379" in init for n in nodes)
    worker = override["worker"]
    assert set(worker["environment"]) <= setting_env_names() and set(worker["environment"]) <= set(
        base["worker"]["environment"]
    )
    assert worker["environment"]["REDIS_URL"].startswith("redis+cluster://redis-")
    assert set(worker["depends_on"]) <= set(override)
    overlay = K8S / "redis-cluster"
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    assert kustomization["resources"] == [".."]
    for patch in kustomization["patches"]:
        doc = yaml.safe_load((overlay / patch["path"]).read_text())
        assert (doc["kind"], doc["metadata"]["name"]) == ("Secret", "streameval-keys")
        assert doc["stringData"]["REDIS_URL"].startswith("redis+cluster://")


def test_compose_sasl_ssl_variant_uses_real_settings_and_a_secret_file() -> None:
    variant = yaml.safe_load((ROOT / "deploy" / "compose" / "sasl-ssl.yml").read_text())
    worker = variant["services"]["worker"]
    env = worker["environment"]
    assert set(env) <= setting_env_names()
    assert (
        env["STREAMEVAL_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
        and "STREAMEVAL_KAFKA_SASL_PASSWORD" not in env
    )
    [secret] = worker["secrets"]
    assert (
        env["STREAMEVAL_KAFKA_SASL_PASSWORD_FILE"] == f"/run/secrets/{secret}"
        and secret in variant["secrets"]
    )
    kafka = variant["services"]["kafka"]["environment"]
    advertised = dict(entry.split("://") for entry in kafka["KAFKA_ADVERTISED_LISTENERS"].split(","))
    assert advertised["SASL_SSL"] == env["KAFKA_BOOTSTRAP_SERVERS"]
    assert "SASL_SSL:SASL_SSL" in kafka["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"]
    assert (
        "kafka_sasl_password" in variant["secrets"]
        and (ROOT / "deploy" / "compose" / "make-certs.sh").is_file()
    )
    assert "sasl-ssl.yml" in (ROOT / "docker-compose.yml").read_text()


def test_k8s_secrets_are_files_not_environment() -> None:
    objects = {(d["kind"], d["metadata"]["name"]): d for d in manifests()}
    spec = objects[("Deployment", "streameval-worker")]["spec"]["template"]["spec"]
    [container] = spec["containers"]
    assert all("secretRef" not in source for source in container["envFrom"])  # no secret as a variable
    keys = next(v for v in spec["volumes"] if "secret" in v)
    mount = next(m for m in container["volumeMounts"] if m["name"] == keys["name"])
    settings = objects[("ConfigMap", "streameval-settings")]["data"]
    secret = objects[("Secret", "streameval-keys")]["stringData"]
    assert settings["STREAMEVAL_API_TOKEN_FILE"] == f"{mount['mountPath']}/STREAMEVAL_API_TOKEN"
    assert settings["STREAMEVAL_REDIS_PASSWORD_FILE"].removeprefix(mount["mountPath"] + "/") in secret
    assert len(secret["STREAMEVAL_API_TOKEN"]) >= 16  # the placeholder passes the minimum length
