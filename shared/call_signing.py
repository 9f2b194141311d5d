"""Call envelopes signed with the fleet key (HMAC-SHA256), so that a client allowed to
write a broker queue cannot send a call a worker runs.

A `tool.<name>` task carries its call as keyword arguments: `call`, the ToolCall's JSON
as a string (secret-named values sealed), and `sig`, the signature of that string's
exact bytes. A worker checks the signature before it parses anything, then parses the
string as it is: no canonical encoding to agree on, and no dict to build and validate
apart. The signing key is derived from TOOLFLEET_FLEET_KEY (HKDF-SHA256, an `info` of
its own): results are signed with the fleet key itself, and a signature made for one
kind of message is never valid for another.

Without a fleet key calls are sent unsigned and accepted so, as results are; an envelope
as a mapping (what toolfleet sent before calls were signed) is then accepted too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pydantic_core import from_json

from toolfleet.shared.errors import ToolfleetError
from toolfleet.shared.keys import task_name
from toolfleet.shared.message_signing import MessageSigner
from toolfleet.shared.messages import ToolCall
from toolfleet.shared.pending import CLOSED_TTL_S

# The task's keyword arguments: the envelope (JSON text) and its signature (hex).
CALL_FIELD = "call"
SIGNATURE_FIELD = "sig"
# HKDF's `info`: this key signs call envelopes and nothing else.
_INFO = b"toolfleet call v1"
# A call sent longer ago than this is refused: a worker remembers that a call was answered
# (its closed marker) this long, and no longer could tell a replay, or a message held in
# its queue as long, from a call to run.
MAX_CALL_AGE_S = CLOSED_TTL_S

UNSIGNED = (
    "it carries no signature: its sender has no TOOLFLEET_FLEET_KEY, or runs a toolfleet "
    "that signs no calls; give every orchestrator this worker's TOOLFLEET_FLEET_KEY, and "
    "upgrade workers and orchestrators together"
)
BAD_SIGNATURE = (
    "its signature is wrong: it was signed with another TOOLFLEET_FLEET_KEY (give the "
    "orchestrators and workers of one fleet the same key), or changed after it was signed"
)


class RefusedCall(ToolfleetError):
    """A call message a worker does not run: its signature is missing or wrong, it names
    another tool than the task it came as, or it is older than replays are remembered."""


class CallSigner(MessageSigner):
    """Signs and checks call envelopes with the key derived from one fleet key."""

    INFO = _INFO


def call_kwargs(envelope: bytes, signer: CallSigner | None) -> dict[str, str]:
    """The keyword arguments of the `tool.<name>` task that carries `envelope` (a
    ToolCall's JSON): the envelope as text, and its signature when there is a signer."""
    if signer is None:
        return {CALL_FIELD: envelope.decode()}
    return {CALL_FIELD: envelope.decode(), SIGNATURE_FIELD: signer.sign(envelope)}


def read_call(task: str, call: Any, signature: Any, signer: CallSigner | None) -> ToolCall:
    """The envelope of a message of `task` (its kwargs `call` and `sig`), checked: sent
    within MAX_CALL_AGE_S, and with a signer only a string with its valid signature. Raises
    RefusedCall saying why it is not run, or pydantic's ValidationError when it is not
    an envelope at all."""
    if signer is not None:
        if not isinstance(call, str) or signature is None:
            raise RefusedCall(UNSIGNED)
        # Text that is not UTF-8 (a lone surrogate) was signed by nobody: its bytes fail.
        if not signer.valid(call.encode("utf-8", "surrogatepass"), signature):
            raise RefusedCall(BAD_SIGNATURE)
    if isinstance(call, str):
        envelope = ToolCall.model_validate_json(call)
    else:
        envelope = ToolCall.model_validate(call)
    if task != task_name(envelope.tool):
        raise RefusedCall(f"it came as task {task} but its envelope names tool {envelope.tool!r}")
    # Signed or not: past that, its answered call's closed marker may be gone.
    if time.time() - envelope.dispatched_at > MAX_CALL_AGE_S:
        raise RefusedCall(
            f"it was sent more than {MAX_CALL_AGE_S} s ago, longer than workers remember "
            "which calls were answered: a replayed message, or one held longer in its queue"
        )
    return envelope


def call_fields(call: Any) -> dict[str, Any]:
    """The fields of a task's `call` kwarg, read without checks (what a gauge or a stop
    request looks up): a mapping's, or the JSON object's of a string; {} for any other."""
    if isinstance(call, Mapping):
        return dict(call)
    if isinstance(call, str | bytes):
        try:
            fields = from_json(call)
        except ValueError:
            return {}
        return fields if isinstance(fields, dict) else {}
    return {}
