"""A call a worker retries is sent again as a message of its own (Celery's `retry`):
that message shows Flower what the call's did - its arguments masked, the call's ids -
never the envelope itself."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.support import LocalTool
from tests.unit.test_call_signing import STREAM
from tests.unit.test_celery_wire_contract import Broker, broker
from tests.unit.test_delivery_guard import guarded_deps
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.shared.celery_wire.parse import decode
from toolfleet.shared.celery_wire.worker import run_as_request
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import task_name
from toolfleet.shared.messages import ToolCall
from toolfleet.shared.tools import ToolOptions
from toolfleet.workers.tasks import register_tool_tasks

__all__ = ["broker"]  # the in-memory broker fixture, used here

SETTINGS = Settings(redis_url="redis://unused", key_prefix="t", max_deliveries=3)
QUEUE = "tools.default"
CANARY = "sk-CANARY-0123456789"


class Flaky(Exception):
    """What a flaky tool's retry_on names."""


def call_of(tool: str, args: dict[str, Any], call_id: str = "c1") -> ToolCall:
    return ToolCall(
        call_id=call_id, tool=tool, args=args, session_id="s", app_name="app", user_id="u",
        invocation_id="inv", agent="a", reply_to=STREAM, dispatched_at=time.time(),
    )  # fmt: skip


@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_retried_calls_message_shows_flower_no_secret_argument(
    broker: Broker,
) -> None:
    """The orchestrator's message shows Flower the arguments masked (argsrepr) and only
    the ids (kwargsrepr). The retry a worker sends (Celery's `task.retry`) computes its
    own kwargsrepr from the kwargs: the whole envelope, secrets in clear without a fleet
    key (docs: 'never shown'), the state snapshot too with one."""
    app, client = broker.app, broker.client

    def login(user: str, api_key: str) -> dict[str, str]:
        raise Flaky("try again")

    tool = LocalTool(login, options=ToolOptions(retry_on=(Flaky,), max_retries=2))
    register_tool_tasks(app, {"login": tool}, guarded_deps(client, SETTINGS))
    call = call_of("login", {"user": "bob", "api_key": CANARY})
    publisher = CeleryPublisher(None, secret_arg_names=SETTINGS.secret_arg_names)  # type: ignore[arg-type]
    raw = publisher.encode(publisher.dispatch(call, QUEUE))
    assert CANARY not in json.loads(raw)["headers"]["kwargsrepr"]  # as sent: masked
    task = app.tasks[task_name("login")]

    taken = decode(raw)
    with pytest.raises(Exception, match="Retry in"):
        run_as_request(task, taken, "w@h", lambda: task.run(**taken.kwargs))

    retry = client.rpop(QUEUE)
    assert isinstance(retry, bytes)
    headers = json.loads(retry)["headers"]
    shown = f"{headers.get('argsrepr')} {headers.get('kwargsrepr')}"
    assert CANARY not in shown, f"Flower would show: {shown[:200]}"
