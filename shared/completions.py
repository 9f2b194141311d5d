"""Post results for pending long-running calls (CLI, background jobs, Python callers).

The poster checks the call is still pending and refuses with a clear error if not;
the orchestrator's consumer checks again and applies each call's final result once.
Every refused post - a result, a confirmation, a credential, a cancellation - for a call
that is not pending (unknown, or answered already: the error says with what) or that
waits for another kind of answer is kept in the dead-letter stream with its reason. A
stream holding TOOLFLEET_COMPLETIONS_MAXLEN unapplied results refuses posts
(CompletionsFullError, nothing kept: the poster retries); applied entries are trimmed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import Any, Literal

import redis
from pydantic_core import from_json, to_json

from toolfleet.shared.auth import MAX_CREDENTIAL_CHARS, AuthConfig, CredentialStore
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.config import DEFAULT_MAX_PAYLOAD_BYTES, Settings
from toolfleet.shared.errors import (
    AlreadyCompletedError,
    AwaitingConfirmationError,
    AwaitingCredentialError,
    CallNotPendingError,
    CompletionError,
    CompletionsFullError,
    InvalidCompletionError,
    PayloadTooLargeError,
)
from toolfleet.shared.json_depth import DEFAULT_MAX_JSON_DEPTH, dropped, too_deep, value_depth
from toolfleet.shared.keys import Keys, SessionKey, applied_record
from toolfleet.shared.messages import COMPLETION_FIELD, Completion, PendingCall, error_response
from toolfleet.shared.outages import APPLIED_TTL_S, resilient_client
from toolfleet.shared.pending import PendingCalls
from toolfleet.shared.redaction import DEFAULT_SECRET_NAMES, redact_deep, secret_name_set
from toolfleet.shared.replication import NO_WAIT, Replication
from toolfleet.shared.reporting import TicketWrite
from toolfleet.shared.scripts import LuaScript
from toolfleet.shared.unicode_text import has_lone_surrogates, without_lone_surrogates

DEAD_LETTERS_MAXLEN = 10_000
# The most of a refused post's response a dead letter keeps, where any caller may post
# (the HTTP API's client): refused posts must not fill Redis.
KEPT_REFUSED_BYTES = 4096
NOT_KEPT = "$not_kept"  # the key of a dead letter's response kept only as its size
# A session's order list outlives any completion waiting in it, then goes.
ORDER_TTL_S = 7 * 24 * 3600
# The orchestrators' consumer group on every completions stream.
COMPLETIONS_GROUP = "orchestrators"

# `Completions.confirm` without a payload: the tool gets the payload that was asked.
UNCHANGED: Any = object()

# Checks the record of the call a post answers, as read for the post; raises to refuse
# it (nothing posted or kept): who may answer that call.
PendingCheck = Callable[[PendingCall], None]

# Drop the entries every consumer is done with: those older than both the first entry
# the group has not been delivered (after last-delivered-id) and the oldest delivered
# but unacknowledged one. A trimmed stream never drops an entry nobody has read, nor one
# read and not applied. Without the group (no orchestrator ever ran) nothing is dropped.
# KEYS[1]: the stream. ARGV[1]: the group.
_TRIM_LUA = """
local function older(a, b)
  local ams, aseq = string.match(a, '(%d+)-(%d+)')
  local bms, bseq = string.match(b, '(%d+)-(%d+)')
  if tonumber(ams) ~= tonumber(bms) then return tonumber(ams) < tonumber(bms) end
  return tonumber(aseq) < tonumber(bseq)
end
local function trim(stream, group)
  if redis.call('exists', stream) == 0 then return 0 end
  local minid = nil
  for _, info in ipairs(redis.call('xinfo', 'groups', stream)) do
    local fields = {}
    for i = 1, #info, 2 do fields[info[i]] = info[i + 1] end
    if fields['name'] == group then minid = fields['last-delivered-id'] end
  end
  if minid == nil then return 0 end
  local pending = redis.call('xpending', stream, group)
  if pending[1] > 0 and older(pending[2], minid) then minid = pending[2] end
  return redis.call('xtrim', stream, 'MINID', minid)
end
"""

# KEYS: the app's completions stream, the session's order list, the post's own record.
# ARGV: field, completion JSON, order TTL, group, cap, the record's TTL. Applied entries
# are trimmed first; then a stream holding `cap` entries (all unapplied) refuses the
# post: nothing is ever dropped unread. The same post arriving again (its reply was
# lost, the client resent it) answers the entry it added, and adds none.
_POST_LUA = (
    _TRIM_LUA
    + """
local posted = redis.call('get', KEYS[3])
if posted then return {'posted', posted} end
trim(KEYS[1], ARGV[4])
if redis.call('xlen', KEYS[1]) >= tonumber(ARGV[5]) then return {'full'} end
local id = redis.call('xadd', KEYS[1], '*', ARGV[1], ARGV[2])
redis.call('rpush', KEYS[2], id)
redis.call('expire', KEYS[2], ARGV[3])
redis.call('set', KEYS[3], id, 'EX', ARGV[6])
return {'posted', id}
"""
)
_POST = LuaScript(_POST_LUA)
# KEYS[1]: a completions stream. ARGV[1]: the group. Returns how many entries went.
TRIM_COMPLETIONS_LUA = _TRIM_LUA + "return trim(KEYS[1], ARGV[1])"
TRIM_COMPLETIONS = LuaScript(TRIM_COMPLETIONS_LUA)


class Completions:
    """Synchronous client for tickets: list, show, post.

    Posted results are kept with secret-named values masked (TOOLFLEET_SECRET_ARG_NAMES):
    they reach the model from the stored session, where they are masked anyway.

    Args:
        client: The Redis the orchestrators use.
        keys: The key names under the deployment's prefix.
        secret_names: Argument names whose values are masked at any depth in what is posted.
        maxlen: Most unapplied entries a completions stream holds; a post beyond it is
            refused (TOOLFLEET_COMPLETIONS_MAXLEN).
        max_json_depth: Deepest nesting a posted value may have; deeper is refused.
        max_payload_bytes: Largest JSON a posted result or confirmation payload may take
            (TOOLFLEET_MAX_PAYLOAD_BYTES); larger is refused.
        kept_refused_bytes: The most JSON of a refused post's response its dead letter
            keeps (a larger one is kept as its size); None: all of it.
        replication: How many replicas must have a post before it is acknowledged;
            default: none waited for.
    """

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        secret_names: Iterable[str] = DEFAULT_SECRET_NAMES,
        *,
        maxlen: int = 10_000,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        kept_refused_bytes: int | None = None,
        replication: Replication = NO_WAIT,
    ) -> None:
        self._redis = client
        self._replication = replication  # a post is acknowledged once replicas have it
        self._keys = keys
        self._maxlen = maxlen  # TOOLFLEET_COMPLETIONS_MAXLEN (its default here too)
        self.max_json_depth = max_json_depth
        self.max_payload_bytes = max_payload_bytes
        self._kept_refused_bytes = kept_refused_bytes
        self._secrets = secret_name_set(secret_names)
        self._pending = PendingCalls(keys, self._secrets)

    @classmethod
    def of(
        cls,
        client: redis.Redis,
        keys: Keys,
        settings: Settings,
        *,
        kept_refused_bytes: int | None = None,
    ) -> Completions:
        """The client with the settings' secret names, completions cap, nesting and size
        limits (`kept_refused_bytes`: see the class)."""
        return cls(
            client,
            keys,
            settings.secret_arg_names,
            maxlen=settings.completions_maxlen,
            max_json_depth=settings.max_json_depth,
            max_payload_bytes=settings.max_payload_bytes,
            kept_refused_bytes=kept_refused_bytes,
            replication=Replication.of(settings),
        )

    def pending(self) -> list[PendingCall]:
        """Every pending call (ticket or credential request), oldest first."""
        return self._pending.all(self._redis)

    def pending_of(self, session: SessionKey) -> list[PendingCall]:
        """The pending calls of `session`, oldest first (its own records only)."""
        return self._pending.session(self._redis, session)

    def get(self, call_id: str) -> PendingCall:
        """The pending call `call_id`; raise CompletionError saying why if it is not."""
        call_id = _named(call_id)
        pending = self._pending.get(self._redis, call_id)
        if pending is None:
            raise self._not_pending(call_id)
        return pending

    def find(self, call_id: str) -> PendingCall | None:
        """The pending call `call_id`, or None if it is not pending."""
        return self._pending.get(self._redis, _named(call_id))

    def pending_for(self, completion: Completion, check: PendingCheck | None = None) -> PendingCall:
        """The pending call `completion` answers. Refused - the call is not pending, or it
        waits for another kind of answer - the completion goes to the dead-letter stream
        with the reason, and the CompletionError saying it is raised. `check` is given
        the call's record as read here, the one the post answers: what it raises refuses
        the post (nothing kept)."""
        pending = self._pending.get(self._redis, completion.call_id)
        if pending is None:
            error: CompletionError = self._not_pending(completion.call_id)
        elif completion.kind in ("cancel", pending.kind):
            if check is not None:
                check(pending)
            return pending
        else:
            error = _wrong_kind(pending, completion.kind)
        self._dead_letter(completion, str(error))
        raise error

    def dead_letter_unless_pending(self, completion: Completion) -> None:
        """Keep `completion` in the dead-letter stream, with why, if its call is not pending
        (a route refused it before asking: the caller is told less than the operator)."""
        if self._pending.get(self._redis, completion.call_id) is None:
            self._dead_letter(completion, str(self._not_pending(completion.call_id)))

    def waiting(self, call: PendingCall) -> list[str]:
        """Entry ids of completions posted for `call` and not applied yet, oldest first
        (they wait in its session's order: an earlier completion, or a busy session)."""
        order = self._redis.lrange(self._keys.completion_order(call.session_key), 0, -1)
        stream = self._keys.completions(call.app_name)
        waiting = []
        for raw_id in order:
            entry_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
            entries: Any = self._redis.xrange(stream, entry_id, entry_id)
            for _, fields in entries:
                posted = Completion.model_validate_json(fields[COMPLETION_FIELD.encode()])
                if posted.call_id == call.call_id:
                    waiting.append(entry_id)
        return waiting

    def post_result(
        self,
        call_id: str,
        response: dict[str, Any],
        *,
        final: bool = True,
        source: str = "api",
        check: PendingCheck | None = None,
    ) -> str:
        """Queue a result for a pending call; return the stream entry id. `check`: see
        `pending_for`."""
        if not isinstance(response, dict):
            raise InvalidCompletionError(
                'a result must be a JSON object, e.g. {"status": "approved"}'
            )
        if value_depth(response, stop_above=self.max_json_depth) > self.max_json_depth:
            raise self.refuse_too_deep(call_id, "the result", final=final, source=source)
        response = without_lone_surrogates(response)  # as a tool's result is taken
        self._check_size(call_id, "the result", response, final=final, source=source)
        completion = Completion(
            call_id=call_id,
            response=redact_deep(response, self._secrets),
            final=final,
            source=source,
            posted_at=time.time(),
        )
        pending = self.pending_for(completion, check)
        completion.session_key = pending.session_key
        return self._post(pending, completion)

    def confirm(
        self,
        call_id: str,
        confirmed: bool,
        *,
        payload: Any = UNCHANGED,
        source: str = "api",
        check: PendingCheck | None = None,
        asked: int | None = None,
    ) -> str:
        """Answer a call waiting for a person's confirmation: confirmed, it is sent (its
        tool finds `payload`, if given, in `tool_context.tool_confirmation`); rejected, it
        gets an error response and never runs. Return the stream entry id. `check`: see
        `pending_for`. `asked`: the question the person answers (the call's
        `asked_again` as shown to them); a call that asked again since refuses the
        answer (AwaitingConfirmationError, dead-lettered). None: the question it asks
        when this is posted."""
        response: dict[str, Any] = {"confirmed": bool(confirmed)}
        if value_depth(payload, stop_above=self.max_json_depth) > self.max_json_depth:
            raise self.refuse_too_deep(call_id, "the payload", source=source, kind="confirmation")
        if payload is not UNCHANGED:
            payload = without_lone_surrogates(payload)
            self._check_size(call_id, "the payload", payload, source=source, kind="confirmation")
            response["payload"] = redact_deep(payload, self._secrets)
        completion = Completion(
            call_id=call_id,
            response=response,
            kind="confirmation",
            source=source,
            posted_at=time.time(),
        )
        pending = self.pending_for(completion, check)
        completion.session_key = pending.session_key
        if asked is not None and asked != pending.asked_again:
            error = AwaitingConfirmationError(
                f"call {call_id!r} asked again since the question answered was shown "
                f"(question {asked}, now {pending.asked_again}): answer the question it "
                "asks now; nothing was posted"
            )
            self._dead_letter(completion, str(error))
            raise error
        completion.asked_again = pending.asked_again  # the question it answers
        return self._post(pending, completion)

    def cancel(self, call_id: str, *, resume: bool = True, source: str = "api") -> str:
        """Close a pending call, whatever it waits for, with a Cancelled error response
        (applied once, as a result is). With `resume`, the agent answers it; a session's
        cancellation closes its tickets without resuming. Return the stream entry id."""
        completion = Completion(
            call_id=call_id,
            response={},
            kind="cancel",
            resume=resume,
            source=source,
            posted_at=time.time(),
        )
        pending = self.pending_for(completion)
        completion.session_key = pending.session_key
        completion.response = cancelled_ticket(pending.tool)
        return self._post(pending, completion)

    def refuse_too_deep(
        self,
        call_id: str,
        what: str,
        *,
        final: bool = True,
        source: str = "api",
        kind: Literal["result", "confirmation"] = "result",
    ) -> InvalidCompletionError:
        """Dead-letter a post whose `what` nests over the limit, and return the error to
        raise. The value is not kept (its secrets could not be masked without walking it
        to the end): the dead letter holds the call, the poster and the reason."""
        reason = too_deep(what, self.max_json_depth)
        self._refuse_unkept(call_id, reason, final=final, source=source, kind=kind)
        return InvalidCompletionError(f"{reason}; nothing was posted")

    def _check_size(
        self,
        call_id: str,
        what: str,
        value: Any,
        *,
        final: bool = True,
        source: str,
        kind: Literal["result", "confirmation"] = "result",
    ) -> None:
        """Refuse (dead-lettered without it) a posted `value` whose JSON is over
        `max_payload_bytes` (PayloadTooLargeError), or that JSON cannot write or a JSON
        reader cannot read back, as the orchestrator reads it (InvalidCompletionError)."""
        try:
            text = to_json(value, fallback=str)
        except ValueError as exc:  # bytes that are not UTF-8 text, among others
            reason = (
                f"{what} holds a value that JSON cannot write ({exc}); send bytes as UTF-8 "
                "text or base64"
            )
            self._refuse_unkept(call_id, reason, final=final, source=source, kind=kind)
            raise InvalidCompletionError(f"{reason}; nothing was posted") from None
        size = len(text)
        if size <= self.max_payload_bytes:
            self._check_readable(call_id, what, text, final=final, source=source, kind=kind)
            return
        reason = (
            f"{what} is {size} bytes of JSON, over the {self.max_payload_bytes}-byte limit "
            "(TOOLFLEET_MAX_PAYLOAD_BYTES)"
        )
        self._refuse_unkept(call_id, reason, final=final, source=source, kind=kind)
        raise PayloadTooLargeError(f"{reason}; nothing was posted")

    def _check_readable(
        self,
        call_id: str,
        what: str,
        text: bytes,
        *,
        final: bool,
        source: str,
        kind: Literal["result", "confirmation"],
    ) -> None:
        """Refuse (dead-lettered without it) a value whose JSON `text` does not parse: an
        integer of more digits than a JSON reader takes. Accepted, the orchestrator could
        not read the entry, and the call would never get what its poster was told was
        queued."""
        try:
            from_json(text)
        except ValueError as exc:
            reason = (
                f"{what} holds a value the orchestrator cannot read ({exc}; an integer of "
                "over 4300 digits? send it as a string)"
            )
            self._refuse_unkept(call_id, reason, final=final, source=source, kind=kind)
            raise InvalidCompletionError(f"{reason}; nothing was posted") from None

    def _refuse_unkept(
        self,
        call_id: str,
        reason: str,
        *,
        final: bool,
        source: str,
        kind: Literal["result", "confirmation", "credential"],
    ) -> None:
        """Dead-letter a post refused for its value, without the value: the call, the
        poster and the reason."""
        refused = Completion(
            call_id=call_id,
            response=dropped(reason),
            final=final,
            kind=kind,
            source=source,
            posted_at=time.time(),
        )
        self._dead_letter(refused, reason)

    def _dead_letter(self, completion: Completion, reason: str) -> None:
        """Keep a refused `completion`, its response cut to `kept_refused_bytes`."""
        limit = self._kept_refused_bytes
        if limit is not None:
            size = len(to_json(completion.response, fallback=str))
            if size > limit:
                kept = {NOT_KEPT: f"{size} bytes of JSON"}
                completion = completion.model_copy(update={"response": kept})
        dead_letter(self._redis, self._keys, completion, reason)

    def supply_credential(
        self,
        call_id: str,
        credential: str,
        store: CredentialStore,
        *,
        source: str = "api",
        check: PendingCheck | None = None,
        asked: int | None = None,
        credential_key: str | None = None,
    ) -> str:
        """Store the user's credential (encrypted, per user) and re-run the waiting call.
        `check`: see `pending_for`. The answer names the request it answers: `asked`,
        the call's `asked_again` as shown, and `credential_key`, the AuthConfig's key
        asked for; a call that asks again since, or for another key, refuses it
        (AwaitingCredentialError, dead-lettered) and nothing is stored. None: the
        request it makes when this is posted.

        The credential itself never enters the completions stream, the dead-letter
        stream or the session.
        """
        self._check_credential(call_id, credential, source)
        completion = Completion(
            call_id=call_id, response={}, kind="credential", source=source, posted_at=time.time()
        )
        pending = self.pending_for(completion, check)
        completion.session_key = pending.session_key
        config = AuthConfig.model_validate(pending.ticket)
        other = _other_request(pending, config, asked, credential_key)
        if other is not None:
            error = AwaitingCredentialError(f"{other}; nothing was stored")
            self._dead_letter(completion, str(error))
            raise error
        # The request it answers: one made since (the tool asked again) does not take it.
        completion.asked_again = pending.asked_again
        store.put(pending.app_name, pending.user_id, config, credential)
        return self._post(pending, completion)

    def _check_credential(self, call_id: str, credential: str, source: str) -> None:
        """Refuse (InvalidCompletionError, dead-lettered without it) an empty or oversized
        credential, or one that is not Unicode text (it could not be encrypted)."""
        if not 0 < len(credential) <= MAX_CREDENTIAL_CHARS:
            reason = (
                f"a credential is 1 to {MAX_CREDENTIAL_CHARS} characters, not {len(credential)}"
            )
        elif has_lone_surrogates(credential):
            reason = "the credential is not Unicode text (a lone surrogate)"
        else:
            return
        self._refuse_unkept(call_id, reason, final=True, source=source, kind="credential")
        raise InvalidCompletionError(f"{reason}; nothing was stored")

    def _post(self, pending: PendingCall, completion: Completion) -> str:
        """Add the completion to its app's stream and, in the same step, to the end of its
        session's order: completions of a session apply in this order. Refused with
        CompletionsFullError while the stream holds `maxlen` unapplied entries."""
        stream = self._keys.completions(pending.app_name)
        record = applied_record(self._keys.applied_writes(pending.session_key))
        # Answered once the replicas have it: a failover cannot lose an acknowledged post.
        reply: Any = self._replication.run_sync(
            self._redis,
            _POST,
            3,
            stream,
            self._keys.completion_order(pending.session_key),
            record,
            COMPLETION_FIELD,
            completion.model_dump_json(),
            ORDER_TTL_S,
            COMPLETIONS_GROUP,
            self._maxlen,
            APPLIED_TTL_S,
        )
        if _text(reply[0]) == "full":
            raise CompletionsFullError(
                f"{stream} holds {self._maxlen} results not applied yet (the orchestrators "
                "are behind or not running); nothing was posted - retry later, or raise "
                "TOOLFLEET_COMPLETIONS_MAXLEN"
            )
        return _text(reply[1])

    def register(self, call: PendingCall) -> bool:
        """Open a long-running call's ticket. The worker that runs the call owns its
        ticket: it opens it before the tool runs (a background job the tool starts may
        post a result at once) and writes the tool's initial response, or takes the
        ticket back, in the step that posts the call's first result (`ticket_write`).
        False when the call is closed (the orchestrator answered it already): then it
        must not run."""
        return self._pending.open(self._redis, call)

    def is_closed(self, call: PendingCall) -> bool:
        """Whether the orchestrator answered the call already: a worker must not run it."""
        return self._pending.is_closed(self._redis, call.session_key, call.call_id)

    def ticket_write(self, call: PendingCall, *, opened: bool) -> TicketWrite:
        """What the post of `call`'s first result does to its ticket: with `opened`, the
        tool answered pending and the ticket keeps its initial response (`call.ticket`);
        otherwise the call is over without a ticket, which the post takes back."""
        session = call.session_key
        keys = (
            self._keys.pending(),
            self._keys.session_pending(session),
            self._keys.closed(session, call.call_id),
            self._keys.pending_by_age(),
        )
        return TicketWrite(keys, call.call_id, self._pending.record(call) if opened else None)

    def withdraw(self, session: SessionKey, call_id: str) -> None:
        """The long-running tool of `session`'s call failed: there is nothing to complete."""
        batch = WriteBatch()
        self._pending.stage_drop(batch, session, call_id)
        batch.run_sync(self._redis)

    def answered_in(self, call_id: str) -> str | None:
        """The session (its SessionKey) whose call `call_id` was answered, while the
        record of what answered it lasts; None for a call not answered."""
        applied = self._redis.get(self._keys.applied(_named(call_id)))
        if applied is None:
            return None
        session = json.loads(applied).get("session")
        return session if isinstance(session, str) else None

    def _not_pending(self, call_id: str) -> AlreadyCompletedError | CallNotPendingError:
        applied = self._redis.get(self._keys.applied(call_id))
        if applied is not None:
            claim = json.loads(applied)
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(claim.get("at", 0)))
            if claim.get("answer"):  # a person's or an operator's answer, not a result
                return AlreadyCompletedError(
                    f"call {call_id!r} was already answered: {claim['answer']} (completion "
                    f"{claim.get('entry')} applied at {when}); nothing was changed"
                )
            return AlreadyCompletedError(
                f"call {call_id!r} already has its final result (completion "
                f"{claim.get('entry')} applied at {when}); nothing was changed"
            )
        return CallNotPendingError(
            f"no pending call with id {call_id!r}; see `toolfleet tickets list`"
        )


def _wrong_kind(pending: PendingCall, kind: str) -> CompletionError:
    """The refusal of a `kind` of answer for a call that waits for another kind."""
    call_id = pending.call_id
    if pending.kind == "credential":
        return AwaitingCredentialError(
            f"call {call_id!r} waits for a credential, not a {kind}: "
            f"`toolfleet tickets credential {call_id}`"
        )
    if pending.kind == "confirmation":
        return AwaitingConfirmationError(
            f"call {call_id!r} waits for a confirmation, not a {kind}: `toolfleet tickets "
            f"confirm {call_id}` or `toolfleet tickets reject {call_id}`"
        )
    error = AwaitingConfirmationError if kind == "confirmation" else AwaitingCredentialError
    return error(f"call {call_id!r} waits for a result, not a {kind}")


def _other_request(
    pending: PendingCall, config: AuthConfig, asked: int | None, credential_key: str | None
) -> str | None:
    """Why a credential posted for request `asked` of key `credential_key` does not
    answer the one `pending` makes now; None when it does (a None checks nothing)."""
    call_id = pending.call_id
    if asked is not None and asked != pending.asked_again:
        return (
            f"call {call_id!r} asked again since the request answered was shown (request "
            f"{asked}, now {pending.asked_again}): supply the credential it asks for now"
        )
    if credential_key is not None and credential_key != config.key:
        shown = credential_key if len(credential_key) <= 80 else credential_key[:80] + "..."
        return (
            f"call {call_id!r} asks for the credential {config.key!r}, not {shown!r}: "
            "supply the credential it asks for now"
        )
    return None


def cancelled_ticket(tool: str) -> dict[str, Any]:
    """The final response of a ticket closed by a cancellation."""
    return error_response(
        "Cancelled",
        f"the pending call of {tool!r} was cancelled (by the user or an operator); no "
        "result will come for it",
    )


def _named(call_id: str) -> str:
    """`call_id` as it can name a call: text UTF-8 cannot carry (a shell's undecodable
    bytes, JSON's lone "\\ud800") replaced, as a posted completion's id is. No call has
    such an id; Redis's client would raise on it rather than find none."""
    named: str = without_lone_surrogates(call_id)
    return named


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def dead_letter_fields(completion_json: str | bytes, reason: str) -> dict[str, str | bytes]:
    """The dead-letter entry: what was posted, why it was refused, when."""
    return {"completion": completion_json, "reason": reason, "at": json.dumps(time.time())}


def dead_letter(client: redis.Redis, keys: Keys, completion: Completion, reason: str) -> None:
    """Keep a refused completion in the dead-letter stream with its reason."""
    client.xadd(
        keys.dead_letters(),
        dead_letter_fields(completion.model_dump_json(), reason),  # type: ignore[arg-type]
        maxlen=DEAD_LETTERS_MAXLEN,
        approximate=True,
    )


def post_result(
    call_id: str,
    response: dict[str, Any],
    final: bool = True,
    *,
    settings: Settings,
    source: str = "api",
) -> str:
    """Post a result for a pending call, with the Redis and prefix of `settings`.

    The one-call form of `Completions.post_result` for scripts and other services:
    `post_result(call_id, {"status": "approved"}, settings=Settings())`.

    Args:
        call_id: The id of the pending call's function call.
        response: The result, a JSON object; values under secret names are masked.
        final: True: the call's final result, which closes it; False: progress, and the
            call stays pending.
        settings: Whose Redis, key prefix, secret names and limits are used.
        source: Who posts, kept with the completion (and in a dead letter if refused).

    Returns:
        The id of the entry added to the completions stream.

    Raises:
        ConfigError: `settings` has no Redis URL.
        InvalidCompletionError: `response` is not a JSON object or nests too deep.
        CallNotPendingError: No call `call_id` is pending.
        AlreadyCompletedError: The call already has its final result.
        AwaitingCredentialError: The call waits for a user's credential, not a result.
        AwaitingConfirmationError: The call waits for a person's confirmation.
        CompletionsFullError: The stream holds `maxlen` results not applied yet.
    """
    with resilient_client(settings.require_redis_url()) as client:
        completions = Completions.of(client, Keys(settings.key_prefix), settings)
        return completions.post_result(call_id, response, final=final, source=source)
