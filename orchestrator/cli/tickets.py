"""`toolfleet tickets ...`: list, show and complete pending long-running calls."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
import time
from typing import Any, Literal

import redis

from toolfleet.orchestrator.cli.launch import redis_url_or_embedded_file
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.completions import UNCHANGED, Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import InvalidCompletionError
from toolfleet.shared.json_depth import text_depth
from toolfleet.shared.keys import Keys
from toolfleet.shared.outages import resilient_client
from toolfleet.shared.redaction import redact_deep
from toolfleet.shared.redis_check import check_redis


def operator_completions() -> tuple[Completions, redis.Redis]:
    """The operator's Completions (and its client, to close) from the environment."""
    settings = Settings()
    url = redis_url_or_embedded_file(settings)
    check_redis(url)
    client = resilient_client(url)
    keys = Keys(settings.key_prefix)
    return Completions.of(client, keys, settings), client


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def cmd_list(args: argparse.Namespace) -> None:
    """`toolfleet tickets list`: one line per pending call of any session, oldest first, with
    its arguments (secret-named values masked) cut to 60 characters."""
    completions, client = operator_completions()
    names = Settings().secret_arg_names
    with client:
        calls = completions.pending()
    if not calls:
        print("no pending calls")
        return
    now = time.time()
    print(f"{'CALL ID':<24} {'TOOL':<28} {'AGE':>6}  {'SESSION':<14} {'USER':<10} ARGS")
    for c in calls:
        age = _age(now - c.created_at)
        tool = f"{c.tool} ({c.kind})" if c.kind != "result" else c.tool
        args_text = json.dumps(redact_deep(c.args, names))[:60]
        print(
            f"{c.call_id:<24} {tool:<28} {age:>6}  {c.session_id:<14} {c.user_id:<10} {args_text}"
        )
        if c.kind == "confirmation":  # what the person is asked, under its call
            payload = json.dumps(redact_deep(c.ticket.get("payload"), names))[:60]
            hint = c.ticket.get("hint", "")
            print(f"{'':<24} question {c.asked_again}  hint: {hint}  payload: {payload}")
        elif c.kind == "credential":
            print(f"{'':<24} question {c.asked_again}  key: {c.ticket.get('key', '')}")


def cmd_show(args: argparse.Namespace) -> None:
    """`toolfleet tickets show`: the pending call `call_id` as indented JSON, with the
    completions posted for it and not applied yet; CompletionError if it is not pending
    (its message says when its final result was applied)."""
    completions, client = operator_completions()
    with client:
        call = completions.get(args.call_id)
        record = redact_deep(call.model_dump(mode="json"), Settings().secret_arg_names)
        shown = {**record, "waiting_completions": completions.waiting(call)}
    print(json.dumps(shown, indent=2))


def _post(call_id: str, response: dict[str, Any], final: bool) -> None:
    completions, client = operator_completions()
    with client:
        completions.post_result(call_id, response, final=final, source="cli")
    kind = "final result" if final else "progress"
    print(f"posted the {kind} for {call_id}: {json.dumps(response)}")


def cmd_complete(args: argparse.Namespace) -> None:
    """`toolfleet tickets complete`: post `--json` as the call's final result, or as progress
    with `--progress`; InvalidCompletionError if it is not a JSON object."""
    _refuse_if_too_deep(args.call_id, args.json, "--json", final=not args.progress)
    response = _json_option(args.json, "--json")
    _post(args.call_id, response, final=not args.progress)


def cmd_decide(args: argparse.Namespace) -> None:
    """`toolfleet tickets approve|reject`: post the final result {"status": "approved"} or
    {"status": "rejected"}, with `--note` as "note". For a call waiting for a
    confirmation, confirm it (it is sent) or reject it (it gets an error, never runs)."""
    completions, client = operator_completions()
    with client:
        pending = completions.find(args.call_id)
    # A call not pending is refused by the post below, and dead-lettered with why.
    if pending is not None and pending.kind == "confirmation":
        _confirm(args.call_id, args.decision == "approved", UNCHANGED, args.asked)
        return
    response: dict[str, Any] = {"status": args.decision}
    if args.note:
        response["note"] = args.note
    _post(args.call_id, response, final=True)


def cmd_confirm(args: argparse.Namespace) -> None:
    """`toolfleet tickets confirm`: confirm a call waiting for a person; it is sent, and
    its tool finds `--payload` (JSON; default: the payload it asked with) in
    `tool_context.tool_confirmation`."""
    payload = UNCHANGED
    if args.payload is not None:
        _refuse_if_too_deep(args.call_id, args.payload, "--payload", kind="confirmation")
        payload = _json_option(args.payload, "--payload")
    _confirm(args.call_id, True, payload, args.asked)


def _json_option(text: str, option: str) -> Any:
    """The JSON value of `option`; InvalidCompletionError if it is not JSON Python reads
    (ValueError, not only JSONDecodeError, for an integer of over 4300 digits)."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidCompletionError(f"{option} is not valid JSON: {exc}") from exc


def _refuse_if_too_deep(
    call_id: str,
    text: str,
    option: str,
    *,
    final: bool = True,
    kind: Literal["result", "confirmation"] = "result",
) -> None:
    """Measured before json.loads, which recurses: nested over the limit, the post is
    refused and dead-lettered (InvalidCompletionError naming the limit)."""
    limit = Settings().max_json_depth
    if text_depth(text, stop_above=limit) <= limit:
        return
    completions, client = operator_completions()
    with client:
        raise completions.refuse_too_deep(call_id, option, final=final, source="cli", kind=kind)


def _confirm(call_id: str, confirmed: bool, payload: Any, asked: int | None) -> None:
    completions, client = operator_completions()
    with client:
        completions.confirm(call_id, confirmed, payload=payload, source="cli", asked=asked)
    print(f"{'confirmed' if confirmed else 'rejected'} {call_id}")


def cmd_cancel_ticket(args: argparse.Namespace) -> None:
    """`toolfleet tickets cancel`: close one pending call with a Cancelled error response
    (applied once); the agent answers it, as it would a result."""
    completions, client = operator_completions()
    with client:
        completions.cancel(args.call_id, source="cli")
    print(f"cancelled ticket {args.call_id}")


def cmd_credential(args: argparse.Namespace) -> None:
    """`toolfleet tickets credential`: read a credential (hidden prompt, or one stdin line with
    `--stdin`), store it encrypted for the user and run the waiting call again.

    It is never taken from the command line, so it stays out of shell history."""
    settings = Settings()
    completions, client = operator_completions()
    # Read from stdin, not the command line, so the secret stays out of shell history.
    credential = sys.stdin.readline().strip() if args.stdin else getpass.getpass("credential: ")
    if not credential:
        raise InvalidCompletionError("an empty credential was given; nothing was changed")
    with client:
        store = CredentialStore(client, Keys(settings.key_prefix), settings.credential_key)
        completions.supply_credential(
            args.call_id, credential, store, source="cli", asked=args.asked
        )
    print(f"stored the credential for {args.call_id}; the call runs again")


def add_ticket_commands(sub: Any) -> None:
    """Add `tickets` with its actions (list, show, complete, credential, cancel, confirm,
    approve, reject) to `sub`, the subparsers of the `toolfleet` parser."""
    tickets = sub.add_parser("tickets", help="pending long-running calls: list, show, complete")
    actions = tickets.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="pending calls across sessions, oldest first").set_defaults(
        func=cmd_list
    )
    show = actions.add_parser("show", help="one pending call")
    show.add_argument("call_id")
    show.set_defaults(func=cmd_show)
    complete = actions.add_parser("complete", help="post a result for a pending call")
    complete.add_argument("call_id")
    complete.add_argument("--json", required=True, help='the result, e.g. \'{"status": "done"}\'')
    complete.add_argument("--progress", action="store_true", help="an intermediate result")
    complete.set_defaults(func=cmd_complete)
    credential = actions.add_parser("credential", help="supply the credential a tool asked for")
    credential.add_argument("call_id")
    credential.add_argument("--stdin", action="store_true", help="read it from standard input")
    _add_asked(credential)
    credential.set_defaults(func=cmd_credential)
    cancel = actions.add_parser("cancel", help="close one pending call as cancelled")
    cancel.add_argument("call_id")
    cancel.set_defaults(func=cmd_cancel_ticket)
    confirm = actions.add_parser("confirm", help="confirm a call waiting for a person")
    confirm.add_argument("call_id")
    confirm.add_argument("--payload", help="the payload as edited (JSON) for the tool")
    _add_asked(confirm)
    confirm.set_defaults(func=cmd_confirm)
    for decision, verb in (("approved", "approve"), ("rejected", "reject")):
        helped = f'final result {{"status": "{decision}"}}, or {verb} a confirmation'
        parser = actions.add_parser(verb, help=helped)
        parser.add_argument("call_id")
        parser.add_argument("--note", help="added to the result as 'note'")
        _add_asked(parser)
        parser.set_defaults(func=cmd_decide, decision=decision)


def _add_asked(parser: argparse.ArgumentParser) -> None:
    """`--asked N`: the question the answer is for, as `tickets list` shows it; refused if
    the call asked again since (without it: the question asked when it is posted)."""
    parser.add_argument(
        "--asked",
        type=int,
        metavar="N",
        help="the question answered (`tickets list` shows it); refused if asked again since",
    )
