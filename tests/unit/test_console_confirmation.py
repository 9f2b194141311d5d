"""`toolfleet run` shows a call waiting for a confirmation, and how to answer it."""

from __future__ import annotations

import io

from toolfleet.orchestrator.cli.console import ConsolePrinter
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.messages import PendingCall


def test_a_confirmation_request_is_shown_with_its_hint_masked_payload_and_commands() -> None:
    out = io.StringIO()
    printer = ConsolePrinter(out, ["api_key"])
    request = {
        "call_id": "c1",
        "tool": "book_trip",
        "args": {},
        "hint": "Book Oslo?",
        "payload": {"nights": 2, "api_key": "s3cret"},
    }
    printer.show(Event(invocation_id="i", author="trips", confirmation_requests=[request]))
    waiting = PendingCall(
        call_id="c1",
        tool="book_trip",
        session_id="s",
        app_name="trips",
        user_id="u",
        agent="trips",
        invocation_id="i",
        ticket={"hint": "Book Oslo?"},
        created_at=0,
        kind="confirmation",
    )
    printer.pending([waiting])

    shown = out.getvalue()
    assert "[trips] book_trip waits for a confirmation: Book Oslo?" in shown
    assert "s3cret" not in shown and '"nights": 2' in shown
    assert "toolfleet tickets confirm c1" in shown and "toolfleet tickets reject c1" in shown
