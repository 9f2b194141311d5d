"""The fleet across hosts: Redis on `r`, turns run by `toolfleet run` orchestrators on `o`
(and taken over by a `toolfleet serve` replica on `o2`), `toolfleet worker`s on `w1` and
`w2`. A turn's calls fan out over both worker hosts; then, mid-turn, a worker host is
SIGKILLed, a worker host is cut off and healed, or the orchestrators' host is cut off and
healed. Whatever happened: one final response per call, no call without one, no result
lost, each session answered once - and the time to recover, measured.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from tests.faults import probe
from tests.faults.test_orchestrator_faults import answered, call_ids, of_cli, stored_events
from tests.hosts.fleet import HostFleet
from tests.hosts.host_tools import CALLS_PER_TURN, fan_out, runs_key, where
from tests.hosts.netns import Host, Network
from tests.support import assert_one_response_per_call
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.celery_config import recovery_bound_s
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ToolfleetError
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import RESULT_FIELD, ToolResult

pytestmark = pytest.mark.integration

AGENT = "tests.hosts.host_tools:fan_out"
APP = fan_out.name
SESSIONS = ["s0", "s1"]  # two turns of four calls: eight calls on four slots, two hosts
START_TIMEOUT_S = 30.0
# A recovery on a loaded 2-core machine, beyond the fleet's own bound.
SLACK_S = 15.0
# Linux's longest wait between two retransmissions of a TCP segment (TCP_RTO_MAX).
TCP_RTO_MAX_S = 120.0

Record = Callable[[str, object], None]


def orchestrator_settings(settings: Settings) -> Settings:
    """The orchestrators out-wait a lost worker's recovery: its calls run again elsewhere."""
    return settings.model_copy(update={"result_grace_s": bound(settings) + SLACK_S})


def bound(settings: Settings) -> float:
    return recovery_bound_s(settings, [where])


def runs(client: redis.Redis, settings: Settings) -> list[dict[str, Any]]:
    """Every execution's start and end, as the tool recorded them from inside."""
    raw = client.lrange(runs_key(settings.key_prefix), 0, -1)
    return [json.loads(entry) for entry in raw]


def running_on(client: redis.Redis, settings: Settings) -> dict[str, int]:
    """Executions started and not ended, by host address."""
    entries = runs(client, settings)
    ended = {(e["call_id"], e["execution"]) for e in entries if "end" in e}
    counts: dict[str, int] = {}
    for e in entries:
        if "end" not in e and (e["call_id"], e["execution"]) not in ended:
            counts[e["address"]] = counts.get(e["address"], 0) + 1
    return counts


def start_turns_mid_call_on_both(fleet: HostFleet, orchestrators: Settings, o: Host) -> None:
    """Run the sessions' turns from `o`; return once every session's calls are out and
    calls run on both worker hosts."""
    w1, w2 = fleet.network.hosts["w1"], fleet.network.hosts["w2"]
    for session_id in SESSIONS:
        fleet.run(o, orchestrators, AGENT, session_id)
    client = fleet.client()

    def calls_out(session_id: str) -> bool:
        events = stored_events(client, fleet.settings, of_cli(APP, session_id))
        return len(call_ids(events)) == CALLS_PER_TURN

    def mid_turn() -> bool:
        if not all(calls_out(session_id) for session_id in SESSIONS):
            return False
        return {w1.address, w2.address} <= set(running_on(client, fleet.settings))

    try:
        wait_for(mid_turn, START_TIMEOUT_S, "every turn's calls out, running on both hosts")
    except ToolfleetError as e:
        raise AssertionError(f"{e}\n{fleet.logs()}") from None
    finally:
        client.close()


def all_answered(client: redis.Redis, settings: Settings) -> bool:
    return all(answered(client, settings, of_cli(APP, s)) for s in SESSIONS)


def check_sessions(
    client: redis.Redis, settings: Settings, turns: int = 1
) -> dict[str, dict[str, Any]]:
    """The invariant in every session: one final response per call, each a result of the
    tool (none lost, none an error), and one answer per turn. The responses by call id."""
    responses: dict[str, dict[str, Any]] = {}
    for session_id in SESSIONS:
        key = of_cli(APP, session_id)
        events = stored_events(client, settings, key)
        session = Session(session_id, APP, "user", events)
        assert_one_response_per_call(session)
        assert session.open_turn() is None, session_id
        answers = [
            part.text
            for event in events
            if event.author == APP and event.content is not None
            for part in event.content.parts or ()
            if part.text
        ]
        assert answers == [f"finished {list(range(CALLS_PER_TURN))}"] * turns, answers
        for event in events:
            for response in event.get_function_responses():
                responses[response.id or ""] = dict(response.response or {})
    assert len(responses) == CALLS_PER_TURN * len(SESSIONS) * turns
    assert all(set(r) == {"n", "address"} for r in responses.values()), responses
    return responses


def wait_exited(host: Host, timeout_s: float) -> list[int | None]:
    """Wait for every process this test started on the host; their exit codes."""
    deadline = time.monotonic() + timeout_s
    for process in host.processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(max(0.0, deadline - time.monotonic()))
    return [p.poll() for p in host.processes]


def await_answers(fleet: HostFleet, client: redis.Redis, timeout_s: float) -> None:
    """Wait until every session's turn is answered; past `timeout_s`, fail with the logs."""
    try:
        wait_for(lambda: all_answered(client, fleet.settings), timeout_s, "every turn's answer")
    except ToolfleetError as e:
        raise AssertionError(f"{e}\n{fleet.logs()}") from None


def report(record_property: Record, name: str, seconds: float) -> None:
    print(f"{name}: {seconds:.2f} s")
    record_property(name, f"{seconds:.2f}")


def test_a_worker_host_killed_mid_turn_is_recovered_on_the_other(
    network: Network, fleet: HostFleet, settings: Settings, record_property: Record
) -> None:
    o, w1, w2 = network.hosts["o"], network.hosts["w1"], network.hosts["w2"]
    fleet.start_workers([w1, w2], ["default"], concurrency=2)
    client = fleet.client()
    start_turns_mid_call_on_both(fleet, orchestrator_settings(settings), o)
    w1.kill_all()  # every process of the host: the worker, its pool, all at once
    killed_at = time.monotonic()
    await_answers(fleet, client, bound(settings) + 2 * SLACK_S)
    recovered_s = time.monotonic() - killed_at
    assert wait_exited(o, 30) == [0, 0], fleet.logs()

    responses = check_sessions(client, settings)
    entries = runs(client, settings)
    # The killed executions never ended; each of their calls ran again, on w2, and its
    # response is that rerun's.
    ended = {(e["call_id"], e["execution"]) for e in entries if "end" in e}
    killed = [e for e in entries if (e["call_id"], e["execution"]) not in ended]
    assert killed and {e["address"] for e in killed} == {w1.address}, entries
    for e in killed:
        assert responses[e["call_id"]]["address"] == w2.address, (e, responses)
    assert {e["address"] for e in entries} == {w1.address, w2.address}  # fanned out
    assert recovered_s <= bound(settings) + SLACK_S, recovered_s
    report(record_property, "worker host killed -> every turn answered", recovered_s)
    client.close()


def late_results(client: redis.Redis, settings: Settings, hostname: str) -> set[str]:
    """Call ids of the results a worker posted on the sessions' streams (none of them
    applied: an applied result is trimmed from its stream when stored)."""
    found = set()
    for session_id in SESSIONS:
        stream = Keys(settings.key_prefix).results(of_cli(APP, session_id))
        for _, fields in client.xrange(stream):
            result = ToolResult.model_validate_json(fields[RESULT_FIELD.encode()])
            if result.worker == hostname:
                found.add(result.call_id)
    return found


@pytest.mark.timeout(420)  # the cut, TCP's retransmissions after it, and a second turn
def test_a_worker_host_cut_off_mid_turn_is_answered_once_after_it_heals(
    network: Network, fleet: HostFleet, settings: Settings, record_property: Record
) -> None:
    o, w1, w2 = network.hosts["o"], network.hosts["w1"], network.hosts["w2"]
    (first, _) = fleet.start_workers([w1, w2], ["default"], concurrency=2)
    client = fleet.client()
    orchestrators = orchestrator_settings(settings)
    start_turns_mid_call_on_both(fleet, orchestrators, o)
    w1.cut()
    cut_at = time.monotonic()
    await_answers(fleet, client, bound(settings) + 2 * SLACK_S)
    recovered_s = time.monotonic() - cut_at
    assert wait_exited(o, 30) == [0, 0], fleet.logs()
    responses = check_sessions(client, settings)
    before = {s: stored_events(client, settings, of_cli(APP, s)) for s in SESSIONS}
    # Cut for longer than a session lease and the workers' result grace: the calls cut
    # off ran again on w2 (once their messages' visibility timeout passed).
    cut_s = time.monotonic() - cut_at
    assert cut_s > max(settings.lease_ttl_s, settings.result_grace_s), cut_s
    entries = runs(client, settings)
    rerun = {e["call_id"] for e in entries if e["address"] == w1.address} & {
        call_id for call_id, r in responses.items() if r["address"] == w2.address
    }
    assert rerun, (entries, responses)

    w1.heal()
    healed_at = time.monotonic()

    # What w1 was running when cut off ends there. Its results reach the sessions' streams
    # late where their post was on the wire when the cut came (TCP delivers it after the
    # heal: a retransmission waits twice as long after each loss, up to TCP_RTO_MAX_S);
    # a post still connecting when its call's time limit struck is given up (the call
    # was answered by its run on w2), and w1's log says so.
    def given_up() -> bool:
        logs = fleet.log_dir.glob(f"{w1.label}-worker*.log")
        return any("SoftTimeLimitExceeded" in log.read_text(errors="replace") for log in logs)

    try:
        wait_for(
            lambda: late_results(client, settings, first.hostname) >= rerun or given_up(),
            TCP_RTO_MAX_S + SLACK_S,
            "w1's late results, or its log saying it gave up posting them",
        )
    except ToolfleetError as e:
        raise AssertionError(f"{e} (cut for {cut_s:.1f} s)\n{fleet.logs()}") from None
    late_s = time.monotonic() - healed_at
    assert {s: stored_events(client, settings, of_cli(APP, s)) for s in SESSIONS} == before
    # The next turn of each session reads its stream again, late results included: they
    # answer nothing a second time.
    for session_id in SESSIONS:
        fleet.run(o, orchestrators, AGENT, session_id)
    assert wait_exited(o, 60) == [0] * 4, fleet.logs()
    check_sessions(client, settings, turns=2)
    report(record_property, "worker host cut off -> every turn answered", recovered_s)
    report(record_property, "worker host healed -> its late results in (or given up)", late_s)
    client.close()


def test_the_orchestrator_host_cut_off_mid_turn_is_taken_over_by_a_replica_on_another(
    network: Network, fleet: HostFleet, settings: Settings, record_property: Record
) -> None:
    o, o2, w1, w2 = (network.hosts[h] for h in ("o", "o2", "w1", "w2"))
    fleet.start_workers([w1, w2], ["default"], concurrency=2)
    client = fleet.client()
    orchestrators = orchestrator_settings(settings)
    fleet.serve(o2, orchestrators, AGENT, "b")  # up before o is cut off
    start_turns_mid_call_on_both(fleet, orchestrators, o)
    o.cut()  # the `run` orchestrators there hold the sessions' leases, mid-turn
    cut_at = time.monotonic()
    await_answers(fleet, client, 2 * settings.lease_ttl_s + 2 * SLACK_S)
    takeover_s = time.monotonic() - cut_at
    taken_over = {s: stored_events(client, settings, of_cli(APP, s)) for s in SESSIONS}
    o.heal()
    healed_at = time.monotonic()
    # Back on the network, o's orchestrators find their leases taken: they write nothing
    # more (every session write is fenced by its lease) and stop, saying so.
    assert wait_exited(o, 60) == [2, 2], fleet.logs()
    exited_s = time.monotonic() - healed_at
    for session_id in SESSIONS:
        log = (fleet.log_dir / f"o-run-{session_id}.log").read_text()
        # Refused at the lease's renewal, or at its next write.
        assert "the lease was lost" in log or "lost the session's lease" in log, log
    assert {s: stored_events(client, settings, of_cli(APP, s)) for s in SESSIONS} == taken_over
    check_sessions(client, settings)
    executions = {
        call_id: probe.executions(client, settings.key_prefix, call_id)
        for call_id in {e["call_id"] for e in runs(client, settings)}
    }
    assert set(executions.values()) == {1}, executions  # the replica sent no call again
    report(record_property, "orchestrator host cut off -> every turn answered", takeover_s)
    report(record_property, "orchestrator host healed -> its orchestrators stopped", exited_s)
    client.close()
