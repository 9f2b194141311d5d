"""Job messages signed with the fleet key (HMAC-SHA256), so that a client allowed to
write a broker queue cannot start a job a worker runs.

A tool schedules `job.<name>` with keyword arguments. With a fleet key they travel as
the task's two positional arguments instead: the keyword arguments' JSON as text, and
the signature of the job's task name and that text's exact bytes, under a key derived
from the fleet key for jobs alone. A job's signature is no call's, and a signed job
delivered as another job fails its check. A job takes keyword arguments only, so the
two forms cannot be confused. The text is kombu's JSON, as Celery encodes keyword
arguments: a job gets the same values either way.

Without a fleet key jobs are sent unsigned, as plain keyword arguments, and accepted
so (as are those of senders from before jobs were signed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kombu.utils.json import dumps, loads

from toolfleet.shared.errors import ToolfleetError
from toolfleet.shared.message_signing import MessageSigner

# HKDF's `info`: this key signs job messages and nothing else.
_INFO = b"toolfleet job v1"
# Between the task name and the arguments' text: a task name never holds one.
_SEPARATOR = b"\n"

UNSIGNED = (
    "it carries no signature: its sender has no TOOLFLEET_FLEET_KEY, or runs a toolfleet "
    "that signs no jobs; give every worker of the fleet the same TOOLFLEET_FLEET_KEY, and "
    "upgrade the workers together"
)
BAD_SIGNATURE = (
    "its signature is wrong: it was signed with another TOOLFLEET_FLEET_KEY (give the "
    "workers of one fleet the same key), changed after it was signed, or signed as "
    "another job"
)
UNCOVERED = "it carries keyword arguments besides the signed ones"
MALFORMED = "its arguments are not a job's keyword arguments (a JSON object)"


class RefusedJob(ToolfleetError):
    """A job message a worker does not run: its signature is missing or wrong, or its
    arguments are not the signed ones."""


class JobSigner(MessageSigner):
    """Signs and checks job messages with the key derived from one fleet key."""

    INFO = _INFO


def _signed_bytes(task: str, text: str) -> bytes:
    # Text that is not UTF-8 (a lone surrogate) was signed by nobody: its bytes fail.
    return task.encode() + _SEPARATOR + text.encode("utf-8", "surrogatepass")


def job_message(
    task: str, kwargs: dict[str, Any], signer: JobSigner | None
) -> tuple[list[str], dict[str, Any]]:
    """The positional and keyword arguments of the `task` message that runs a job with
    `kwargs`: signed with a signer, as they are without."""
    if signer is None:
        return [], kwargs
    text = dumps(kwargs)
    return [text, signer.sign(_signed_bytes(task, text))], {}


def read_job(
    task: str, args: Sequence[Any], kwargs: Mapping[str, Any], signer: JobSigner | None
) -> dict[str, Any]:
    """The keyword arguments to run the job of a `task` message with (its positional and
    keyword arguments), checked: with a signer, only signed ones whose signature is
    valid for `task`. Raises RefusedJob saying why it does not run."""
    signed = len(args) == 2 and isinstance(args[0], str)
    if signer is not None:
        if not signed or args[1] is None:
            raise RefusedJob(UNSIGNED)
        if not signer.valid(_signed_bytes(task, args[0]), args[1]):
            raise RefusedJob(BAD_SIGNATURE)
    if not args:
        return dict(kwargs)
    if kwargs:
        raise RefusedJob(UNCOVERED)
    if not signed:
        raise RefusedJob(MALFORMED)
    try:
        fields = loads(args[0])
    except ValueError as exc:
        raise RefusedJob(MALFORMED) from exc
    if not isinstance(fields, dict):
        raise RefusedJob(MALFORMED)
    return fields
