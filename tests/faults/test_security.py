"""Security on a real redis-server (requirepass, an ACL user, TLS) and real workers.

A secret argument stays out of logs, Flower and stored events; toolfleet works with
the credentials in the URL (and over rediss://) and fails clearly without them; Flower's
API wants its credentials.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import signal
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from google.genai import types

from tests.faults import input_tools
from tests.faults.conftest import fault_settings
from tests.faults.replicas import started
from tests.faults.servers import RedisServer
from tests.flower import Flower, running_flower
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.embedded import free_port, wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.loop.invocation import CallFinished, Update
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.celery_config import broker_tls, celery_config
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import tools_in_module
from toolfleet.shared.keys import Keys, session_key

ADMIN_PW = "admin-" + uuid.uuid4().hex[:8]
ACL_USER, ACL_PW = "toolfleet", "acl-" + uuid.uuid4().hex[:8]
FLOWER_AUTH = ("flower", "fl-" + uuid.uuid4().hex[:6])
WAIT_S = 20.0
CLI_TIMEOUT_S = 60.0
TOOLS = tools_in_module(input_tools)


@dataclass(frozen=True)
class Secured:
    server: RedisServer
    tls_port: int
    ca: Path

    def url(self, user: str | None = None, password: str | None = None) -> str:
        return self.server.url(username=user, password=password)

    def tls_url(self, *, ca: bool = True) -> str:
        query = f"?ssl_ca_certs={self.ca}" if ca else ""
        return f"rediss://{ACL_USER}:{ACL_PW}@127.0.0.1:{self.tls_port}/0{query}"

    def admin(self) -> redis.Redis:
        return redis.Redis.from_url(self.url(password=ADMIN_PW))


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1/localhost that is its own CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "toolfleet-test")])
    now = datetime.datetime.now(datetime.UTC)
    san = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """requirepass for the default user, an ACL user, and a TLS port beside the plain one."""
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    tls_port = free_port()
    server = RedisServer(
        [
            "--requirepass", ADMIN_PW,
            "--tls-port", str(tls_port),
            "--tls-cert-file", str(cert),
            "--tls-key-file", str(key),
            "--tls-ca-cert-file", str(cert),
            "--tls-auth-clients", "no",
        ],
        appendonly=False,
    )  # fmt: skip
    server.password = ADMIN_PW
    with server:
        admin = redis.Redis.from_url(server.url(password=ADMIN_PW))
        admin.acl_setuser(
            ACL_USER,
            enabled=True,
            passwords=[f"+{ACL_PW}"],
            keys=["~*"],
            channels=["*"],  # redis-py adds the "&": all channels (Celery's pidbox)
            commands=["+@all"],
        )
        admin.close()
        yield Secured(server, tls_port, cert)


def agent_with(script: object) -> Agent:
    return Agent(name="secure_agent", tools=TOOLS, model=script)  # type: ignore[arg-type]


def echo_script() -> ScriptedModel:
    return ScriptedModel([call(Call("typed_echo", {"text": "hi", "count": 1})), say("ok")])


async def echo_turn(settings: Settings) -> dict[str, object]:
    async with Runner(agent_with(echo_script()), settings) as runner:
        updates = [
            u async for u in runner.run(user_id="u1", session_id=uuid.uuid4().hex, message="go")
        ]
    (finished,) = [u.result for u in updates if isinstance(u, CallFinished)]
    return finished.response


# --- Flower -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def admin_settings(secured: Secured) -> Settings:
    return fault_settings(secured.url(password=ADMIN_PW))


@pytest.fixture(scope="module")
def admin_fleet(admin_settings: Settings) -> Iterator[WorkerGroup]:
    with WorkerGroup(admin_settings) as group:
        group.start(["default"], concurrency=1, name="secure")
        yield group


@pytest.fixture(scope="module")
def flower(
    admin_settings: Settings, admin_fleet: WorkerGroup, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Flower]:
    hostnames = [w.hostname for w in admin_fleet.workers]
    log_dir = tmp_path_factory.mktemp("flower")
    with running_flower(admin_settings, hostnames, log_dir, FLOWER_AUTH, WAIT_S) as server:
        yield server


def test_flower_api_refuses_requests_without_its_credentials(flower: Flower) -> None:
    assert flower.get("/api/tasks", credentials=None).status == 401
    assert flower.get("/api/tasks", credentials=(FLOWER_AUTH[0], "wrong")).status == 401
    assert flower.get("/api/workers", credentials=None).status == 401
    assert flower.get("/api/tasks").status == 200


# --- Secrets ------------------------------------------------------------------------


def _all_values(client: redis.Redis) -> Iterator[tuple[str, bytes]]:
    """Every value stored in the database, whatever the key's type."""
    for key in client.scan_iter(count=1000):
        kind = client.type(key).decode()
        name = key.decode(errors="replace")
        if kind == "string":
            yield name, client.get(key) or b""
        elif kind == "list":
            yield from ((name, v) for v in client.lrange(key, 0, -1))
        elif kind == "hash":
            yield from ((name, k + b"=" + v) for k, v in client.hgetall(key).items())
        elif kind == "set":
            yield from ((name, v) for v in client.smembers(key))
        elif kind == "zset":
            yield from ((name, v) for v in client.zrange(key, 0, -1))
        elif kind == "stream":
            for _, fields in client.xrange(key):
                yield from ((name, k + b"=" + v) for k, v in fields.items())


def _function_responses(contents: list[types.Content]) -> list[dict[str, object]]:
    return [
        dict(p.function_response.response or {})
        for c in contents
        for p in c.parts or ()
        if p.function_response
    ]


async def test_secret_argument_never_reaches_logs_flower_or_stored_events(
    secured: Secured,
    admin_settings: Settings,
    admin_fleet: WorkerGroup,
    flower: Flower,
    caplog: pytest.LogCaptureFixture,
    report_figure: Callable[[str, object], None],
) -> None:
    caplog.set_level(logging.DEBUG)
    canary = f"canary-{uuid.uuid4().hex}"
    note = f"note-{uuid.uuid4().hex[:8]}"
    model = ScriptedModel(
        by_message={
            "^first": [call(Call("use_secret", {"api_key": canary, "note": note})), say("done")],
            "^again": [say("again")],
        }
    )
    session_id = uuid.uuid4().hex
    async with Runner(agent_with(model), admin_settings) as runner:
        updates: list[Update] = [
            u async for u in runner.run(user_id="u1", session_id=session_id, message="first")
        ]
        async for _ in runner.run(user_id="u1", session_id=session_id, message="again"):
            pass
    (finished,) = [u.result for u in updates if isinstance(u, CallFinished)]
    # The tool got the real secret and returned it, sealed on its way to the orchestrator.
    assert finished.response["length"] == len(canary) and canary not in str(finished.response)

    # What the model saw: the real value within the invocation, *** once read back.
    first_turn, second_turn = model.requests[1], model.requests[-1]
    assert _function_responses(first_turn.contents)[-1]["token"] == canary
    stored_response = _function_responses(second_turn.contents)[-1]
    assert stored_response == {
        "note": note, "length": len(canary), "token": "***", "nested": {"secret": "***"},
    }  # fmt: skip
    calls = [
        p.function_call.args for c in second_turn.contents for p in c.parts or () if p.function_call
    ]
    assert calls == [{"api_key": "***", "note": note}]

    keys = Keys(admin_settings.key_prefix)
    client = secured.admin()
    stored = b"".join(
        client.lrange(keys.events(session_key(runner.app_name, "u1", session_id)), 0, -1)
    )
    assert note.encode() in stored and canary.encode() not in stored

    def flower_lists_it() -> bool:
        response = flower.get("/api/tasks")
        assert response.status == 200, response.text
        return note in response.text and '"SUCCESS"' in response.text

    wait_until(flower_lists_it, "flower to list the task as SUCCESS")
    tasks = flower.get("/api/tasks")
    assert tasks.status == 200
    tasks_text = tasks.text
    assert "'api_key': '***'" in tasks_text and canary not in tasks_text

    # The broker's copy of the message (kombu's unacked hash) goes once the task is acked.
    def canary_nowhere_in_redis() -> bool:
        return not [name for name, value in _all_values(client) if canary.encode() in value]

    wait_until(canary_nowhere_in_redis, "the canary to leave Redis")
    client.close()
    (worker,) = admin_fleet.workers
    places = {
        "worker log": worker.log(),
        "orchestrator log": caplog.text,
        "flower api": tasks_text,
        "flower log": flower.log(),
    }
    assert {place: canary in text for place, text in places.items()} == dict.fromkeys(places, False)
    assert note in worker.log() or "use_secret" in worker.log()  # the logs were read
    report_figure("canary found in", "none of: worker log, orchestrator log, Flower API/log, Redis")


def wait_until(predicate: Callable[[], bool], what: str) -> None:
    wait_for(predicate, WAIT_S, what, interval_s=0.1)


# --- Credentials and TLS ------------------------------------------------------------


async def test_acl_user_in_the_url_runs_a_worker_and_a_turn(
    secured: Secured, report_figure: Callable[[str, object], None]
) -> None:
    settings = fault_settings(secured.url(ACL_USER, ACL_PW))
    with WorkerGroup(settings) as group:
        group.start(["default"], concurrency=1, name="acl")
        assert await echo_turn(settings) == {"echo": ["hi"]}
        admin = secured.admin()
        users = admin.client_list()
        admin.close()
    assert sum(c.get("user") == ACL_USER for c in users) >= 2  # worker and orchestrator
    report_figure("ACL user / requirepass", "worker + turn work with credentials in the URL")


async def test_worker_and_orchestrator_work_over_tls(
    secured: Secured, report_figure: Callable[[str, object], None]
) -> None:
    settings = fault_settings(secured.tls_url())
    assert celery_config(settings, [])["broker_use_ssl"] == broker_tls(secured.tls_url())
    admin = secured.admin()
    with WorkerGroup(settings) as group:
        group.start(["default"], concurrency=1, name="tls")
        consumers = tls_clients(admin, secured.tls_port)  # the worker's, alone so far
        started = time.monotonic()
        async with Runner(agent_with(echo_script()), settings) as runner:
            updates = [u async for u in runner.run(user_id="u1", session_id="tls", message="go")]
            elapsed = time.monotonic() - started
            # While the orchestrator is up: its connections join the worker's on the TLS port.
            during = tls_clients(admin, secured.tls_port)
    admin.close()
    (finished,) = [u.result for u in updates if isinstance(u, CallFinished)]
    assert finished.response == {"echo": ["hi"]}
    assert consumers and len(during) > len(consumers), (consumers, during)
    report_figure("rediss:// turn (worker + orchestrator over TLS)", f"{elapsed:.2f} s")


def tls_clients(admin: redis.Redis, tls_port: int) -> list[dict[str, str]]:
    return [c for c in admin.client_list() if c.get("laddr", "").endswith(f":{tls_port}")]


def test_broker_tls_verifies_certificates_unless_the_url_says_otherwise() -> None:

    assert broker_tls("redis://h:6379/0") is None
    # kombu alone would not verify a rediss:// server; redis-py does: both verify.
    assert broker_tls("rediss://h:6380/0") == {"ssl_cert_reqs": ssl.CERT_REQUIRED}


def _toolfleet(args: list[str], url: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TOOLFLEET_REDIS_URL": url, "TOOLFLEET_TOOL_MODULES": ""}
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY"):
        env.pop(name, None)
    return started(
        subprocess.Popen(
            [sys.executable, "-m", "toolfleet", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    )


SERVE = ["serve", "--agent", "examples.calculator:agent"]
WORKER = ["worker", "--tools", "tests.faults.input_tools", "-c", "1"]
RUN = ["run", "--agent", "examples.calculator:agent", "what is 1+1"]


def test_commands_fail_clearly_without_the_right_credentials_or_server(
    secured: Secured, report_figure: Callable[[str, object], None]
) -> None:
    port = secured.server.port
    nowhere = f"redis://:{ADMIN_PW}@127.0.0.1:{free_port()}/0"
    cases = {
        # name: (command, URL, what stderr must say)
        "worker, no password": (
            WORKER, f"redis://127.0.0.1:{port}/0", f"redis://127.0.0.1:{port}/0",
        ),
        "worker, wrong password": (
            WORKER, f"redis://:wrong-pw@127.0.0.1:{port}/0", f"redis://:***@127.0.0.1:{port}/0",
        ),
        "serve, no password": (SERVE, f"redis://127.0.0.1:{port}/0", "needs credentials"),
        "serve, wrong ACL password": (
            SERVE, f"redis://{ACL_USER}:wrong-pw@127.0.0.1:{port}/0",
            f"redis://{ACL_USER}:***@127.0.0.1:{port}/0",
        ),
        "worker, TLS without the CA": (
            WORKER, secured.tls_url(ca=False), "ssl_ca_certs",
        ),
        "serve, unreachable": (SERVE, nowhere, "nothing answered"),
        "worker, unreachable": (WORKER, nowhere, "nothing answered"),
        "run, unreachable": (RUN, nowhere, "nothing answered"),
    }  # fmt: skip
    started = time.monotonic()
    processes = {name: _toolfleet(command, url) for name, (command, url, _) in cases.items()}
    outcomes: dict[str, tuple[int, str]] = {}
    try:
        for name, process in processes.items():
            _, stderr = process.communicate(timeout=CLI_TIMEOUT_S)
            outcomes[name] = (process.returncode, stderr)
    finally:
        for process in processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
    elapsed = time.monotonic() - started
    for name, (_, _, expected) in cases.items():
        code, stderr = outcomes[name]
        assert code == 2, (name, stderr[-2000:])
        assert stderr.startswith("toolfleet: "), (name, stderr[-2000:])
        assert expected in stderr, (name, stderr[-2000:])
        assert "TOOLFLEET_REDIS_URL" in stderr, (name, stderr)
        assert "wrong-pw" not in stderr and ADMIN_PW not in stderr and ACL_PW not in stderr
        assert "Traceback" not in stderr, (name, stderr)
    report_figure(
        "bad credentials / TLS / unreachable: exit 2 with the masked URL",
        f"{len(cases)} of {len(cases)} commands, all within {elapsed:.1f} s (in parallel)",
    )
