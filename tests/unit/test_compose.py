"""compose.yaml, .env.example and the Dockerfile agree with the code they start."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import fakeredis
import pytest
import redis
import yaml

from toolfleet.orchestrator.cli.launch import load_agent
from toolfleet.orchestrator.cli.main import build_parser
from toolfleet.shared.celery_config import tool_pool
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import load_definitions
from toolfleet.shared.keys import Keys
from toolfleet.shared.redis_clients import sentinel_target
from toolfleet.workers.names import default_worker_name

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose.yaml"
ENV_EXAMPLE = ROOT / ".env.example"
PLACEHOLDER = "placeholder"

# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?error}, ${NAME?error}, $NAME.
VARIABLE = re.compile(
    r"\$\{(?P<braced>[A-Za-z_]\w*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|\$(?P<bare>[A-Za-z_]\w*)"
)


def substitute(value: str) -> str:
    """What compose makes of a value when no variable is set: defaults, else a placeholder."""

    def one(match: re.Match[str]) -> str:
        if match["op"] in ("-", ":-"):
            return match["arg"]
        return PLACEHOLDER

    parts = value.split("$$")  # an escaped dollar sign stays one
    return "$".join(VARIABLE.sub(one, part) for part in parts)


def strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


def variables(node: Any) -> set[str]:
    return {
        m["braced"] or m["bare"]
        for text in strings(node)
        for part in text.split("$$")
        for m in VARIABLE.finditer(part)
    }


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def services(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = spec["services"]
    return found


def argv(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    if isinstance(command, str):
        return shlex.split(substitute(command))
    return [substitute(str(arg)) for arg in command]


def toolfleet_args(service: dict[str, Any]) -> argparse.Namespace:
    args = argv(service)
    try:
        return build_parser().parse_args(args[1:])
    except SystemExit as exc:
        raise AssertionError(f"`{shlex.join(args)}` is not a valid toolfleet command") from exc


def default_of(service: dict[str, Any], name: str) -> str:
    return substitute(str(service["environment"][name]))


def example_names() -> set[str]:
    """Names assigned in .env.example, commented out or not."""
    line = re.compile(r"^#?\s*([A-Za-z_]\w*)=", re.MULTILINE)
    return set(line.findall(ENV_EXAMPLE.read_text()))


def docker_compose() -> list[str] | None:
    """The compose command on this machine: the v2 plugin, else v1's docker-compose."""
    if shutil.which("docker"):
        probe = subprocess.run(
            ["docker", "compose", "version"], capture_output=True, timeout=30, check=False
        )
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_compose_validates_with_docker_compose(tmp_path: Path) -> None:
    command = docker_compose()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    for name in ("compose.yaml", "Dockerfile", ".dockerignore"):
        shutil.copy(ROOT / name, tmp_path / name)
    env_file = tmp_path / ".env"
    env_file.write_text(ENV_EXAMPLE.read_text())
    # The shell's values would take precedence over .env's: keep them out.
    names = variables(yaml.safe_load(COMPOSE.read_text())) | example_names()
    env = {k: v for k, v in os.environ.items() if k not in names}

    def config() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command, "-f", str(tmp_path / "compose.yaml"), "config", "-q"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    refused = config()  # the example leaves FLOWER_PASSWORD empty on purpose
    assert refused.returncode != 0 and "FLOWER_PASSWORD" in refused.stderr, refused
    env_file.write_text(env_file.read_text() + "FLOWER_PASSWORD=s3cret\n")
    accepted = config()
    assert accepted.returncode == 0, accepted.stderr


def test_toolfleet_commands_are_valid_cli_invocations(services: dict[str, Any]) -> None:
    parsed = {
        name: toolfleet_args(s) for name, s in services.items() if argv(s)[:1] == ["toolfleet"]
    }
    workers = {
        "worker": "default",
        "worker-heavy": "heavy",
        "worker-tickets": "tickets",
        "worker-io": "io",
    }
    assert set(parsed) == {*workers, "orchestrator"}
    for name, pool in workers.items():
        assert parsed[name].command == "worker" and parsed[name].pool == [pool], name
    assert parsed["worker"].concurrency == 4  # WORKER_CONCURRENCY's default
    assert parsed["worker-io"].concurrency is None  # TOOLFLEET_IO_CONCURRENCY calls
    assert Settings().pool_kind("io") == "io" and Settings().pool_kind("default") == "cpu"
    assert parsed["orchestrator"].command == "serve"


def test_celery_commands_load_the_workers_app(services: dict[str, Any]) -> None:
    celery = {name: argv(s) for name, s in services.items() if argv(s)[:1] == ["celery"]}
    assert "flower" in celery
    for name, args in celery.items():
        app = next(
            (args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-A", "--app")),
            next((a.split("=", 1)[1] for a in args if a.startswith("--app=")), None),
        )
        assert app == "toolfleet.workers.app", (name, args)


def test_workers_can_be_scaled(services: dict[str, Any]) -> None:
    for name, service in services.items():
        if argv(service)[:2] == ["toolfleet", "worker"]:
            assert "container_name" not in service, name
            assert "ports" not in service, name


def test_flower_listens_on_loopback_with_basic_auth(services: dict[str, Any]) -> None:
    flower = services["flower"]
    assert flower["ports"] and all(str(p).startswith("127.0.0.1:") for p in flower["ports"])
    (auth,) = [a for a in argv(flower) if a.startswith("--basic-auth=")]
    user, _, password = auth.removeprefix("--basic-auth=").partition(":")
    assert user and password
    # No password, no Flower: compose refuses to start rather than run it open.
    assert "${FLOWER_PASSWORD:?" in flower["command"]


def test_redis_persists_and_never_evicts(services: dict[str, Any]) -> None:
    redis_service = services["redis"]
    command = " ".join(argv(redis_service))
    assert "--appendonly yes" in command
    assert "--maxmemory-policy noeviction" in command
    assert any(str(v).endswith(":/data") for v in redis_service["volumes"])
    assert "redis-cli ping" in " ".join(redis_service["healthcheck"]["test"])


def test_every_compose_variable_is_in_env_example(spec: dict[str, Any]) -> None:
    missing = variables(spec) - example_names()
    assert not missing, f"add to .env.example: {sorted(missing)}"


def test_every_setting_is_in_env_example() -> None:
    names = {f"TOOLFLEET_{field.upper()}" for field in Settings.model_fields}
    missing = names - example_names()
    assert not missing, f"add to .env.example: {sorted(missing)}"


def test_worker_services_serve_every_pool_of_the_default_modules(
    services: dict[str, Any],
) -> None:
    worker = services["worker"]
    modules = default_of(worker, "TOOLFLEET_TOOL_MODULES").split(",")
    found = load_definitions(modules)
    settings = Settings()
    needed = {tool_pool(t, settings) for t in found.tools.values()}
    needed |= {j.pool for j in found.jobs.values()}
    served = {
        pool
        for s in services.values()
        if argv(s)[:2] == ["toolfleet", "worker"]
        for pool in toolfleet_args(s).pool
    }
    assert needed <= served, f"no worker service for pools {sorted(needed - served)}"
    # The orchestrator's default agent loads, and its tools come from those modules.
    (spec_arg,) = toolfleet_args(services["orchestrator"]).agent
    load_agent(spec_arg)
    assert spec_arg.partition(":")[0] in modules


def test_worker_healthcheck_finds_a_live_worker_named_at_the_containers_hostname(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    test = services["worker"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    code = compile(substitute(test[3]), "<healthcheck>", "exec")
    server = fakeredis.FakeServer()
    monkeypatch.setattr(
        redis.Redis, "from_url", classmethod(lambda cls, url: fakeredis.FakeRedis(server=server))
    )
    monkeypatch.setattr(socket, "gethostname", lambda: "c0ffee")
    monkeypatch.setenv("TOOLFLEET_REDIS_URL", "redis://redis:6379/0")
    monkeypatch.setenv("TOOLFLEET_KEY_PREFIX", "hc")
    listed = fakeredis.FakeRedis(server=server)

    def exit_code() -> object:
        with pytest.raises(SystemExit) as exited:
            exec(code, {})
        return exited.value.code

    assert exit_code() == 1
    listed.zadd(Keys("hc").workers(), {"default.7@beef": time.time() + 60})  # another replica
    listed.zadd(Keys("hc").workers(), {"default.8@c0ffee": time.time() - 1})  # beats missed
    assert exit_code() == 1
    # `toolfleet worker`'s default node name in this container.
    listed.zadd(Keys("hc").workers(), {default_worker_name(["default"], 7): time.time() + 6})
    assert exit_code() == 0


def test_image_runs_unprivileged_and_gets_only_the_sources() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", dockerfile, re.MULTILINE)
    # Flower for the UI, otel for tracing, mcp for MCP servers' tools on the workers.
    assert '".[flower,otel,mcp]"' in dockerfile
    users = re.findall(r"^USER\s+(\S+)", dockerfile, re.MULTILINE)
    assert users and users[-1] not in ("root", "0")
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*"  # an allow-list
    allowed = {p.removeprefix("!").rstrip("/") for p in patterns if p.startswith("!")}
    assert allowed.isdisjoint({".env", ".venv", ".git", "tests", "bench"}), allowed


def example_value(name: str) -> str:
    """The value .env.example shows for `name` (its first line `NAME=...`, commented out
    or not)."""
    found = re.search(rf"^#?\s*{name}=(.*)$", ENV_EXAMPLE.read_text(), re.MULTILINE)
    assert found is not None, f"{name} is not in .env.example"
    return found.group(1).strip()


def toolfleet_services(services: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {name: s for name, s in services.items() if s.get("image") == "toolfleet:latest"}
    assert {"worker", "worker-io", "orchestrator", "flower"} <= set(found)
    return found


def test_the_sentinel_profile_watches_redis_as_the_example_url_names_it(
    services: dict[str, Any],
) -> None:
    sentinels = {n: s for n, s in services.items() if n.startswith("sentinel-")}
    assert len(sentinels) == 3
    assert all(s["profiles"] == ["sentinel"] for s in sentinels.values())
    replica = " ".join(argv(services["redis-replica"]))
    assert "--replicaof redis 6379" in replica and "--appendonly yes" in replica
    for sentinel in sentinels.values():
        config = " ".join(argv(sentinel))
        # Two of the three must agree that the master is down.
        assert "'sentinel monitor toolfleet redis 6379 2'" in config
    target = sentinel_target(example_value("FLEET_REDIS_URL"))
    assert target.service == "toolfleet"
    assert set(target.sentinels) == {(name, 26379) for name in sentinels}
    for name, service in toolfleet_services(services).items():
        assert "FLEET_REDIS_URL" in service["environment"]["TOOLFLEET_REDIS_URL"], name


def test_the_rabbitmq_profile_serves_the_broker_url_the_example_names(
    services: dict[str, Any],
) -> None:
    rabbit = services["rabbitmq"]
    assert rabbit["profiles"] == ["rabbitmq"]
    assert rabbit["hostname"] == "rabbitmq"  # its data directory is named after it
    assert "rabbitmq-data:/var/lib/rabbitmq" in rabbit["volumes"]
    assert all(port.startswith("127.0.0.1:") for port in rabbit["ports"])
    assert "rabbitmq-diagnostics" in rabbit["healthcheck"]["test"]
    url = urlsplit(example_value("FLEET_BROKER_URL"))
    assert (url.scheme, url.hostname, url.port) == ("amqp", "rabbitmq", 5672)
    user = rabbit["environment"]["RABBITMQ_DEFAULT_USER"]
    password = substitute(rabbit["environment"]["RABBITMQ_DEFAULT_PASS"])
    assert (url.username, url.password) == (user, password)
    assert password == example_value("RABBITMQ_PASSWORD")
    assert Settings(broker_url=url.geturl()).broker_is_amqp
    for name, service in toolfleet_services(services).items():
        # Unset in .env, the tool queues stay on Redis.
        broker = default_of(service, "TOOLFLEET_BROKER_URL")
        assert broker == "" and not Settings(broker_url=broker).broker_is_amqp, name
        assert "FLEET_BROKER_URL" in service["environment"]["TOOLFLEET_BROKER_URL"], name
