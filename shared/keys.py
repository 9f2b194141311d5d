"""Every Redis key, stream and queue name toolfleet uses: keys and streams under the
prefix of `Keys`; Celery's queues (`queue_name`) are not prefixed."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import NewType
from urllib.parse import quote, unquote

from toolfleet.shared.ids import unique_hex

# The name toolfleet knows one session by in Redis, on the fleet and between replicas: its
# app, user and id together. A session id alone names nothing (two users may each have a
# session "s1"), as in ADK, whose session services key sessions by all three.
SessionKey = NewType("SessionKey", str)

TASK_PREFIX = "tool."
QUEUE_PREFIX = "tools."


def task_name(tool_name: str) -> str:
    """The Celery task that runs a tool; Flower lists tools under these names."""
    return f"{TASK_PREFIX}{tool_name}"


def queue_name(pool: str) -> str:
    """The Celery queue (a Redis list) a pool's workers consume."""
    return f"{QUEUE_PREFIX}{pool}"


def scope_key(*parts: str) -> str:
    """A key part naming a scope of things kept per app and user (and session, tool, ...):
    each part percent-encoded (no "/" or ":" left in it), joined by "/", so that no two
    scopes share one whatever their ids hold - a user `alice:s1` is not alice's session
    `s1`, and a scope of two parts never one of three. `session_key` is one of these."""
    return "/".join(quote(p, safe="") for p in parts)


def agent_tool_child_id(session_id: str, call_id: str) -> str:
    """The id of the child session in which an agent tool runs its agent for the call
    `call_id` of session `session_id` (of the same app and user)."""
    return f"{session_id}.{call_id}"


def agent_tool_child(session: SessionKey, call_id: str) -> SessionKey:
    """The key of that child session of the call `call_id` of `session`."""
    app_name, user_id, session_id = session_parts(session)
    return session_key(app_name, user_id, agent_tool_child_id(session_id, call_id))


# Remembered: a worker asks for the key of each call it runs, a thousand calls of a
# session at once, and percent-encoding three parts costs more than the lookup.
@lru_cache(maxsize=4096)
def session_key(app_name: str, user_id: str, session_id: str) -> SessionKey:
    """The key of the session `session_id` of `user_id` in `app_name`: the three parts,
    each percent-encoded (no "/" or ":" left in them), joined by "/", so that no two
    sessions share one and `session_parts` gives them back."""
    return SessionKey(scope_key(app_name, user_id, session_id))


def session_parts(key: SessionKey) -> tuple[str, str, str]:
    """(app name, user id, session id) of a `session_key`; ValueError if it is not one."""
    parts = key.split("/")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"{key!r} is not a session key (app/user/session, percent-encoded)")
    app_name, user_id, session_id = (unquote(p) for p in parts)
    return app_name, user_id, session_id


@dataclass(frozen=True)
class Keys:
    """The names of toolfleet's own Redis keys, each under `prefix` (TOOLFLEET_KEY_PREFIX).

    Celery's queues (see `queue_name`) are not under the prefix.

    Attributes:
        prefix: The first part of every key, before a ":"; default `"toolfleet"`.
            Deployments sharing one Redis keep apart by giving each its own.
    """

    prefix: str = "toolfleet"

    def results(self, session: SessionKey) -> str:
        """Stream of ToolResults for one session (its inbox, trimmed once applied)."""
        return f"{self.prefix}:results:{session}"

    def results_feed(self) -> str:
        """Stream naming every result posted (its session stream and entry there, with a
        copy of the result up to 8 KB): replicas block on it instead of on the streams of
        all the sessions they run."""
        return f"{self.prefix}:results-feed"

    def results_feed_count(self) -> str:
        """How many entries were ever added to the results feed: each entry carries its
        number, so a reader that fell behind the feed's trimming knows it missed some."""
        return f"{self.prefix}:results-feed-count"

    def wake(self, replica_id: str) -> str:
        """Stream used only to interrupt one replica's blocking XREAD."""
        return f"{self.prefix}:wake:{replica_id}"

    def session(self, session: SessionKey) -> str:
        """Hash with a session's metadata (app, user, created, agent)."""
        return f"{self.prefix}:session:{session}"

    def events(self, session: SessionKey) -> str:
        """List of a session's events as JSON."""
        return f"{self.prefix}:events:{session}"

    def session_state(self, session: SessionKey) -> str:
        """Hash of a session's own state (keys without a scope prefix)."""
        return f"{self.prefix}:state:session:{session}"

    def user_state(self, app: str, user: str) -> str:
        """Hash of a user's `user:` state, shared by all their sessions of the app."""
        return f"{self.prefix}:state:user:{scope_key(app, user)}"

    def app_state(self, app: str) -> str:
        """Hash of an app's `app:` state, shared by every session of the app."""
        return f"{self.prefix}:state:app:{app}"

    def user_sessions(self, app: str, user: str) -> str:
        """Set of session ids of one user."""
        return f"{self.prefix}:sessions:{scope_key(app, user)}"

    def memory_sessions(self, app: str, user: str) -> str:
        """Set of the ids of the sessions one user's memory holds (add_session_to_memory)."""
        return f"{self.prefix}:memory:{scope_key(app, user)}"

    def lease(self, session: SessionKey) -> str:
        """Which replica runs a session now (SET NX with a TTL)."""
        return f"{self.prefix}:lease:{session}"

    def applied_writes(self, session: SessionKey) -> str:
        """Prefix of the keys `<prefix>:<write id>` that record a session write's replies
        for a while (leases.record_ttl_s): a write sent again (its reply was lost) is not
        applied twice."""
        return f"{self.prefix}:applied:{session}"

    def worker(self, hostname: str) -> str:
        """A live worker's heartbeat: its pools, refreshed with a TTL."""
        return f"{self.prefix}:worker:{hostname}"

    def workers(self) -> str:
        """Sorted set of worker hostnames, scored by when their heartbeat expires: live
        workers are found without scanning the keyspace."""
        return f"{self.prefix}:workers"

    def worker_name(self, hostname: str) -> str:
        """A worker's hold on its node name (SET NX, renewed by its heartbeat): one live
        worker per name."""
        return f"{self.prefix}:worker-name:{hostname}"

    def pending(self) -> str:
        """Hash call id -> PendingCall of every long-running call awaiting its result.
        Call ids are the loop's own, unique across sessions: a model cannot give two
        sessions' calls one."""
        return f"{self.prefix}:pending"

    def session_pending(self, session: SessionKey) -> str:
        """Set of the call ids of one session's records in `pending`, changed in the same
        step as the hash: one session's pending calls are read without the whole hash. It
        lives as long as the session's other keys."""
        return f"{self.prefix}:pending-of:{session}"

    def pending_by_age(self) -> str:
        """Sorted set of the call ids in `pending`, scored by their records' `created_at`,
        changed in the same step as the hash: tickets are counted by age without reading
        the records."""
        return f"{self.prefix}:pending-by-age"

    def pending_indexed(self) -> str:
        """Holds INDEX_VERSION once every record in `pending` is in its session's
        `session_pending` set and in `pending_by_age`: records written before those
        existed are added on the first read that finds another value."""
        return f"{self.prefix}:pending-indexed"

    def applied(self, call_id: str) -> str:
        """Set once when a call's final result is applied (the apply-once guard)."""
        return f"{self.prefix}:applied:{call_id}"

    def deliveries(self, call_id: str, retries: int, sent_at: float) -> str:
        """Counter of the broker's deliveries of one attempt of a call (the crash guard),
        as sent at `sent_at` (its envelope's `dispatched_at`): a call sent again once
        confirmed, or with the user's credential, is another message, counted anew."""
        return f"{self.prefix}:deliveries:{call_id}:{sent_at!r}:{retries}"

    def completions(self, app_name: str) -> str:
        """Stream of posted long-running results for one app, read by a consumer group."""
        return f"{self.prefix}:completions:{app_name}"

    def apply_failures(self, stream: str, entry_id: str) -> str:
        """Counter of the times applying a completion entry raised (it is dead-lettered at
        a bound: a completion that can never apply would hold back its session's later
        ones for ever)."""
        return f"{self.prefix}:apply-failures:{stream}:{entry_id}"

    def dead_letters(self) -> str:
        """Stream of refused completions, kept for inspection, never silently dropped."""
        return f"{self.prefix}:dead-letters"

    def artifact(self, scope: str, filename: str) -> str:
        """List of an artifact's versions (JSON Parts); scope is a `scope_key` of app, user
        (and session): it holds no ":", so the filename after it is read whole."""
        return f"{self.prefix}:artifact:{scope}:{filename}"

    def artifact_times(self, scope: str, filename: str) -> str:
        """List of when each version of an artifact was saved (epoch seconds), by version."""
        return f"{self.prefix}:artifact-times:{scope}:{filename}"

    def artifact_names(self, scope: str) -> str:
        """Set of the artifact filenames saved in one scope (a `scope_key` of app, user and
        session, or of app and user for the user's own)."""
        return f"{self.prefix}:artifacts:{scope}"

    def credential(self, app: str, user: str, auth_key: str) -> str:
        """A user's encrypted credential for one AuthConfig key."""
        return f"{self.prefix}:credential:{scope_key(app, user, auth_key)}"

    def parked(self, turn_id: str) -> str:
        """Hash call id -> ToolResult of a turn waiting for a credential."""
        return f"{self.prefix}:parked:{turn_id}"

    def resume(self) -> str:
        """Set of session ids owing the model a turn: an invocation is running (or died
        running), or a long-running call's final result was applied and not yet answered."""
        return f"{self.prefix}:resume"

    def dispatched(self, session: SessionKey) -> str:
        """Set of call ids of the session's open turn already published to the broker."""
        return f"{self.prefix}:dispatched:{session}"

    def running(self, session: SessionKey) -> str:
        """Hash of the session's calls a worker started: call id -> RunningCall JSON (who
        runs it, since when), what `toolfleet run` shows while a turn is long."""
        return f"{self.prefix}:running:{session}"

    def progress_stored(self, session: SessionKey, call_id: str) -> str:
        """Counter of a pending call's progress reports its session stored as events."""
        return f"{self.prefix}:progress-stored:{session}:{call_id}"

    def closed(self, session: SessionKey, call_id: str) -> str:
        """Set once the orchestrator gave the call its final answer (result, error, timeout):
        a worker does not start it, and no ticket can be opened or completed for it."""
        return f"{self.prefix}:closed:{session}:{call_id}"

    def state_snapshot(self, session: SessionKey, digest: str) -> str:
        """The session state a turn's calls were sent with (JSON, secret-named values
        sealed), by its SHA-256 (hex): stored once for them, not in each call's message,
        when it is large (shared.state_snapshots)."""
        return f"{self.prefix}:statesnap:{session}:{digest}"

    def cancelled(self, session: SessionKey) -> str:
        """A session's last cancellation, kept for the replica that next resumes it (none
        ran it when it came): the length its events had then (`shared.cancellation`)."""
        return f"{self.prefix}:cancelled:{session}"

    def cancels(self) -> str:
        """Stream of session cancellations: every replica reads it, and the one running the
        session stops what is in flight there."""
        return f"{self.prefix}:cancels"

    def tool_slots(self, tool: str) -> str:
        """Sorted set of the calls of a tool holding a slot (max_concurrency), scored by
        when each holder's lease ends."""
        return f"{self.prefix}:slots:{tool}"

    def tool_starts(self, tool: str) -> str:
        """Sorted set of a tool's recent starts (rate_limit), scored by their time in ms."""
        return f"{self.prefix}:starts:{tool}"

    def completion_order(self, session: SessionKey) -> str:
        """List of the session's completion entry ids, in the order the stream accepted
        them: each applies only once it is at the head, whichever replica reads it."""
        return f"{self.prefix}:completion-order:{session}"


def applied_record(prefix: str) -> str:
    """The key recording one write's outcome under `prefix` (Keys.applied_writes): an id
    of its own, the same on each resend of that write."""
    return f"{prefix}:{unique_hex(16)}"
