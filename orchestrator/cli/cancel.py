"""`toolfleet cancel SESSION --app APP --user USER`: stop what a session has in flight,
wherever it runs. A session id names a session only within its app and user."""

from __future__ import annotations

import argparse
from typing import Any

from toolfleet.orchestrator.cli.tickets import operator_completions
from toolfleet.shared.cancellation import cancel_session
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key


def cmd_cancel(args: argparse.Namespace) -> None:
    """Cancel the user's session of the app: the orchestrator running it stops its model call
    and its calls in flight (each answered once with a Cancelled error); its pending
    tickets are closed unless `--keep-tickets`."""
    completions, client = operator_completions()
    with client:
        closing = cancel_session(
            client,
            Keys(Settings().key_prefix),
            completions,
            session_key(args.app, args.user, args.session_id),
            keep_tickets=args.keep_tickets,
            source="cli",
        )
    print(f"cancelled session {args.session_id} of user {args.user} in app {args.app}")
    for call_id in closing:
        print(f"  closing ticket {call_id}")


def add_cancel_command(sub: Any) -> None:
    """Add `cancel` to `sub`, the subparsers of the `toolfleet` parser."""
    cancel = sub.add_parser("cancel", help="stop what a session has in flight")
    cancel.add_argument("session_id")
    cancel.add_argument("--app", required=True, help="the session's app (its agent's name)")
    cancel.add_argument("--user", default="user", help="the session's user (default: user)")
    cancel.add_argument(
        "--keep-tickets", action="store_true", help="leave the session's pending tickets open"
    )
    cancel.set_defaults(func=cmd_cancel)
