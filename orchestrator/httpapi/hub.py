"""In-process fan-out of a session's updates to the event streams watching it.

The completions listener resumes a session on whichever replica reads the
completion, and only that replica's hub sees the resumed invocation's updates. A
client must therefore be connected to the replica that resumes the session (one
replica, or sticky routing), or poll `GET .../sessions/{id}`, which reads Redis and
is right on every replica. Cross-replica fan-out is not built.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from toolfleet.orchestrator.loop.invocation import Update
from toolfleet.shared.keys import SessionKey

# Updates a slow stream may have queued before it is cut off (it can reconnect and
# read the session with GET).
MAX_QUEUED = 1_000


@dataclass(frozen=True)
class InvocationFailed:
    """An invocation started through the API raised instead of ending normally."""

    session_id: str
    status: int
    detail: str


@dataclass(frozen=True)
class StreamClosed:
    """No more items: the server stops, or the subscriber fell too far behind."""

    reason: str


HubItem = Update | InvocationFailed | StreamClosed


class Subscription:
    """One watcher's queue of a session's updates on this replica.

    At MAX_QUEUED waiting items it is emptied and left with only a StreamClosed."""

    def __init__(self, session: SessionKey) -> None:
        self.session = session
        self.queue: asyncio.Queue[HubItem] = asyncio.Queue()

    def put(self, item: HubItem) -> bool:
        """Queue an item; False once the subscriber is too far behind (it is closed)."""
        if self.queue.qsize() >= MAX_QUEUED:
            while not self.queue.empty():
                self.queue.get_nowait()
            self.queue.put_nowait(
                StreamClosed(
                    f"this stream fell more than {MAX_QUEUED} updates behind; "
                    "read the session with GET and reconnect"
                )
            )
            return False
        self.queue.put_nowait(item)
        return True


class SessionHub:
    """Subscriptions keyed by session (its key: an id alone repeats across users);
    `publish` is the Orchestrator's `on_update`."""

    def __init__(self) -> None:
        self._subscribers: dict[SessionKey, set[Subscription]] = {}
        self._closed = False

    def subscribe(self, session: SessionKey) -> Subscription:
        """Start queueing the session's updates; `unsubscribe` when done."""
        subscription = Subscription(session)
        if self._closed:
            subscription.put(StreamClosed("the server is shutting down"))
        self._subscribers.setdefault(session, set()).add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        """Stop queueing for `subscription`; call it when its stream ends, or the hub keeps it."""
        self._discard(subscription)

    def publish(self, session: SessionKey, item: HubItem) -> None:
        """Queue `item` for every watcher of the session; watchers too far behind are closed and
        dropped. Call it on the event loop: the queues are not thread-safe."""
        for subscription in list(self._subscribers.get(session, ())):
            if not subscription.put(item):
                self._discard(subscription)

    def close(self) -> None:
        """End every stream (the server is shutting down)."""
        self._closed = True
        for subscriptions in list(self._subscribers.values()):
            for subscription in list(subscriptions):
                subscription.put(StreamClosed("the server is shutting down"))

    def watchers(self, session: SessionKey) -> int:
        """How many subscriptions the session has on this replica (other replicas not counted)."""
        return len(self._subscribers.get(session, ()))

    def _discard(self, subscription: Subscription) -> None:
        subscriptions = self._subscribers.get(subscription.session)
        if subscriptions is None:
            return
        subscriptions.discard(subscription)
        if not subscriptions:
            del self._subscribers[subscription.session]
