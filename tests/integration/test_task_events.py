"""Workers send Flower's task events in batches: a prefork worker's consumer
(toolfleet.shared.celery_wire.consumer) and an io worker's intake, which sends them
while Celery's control commands (Flower's `enable_events`) say they are wanted.

Celery's own consumer publishes a call's task-received event on its loop's next turn,
before the call even reaches the pool's child, so the received and succeeded events of a
call never share a message. Ours flushes every TASK_EVENTS_PERIOD_S: a quick call's three
events go out together.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery
from celery.events.receiver import EventReceiver
from celery.events.state import State

from tests.integration import fleet_tools
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerSpec
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import tools_in_module
from toolfleet.workers.intake.events import TaskEvents

pytestmark = pytest.mark.integration

EVENTS_TIMEOUT_S = 20.0
# Quick calls tried until one's events share a message (a call slower than the period,
# on a loaded machine, splits its events across two).
ATTEMPTS = 5


class EventListener:
    """Every message on Celery's event exchange, as the list of events it carried."""

    def __init__(self, url: str) -> None:
        self._client = redis.Redis.from_url(url)
        self._pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        self._pubsub.psubscribe("*celeryev*")
        self.messages: list[list[dict[str, Any]]] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)

    def __enter__(self) -> EventListener:
        self._pubsub.get_message(timeout=5)  # the subscription's confirmation
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._pubsub.close()
        self._client.close()

    def _listen(self) -> None:
        while not self._stop.is_set():
            message = self._pubsub.get_message(timeout=0.2)
            if message is None:
                continue
            envelope = json.loads(message["data"])
            body = json.loads(base64.b64decode(envelope["body"]))
            with self.lock:
                self.messages.append(body if isinstance(body, list) else [body])

    def messages_of(self, task_id: str) -> list[list[str]]:
        """The types of `task_id`'s events, per message that carried any."""
        with self.lock:
            found = [[e["type"] for e in m if e.get("uuid") == task_id] for m in self.messages]
        return [types for types in found if types]

    def succeeded(self, label: str) -> bool:
        """Whether the call whose arguments hold `label` was heard to succeed."""
        task_id = self.task_id_of(label)
        return task_id is not None and any(
            "task-succeeded" in types for types in self.messages_of(task_id)
        )

    def task_id_of(self, label: str) -> str | None:
        with self.lock:
            for message in self.messages:
                for event in message:
                    if event.get("type") == "task-received" and label in str(event):
                        return str(event["uuid"])
        return None


@pytest.fixture
def listener(settings: Settings) -> Iterator[EventListener]:
    with EventListener(settings.require_redis_url()) as heard:
        yield heard


async def test_a_quick_calls_events_go_out_in_one_message(
    settings: Settings, fleet: WorkerGroup, listener: EventListener
) -> None:
    tools = tools_in_module(fleet_tools)
    split: list[list[list[str]]] = []
    for attempt in range(ATTEMPTS):
        label = f"events-{uuid.uuid4().hex[:8]}"
        script = [call(Call("nap", {"seconds": 0, "label": label})), say("done")]
        agent = Agent(name="events_agent", tools=tools, model=ScriptedModel(script))  # type: ignore[arg-type]
        async with Runner(agent, settings) as runner:
            await runner.ask(user_id="u1", session_id=uuid.uuid4().hex, message="go")

        wait_for(
            lambda label=label: listener.succeeded(label),
            EVENTS_TIMEOUT_S,
            f"the task events of call {attempt + 1}",
        )
        task_id = listener.task_id_of(label)
        assert task_id is not None
        per_message = listener.messages_of(task_id)
        assert sorted(t for types in per_message for t in types) == [
            "task-received",
            "task-started",
            "task-succeeded",
        ]
        if len(per_message) == 1:
            return
        split.append(per_message)
    pytest.fail(f"every call's events came in several messages: {split}")


def test_an_intakes_events_on_redis_are_made_only_while_someone_listens(
    settings: Settings,
) -> None:
    """kombu's Redis channel drops a publish's reply; the intake's events learn from it
    whether anyone listens, and make no event while nobody does."""
    app = Celery("test-events-reach", broker=settings.require_redis_url(), set_as_current=False)
    events = TaskEvents(app, f"reach-{uuid.uuid4().hex[:8]}@host", lambda: True)
    made: list[str] = []

    def received(task_id: str) -> None:
        events.send_made("task-received", lambda: made.append(task_id) or {"uuid": task_id})

    try:
        received("before-1")
        events.flush()  # nobody subscribed: reached no client
        received("before-2")
        events.flush()
        assert made == ["before-1"]

        with EventListener(settings.require_redis_url()) as listener:
            received("heard")
            events.flush()
            wait_for(lambda: listener.messages_of("heard"), EVENTS_TIMEOUT_S, "the event")
        assert made == ["before-1", "heard"]
    finally:
        events.close()


async def test_celerys_event_state_follows_an_io_workers_call_to_success(
    settings: Settings, fleet: WorkerGroup, listener: EventListener
) -> None:
    """Flower keeps its view in Celery's State: the events an io worker's intake encodes
    itself must drive it as a Celery worker's would."""
    label = f"io-events-{uuid.uuid4().hex[:8]}"
    script = [call(Call("shout", {"text": label})), say("done")]
    agent = Agent(
        name="io_events_agent", tools=tools_in_module(fleet_tools), model=ScriptedModel(script)
    )  # type: ignore[arg-type]
    async with Runner(agent, settings) as runner:
        await runner.ask(user_id="u1", session_id=uuid.uuid4().hex, message="go")

    wait_for(
        lambda: listener.succeeded(label), EVENTS_TIMEOUT_S, "the io call's task-succeeded event"
    )
    task_id = listener.task_id_of(label)
    # As Flower's receiver takes each event of a message, then hands it to its State.
    receiver = EventReceiver(channel=None, app=Celery(set_as_current=False))
    state = State()
    with listener.lock:
        for message in listener.messages:
            for event in message:
                state.event(receiver.event_from_message(event)[1])
    task = state.tasks[task_id]
    assert task.state == "SUCCESS"
    assert task.name == "tool.shout" and label in str(task.args)
    assert task.worker is not None and task.worker.hostname.startswith("w6@")
    assert task.received is not None and task.started is not None and task.runtime is not None


@pytest.fixture(scope="module")
def quiet(settings: Settings) -> Iterator[tuple[Settings, str]]:
    """An io worker of pool `quiet_io` started with task events off
    (TOOLFLEET_TASK_EVENTS=false), under a key prefix of its own; and its name."""
    own = settings.model_copy(
        update={
            "key_prefix": f"{settings.key_prefix}-quiet",
            "default_io_pool": "quiet_io",
            "task_events": False,
        }
    )
    with WorkerGroup(own) as group:
        (worker,) = group.start_all([WorkerSpec(["quiet_io"], 8, "quiet")])
        yield own, worker.hostname


async def shout_once(settings: Settings, label: str) -> None:
    """One call of `shout`, answered."""
    script = [call(Call("shout", {"text": label})), say("done")]
    agent = Agent(
        name="quiet_agent", tools=tools_in_module(fleet_tools), model=ScriptedModel(script)
    )  # type: ignore[arg-type]
    async with Runner(agent, settings) as runner:
        answer = await runner.ask(user_id="u1", session_id=uuid.uuid4().hex, message="go")
    assert answer == "done"


def set_task_events(control: Celery, hostname: str, on: bool) -> None:
    """Flower's command (or `celery control`) to the worker, answered: from here on its
    calls follow it."""
    command = control.control.enable_events if on else control.control.disable_events
    replies = command(destination=[hostname], reply=True, timeout=EVENTS_TIMEOUT_S)
    assert replies and hostname in replies[0], replies


async def test_an_io_worker_with_task_events_off_sends_them_only_while_asked(
    quiet: tuple[Settings, str], listener: EventListener
) -> None:
    own, hostname = quiet
    control = Celery("test-task-events", broker=own.require_redis_url(), set_as_current=False)
    tag = uuid.uuid4().hex[:8]

    async def heard(label: str) -> None:
        await shout_once(own, label)

        wait_for(lambda: listener.succeeded(label), EVENTS_TIMEOUT_S, f"the task events of {label}")

    try:
        await shout_once(own, f"before-{tag}")
        set_task_events(control, hostname, on=True)
        await heard(f"asked-{tag}")
        # One thread publishes a worker's events in order: had the first call's been
        # sent, they would have come before these.
        assert listener.task_id_of(f"before-{tag}") is None
        set_task_events(control, hostname, on=False)
        await shout_once(own, f"stopped-{tag}")
        set_task_events(control, hostname, on=True)
        await heard(f"again-{tag}")
        assert listener.task_id_of(f"stopped-{tag}") is None
    finally:
        control.close()
