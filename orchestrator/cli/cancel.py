"""`toolfleet cancel SESSION`: stop what a session has in flight, wherever it runs."""

from __future__ import annotations

import argparse
from typing import Any

from toolfleet.orchestrator.cli.tickets import operator_completions
from toolfleet.shared.cancellation import cancel_session
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys


def cmd_cancel(args: argparse.Namespace) -> None:
    """Cancel the session: the orchestrator running it stops its model call and its calls
    in flight (each answered once with a Cancelled error); its pending tickets are closed
    unless `--keep-tickets`."""
    completions, client = operator_completions()
    with client:
        closing = cancel_session(
            client,
            Keys(Settings().key_prefix),
            completions,
            args.session_id,
            keep_tickets=args.keep_tickets,
            source="cli",
        )
    print(f"cancelled session {args.session_id}")
    for call_id in closing:
        print(f"  closing ticket {call_id}")


def add_cancel_command(sub: Any) -> None:
    """Add `cancel` to `sub`, the subparsers of the `toolfleet` parser."""
    cancel = sub.add_parser("cancel", help="stop what a session has in flight")
    cancel.add_argument("session_id")
    cancel.add_argument(
        "--keep-tickets", action="store_true", help="leave the session's pending tickets open"
    )
    cancel.set_defaults(func=cmd_cancel)
