"""compose.yaml's observability profile, checked offline: Prometheus scrapes what the
services serve, the Grafana dashboard asks only for metrics toolfleet records (with
bounded labels), and tracing stays off unless .env turns it on."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.test_compose import COMPOSE, ROOT, argv, example_names, substitute, toolfleet_args
from toolfleet.shared import tracing
from toolfleet.shared.metrics import Metrics

DEPLOY = ROOT / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "toolfleet.json"
PROMETHEUS = DEPLOY / "prometheus" / "prometheus.yml"
OBSERVABILITY = {"prometheus", "grafana", "jaeger"}
# Every label a dashboard query may group by: no session, call or user ids exist to use.
LABELS = {"tool", "pool", "status", "le", "model", "type", "outcome", "age"}


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = yaml.safe_load(COMPOSE.read_text())["services"]
    return found


def worker_services(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in services.items() if argv(s)[:2] == ["toolfleet", "worker"]}


def recorded_names() -> set[str]:
    """Every sample name toolfleet's metrics can produce."""
    registry = Metrics().registry
    return {sample.name for family in registry.collect() for sample in family.samples} | {
        f"{family.name}{suffix}"
        for family in registry.collect()
        for suffix in ("", "_bucket", "_count", "_sum", "_total")
    }


def queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_the_dashboard_queries_only_metrics_toolfleet_records() -> None:
    names = recorded_names()
    used = {name for expr in queries() for name in re.findall(r"\btoolfleet_\w+", expr)}
    assert used and used <= names, sorted(used - names)
    families = {re.sub(r"_(bucket|count|sum|total)$", "", n) for n in used}
    # Every metric of the issue has a panel.
    assert {
        "toolfleet_tool_call_seconds", "toolfleet_tool_run_seconds", "toolfleet_queue_depth",
        "toolfleet_tool_calls_in_flight", "toolfleet_pending_tickets", "toolfleet_dead_letters",
        "toolfleet_completions", "toolfleet_live_workers", "toolfleet_model_call_seconds",
        "toolfleet_model_tokens", "toolfleet_queue_oldest_age_seconds",
        "toolfleet_worker_slots", "toolfleet_worker_slots_busy",
    } <= families  # fmt: skip


def test_the_dashboard_groups_by_bounded_labels_on_the_provisioned_datasource() -> None:
    grouped = {
        label.strip()
        for expr in queries()
        for group in re.findall(r"by \(([^)]*)\)", expr)
        for label in group.split(",")
    }
    assert grouped and grouped <= LABELS, sorted(grouped - LABELS)
    source = yaml.safe_load(
        (DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text()
    )
    (datasource,) = source["datasources"]
    assert datasource["url"] == "http://prometheus:9090"
    dashboard = json.loads(DASHBOARD.read_text())
    assert {p["datasource"]["uid"] for p in dashboard["panels"]} == {datasource["uid"]}
    provider = yaml.safe_load(
        (DEPLOY / "grafana/provisioning/dashboards/toolfleet.yml").read_text()
    )
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"


def test_prometheus_scrapes_the_orchestrator_and_every_worker_service(
    services: dict[str, dict[str, Any]],
) -> None:
    jobs = {
        job["job_name"]: job for job in yaml.safe_load(PROMETHEUS.read_text())["scrape_configs"]
    }
    (orchestrator,) = jobs["toolfleet-orchestrator"]["static_configs"][0]["targets"]
    _, _, port = toolfleet_args(services["orchestrator"]).http.rpartition(":")
    assert orchestrator == f"orchestrator:{port}"
    (discovery,) = jobs["toolfleet-workers"]["dns_sd_configs"]
    workers = worker_services(services)
    assert set(discovery["names"]) == set(workers)
    for name, service in workers.items():
        bind = substitute(str(service["environment"]["TOOLFLEET_WORKER_METRICS_BIND"]))
        assert bind == f"0.0.0.0:{discovery['port']}", name
        redis_url = substitute(str(service["environment"]["TOOLFLEET_REDIS_URL"]))
        assert redis_url == "redis://redis:6379/0", name


def test_observability_services_are_opt_in_on_loopback_with_their_files(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in OBSERVABILITY:
        service = services[name]
        assert service["profiles"] == ["observability"], name
        assert all(str(p).startswith("127.0.0.1:") for p in service.get("ports", [])), name
        for volume in service.get("volumes", []):
            source = str(volume).split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), (name, source)
    grafana = services["grafana"]["environment"]
    assert grafana["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"  # read-only, no login at all
    assert grafana["GF_AUTH_DISABLE_LOGIN_FORM"] == "true"
    assert grafana["GF_AUTH_BASIC_ENABLED"] == "false"
    assert services["jaeger"]["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"


def test_tracing_is_off_unless_env_names_a_collector(services: dict[str, dict[str, Any]]) -> None:
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in example_names()
    for name in ("orchestrator", *worker_services(services)):
        value = substitute(str(services[name]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"]))
        assert tracing.exporter_name({"OTEL_EXPORTER_OTLP_ENDPOINT": value}) == "none", name
    example = re.search(r"OTEL_EXPORTER_OTLP_ENDPOINT=(\S+)", (ROOT / ".env.example").read_text())
    assert example is not None and example.group(1).startswith("http://jaeger:4318")
    assert tracing.exporter_name({"OTEL_EXPORTER_OTLP_ENDPOINT": example.group(1)}) == "otlp"


def test_the_image_has_the_tracing_extra() -> None:
    extras = re.search(r'pip install "\.\[([a-z,]+)\]"', (ROOT / "Dockerfile").read_text())
    assert extras is not None and "otel" in extras[1].split(",")
    assert Path(DASHBOARD).stat().st_size > 1000
