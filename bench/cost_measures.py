"""What the cost benchmark (bench/cost.py) reads from Redis, and how it posts and times
completions, with the references it measures beside them."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import redis
from celery import Celery

from bench.harness import CpuMeter
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.shared.completions import Completions
from toolfleet.shared.errors import CompletionsFullError
from toolfleet.shared.keys import Keys, SessionKey
from toolfleet.shared.messages import PendingCall


def used_memory(client: redis.Redis) -> int:
    info: Any = client.info("memory")
    return int(info["used_memory"])


def keys_memory(client: redis.Redis, pattern: str) -> int:
    """Redis's own account (MEMORY USAGE, every element) of the keys matching `pattern`:
    what they store, whatever the server's client buffers and allocator do meanwhile."""
    names = list(client.scan_iter(pattern, count=1000))
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.memory_usage(name, samples=0)
    return sum(int(n or 0) for n in pipe.execute())


def settled_memory(client: redis.Redis, settle_s: float, pattern: str) -> dict[str, int]:
    """used_memory now, and after `settle_s` (the 60 s replies kept per session write
    expire) used_memory and the memory of the keys matching `pattern`: the cost that
    stays. The keys' memory is the measure; used_memory also moves with client buffers
    and the allocator, which swamp it at small sizes."""
    now = used_memory(client)
    time.sleep(settle_s)  # ok: waiting out a TTL, not waiting for a result
    return {"at_once": now, "settled": used_memory(client), "keys": keys_memory(client, pattern)}


def stored_bytes(client: redis.Redis, keys: Keys, sessions: Sequence[SessionKey]) -> dict[str, Any]:
    """Events in `sessions` (all counted) and the bytes of JSON stored for a sample of
    them: each event's JSON and the session hash's fields and values."""
    pipe = client.pipeline(transaction=False)
    for key in sessions:
        pipe.llen(keys.events(key))
    events = sum(int(n) for n in pipe.execute())
    sample = list(sessions[:: max(1, len(sessions) // 300)])
    for key in sample:
        pipe.lrange(keys.events(key), 0, -1)
        pipe.hgetall(keys.session(key))
    replies = pipe.execute()
    raw = sum(
        sum(len(e) for e in replies[i]) + sum(len(k) + len(v) for k, v in replies[i + 1].items())
        for i in range(0, len(replies), 2)
    )
    sampled_events = sum(len(replies[i]) for i in range(0, len(replies), 2))
    return {
        "events": events,
        "raw_bytes_per_session": raw / len(sample),
        "raw_bytes_per_event": raw / sampled_events,
    }


def pending_by_session(client: redis.Redis, keys: Keys) -> dict[str, list[str]]:
    """Call ids of every pending call, grouped by session, sessions in creation order."""
    found: dict[str, list[str]] = {}
    records = [
        PendingCall.model_validate_json(raw)
        for _, raw in client.hscan_iter(keys.pending(), count=1000)
    ]
    for call in sorted(records, key=lambda c: c.created_at):
        found.setdefault(call.session_key, []).append(call.call_id)
    return found


def pending_record_bytes(client: redis.Redis, keys: Keys) -> dict[str, float]:
    """The pending hash: Redis's memory for it (MEMORY USAGE, every field) and the mean
    bytes of a record's JSON, per record."""
    count = int(client.hlen(keys.pending()))
    usage = int(client.memory_usage(keys.pending(), samples=0) or 0)
    found = client.hscan_iter(keys.pending(), count=500)
    sample = [len(value) for _, (_, value) in zip(range(500), found, strict=False)]
    raw = sum(sample) / max(1, len(sample))
    return {"records": count, "memory_per_record": usage / max(1, count), "json_bytes": raw}


# ---------------------------------------------------------------- completions


def post_all(url: str, keys: Keys, call_ids: Sequence[str], posters: int) -> dict[str, float]:
    """Post a final result for each call from `posters` threads (a background job's
    `Completions.post_result`, one Redis client each); a refused post (the stream is
    full) is posted again. Returns the posting seconds and the refusals."""
    refused = [0]
    lock = threading.Lock()

    def post(part: Sequence[str]) -> None:
        client = redis.Redis.from_url(url)
        completions = Completions(client, keys)
        try:
            for call_id in part:
                while True:
                    try:
                        completions.post_result(call_id, {"status": "resolved"}, source="bench")
                        break
                    except CompletionsFullError:
                        with lock:
                            refused[0] += 1
                        time.sleep(0.05)  # ok: a poster backs off when the stream is full
        finally:
            client.close()

    threads = [
        threading.Thread(target=post, args=(call_ids[i::posters],), daemon=True)
        for i in range(posters)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"post_s": time.perf_counter() - started, "refused": refused[0]}


def apply_completions(
    url: str, keys: Keys, call_ids: Sequence[str], posters: int, meter: CpuMeter, timeout_s: float
) -> dict[str, Any]:
    """Post the results of `call_ids` and time until every one is applied (its pending
    record gone) and every session resumed and answered (none owes the model a turn)."""
    client = redis.Redis.from_url(url)
    try:
        left = int(client.hlen(keys.pending())) - len(call_ids)
        loadavg = os.getloadavg()
        applied_at: list[float] = []

        def applied() -> bool:
            if not applied_at and int(client.hlen(keys.pending())) <= left:
                applied_at.append(time.perf_counter())
            return bool(applied_at) and int(client.scard(keys.resume())) == 0

        meter.start()
        started = time.perf_counter()
        posted = post_all(url, keys, call_ids, posters)
        wait_for(applied, timeout_s, f"{len(call_ids)} completions to apply", interval_s=0.01)
        settled = time.perf_counter()
        cpu = meter.stop()
    finally:
        client.close()
    return {
        **posted,
        "applied_s": applied_at[0] - started,
        "settled_s": settled - started,
        "loadavg": loadavg,
        "cpu_s": cpu,
    }


def stream_floor(url: str, prefix: str, entries: int, posters: int) -> float:
    """Reference: `entries` XADDs from `posters` threads to one stream, read by a consumer
    group (100 at a time) and acknowledged: seconds until the last is acknowledged."""
    stream, group = f"{prefix}:bench-floor:{uuid.uuid4().hex[:6]}", "g"
    client = redis.Redis.from_url(url)
    client.xgroup_create(stream, group, id="0", mkstream=True)

    def post(count: int) -> None:
        poster = redis.Redis.from_url(url)
        try:
            for i in range(count):
                poster.xadd(stream, {"completion": '{"status": "resolved"}', "n": i})
        finally:
            poster.close()

    threads = [
        threading.Thread(target=post, args=(len(range(i, entries, posters)),), daemon=True)
        for i in range(posters)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    acked = 0
    try:
        while acked < entries:
            reply: Any = client.xreadgroup(group, "c", {stream: ">"}, count=100, block=1000)
            for _, found in reply or []:
                ids = [entry_id for entry_id, _ in found]
                acked += int(client.xack(stream, group, *ids))
        elapsed = time.perf_counter() - started
    finally:
        for thread in threads:
            thread.join()
        client.delete(stream)
        client.close()
    return elapsed


def celery_backend_per_task(url: str, tasks: int, settle_s: float) -> dict[str, float]:
    """Reference: Redis memory per task of Celery's own Redis result backend, each task
    stored STARTED with the same initial result a ticket has (its meta key, which Celery
    keeps a day)."""
    app = Celery("bench_cost_reference", broker=url, backend=url)
    app.conf.result_extended = False
    backend: Any = app.backend  # Celery's Redis backend (its stubs name only the base)
    client = redis.Redis.from_url(url)
    ids = [str(uuid.uuid4()) for _ in range(tasks)]
    try:
        pattern = backend.get_key_for_task("*").decode()
        before = settled_memory(client, 0.0, pattern)["keys"]
        for task_id in ids:
            backend.store_result(task_id, {"status": "pending", "ticket": "ticket 0"}, "STARTED")
        after = settled_memory(client, settle_s, pattern)["keys"]
        sample: Any = client.get(backend.get_key_for_task(ids[0]))
    finally:
        pipe = client.pipeline(transaction=False)
        for task_id in ids:
            pipe.delete(backend.get_key_for_task(task_id))
        pipe.execute()
        client.close()
        app.close()
    return {"memory_per_task": (after - before) / tasks, "json_bytes": len(sample or b"")}
