"""Post ToolResults to a session's results stream (workers, jobs, the CLI).

With a fleet key, secret-named values of each response and state write are sealed on the
stream; the orchestrator opens a response's where it hands it to the model, and keeps state
writes sealed (a later call's worker opens them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import redis

from toolfleet.shared.group_commit import GroupCommit
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import (
    FEED_ENTRY_FIELD,
    FEED_NUMBER_FIELD,
    FEED_STREAM_FIELD,
    RESULT_FIELD,
    ToolResult,
)
from toolfleet.shared.pending import CLOSED_TTL_S, TICKETED_SUFFIX
from toolfleet.shared.replication import NO_WAIT, Replication
from toolfleet.shared.scripts import LUA_ITEM_REPLY, LuaScript, only_reply, run_items
from toolfleet.shared.sealing import Sealer
from toolfleet.shared.signing import SIGNATURE_FIELD, ResultSigner

# An abandoned session's inbox disappears after a day rather than living forever.
STREAM_TTL_S = 24 * 3600

# About this many entries stay on the results feed: a reader that falls further behind
# sees a gap in the entries' numbers and reads the results on their session streams.
FEED_MAXLEN = 2_000
# A result up to this size is copied onto the feed; a larger one (up to 256 KB) only
# named there, and the reader reads it from its session's stream: the feed stays under
# about 2,000 x 8 KB.
FEED_COPY_MAX_BYTES = 8 * 1024

# Each result appended (the stream capped at about ARGV[1] entries) and the TTL
# (ARGV[2]) renewed, for a batch of results in one command: an io worker posts a thousand
# at once, and one script run per result cost the worker more than the script. KEYS:
# eight per result. With its KEYS[2], the results feed (capped at about ARGV[3]) gets an
# entry naming the stream and the entry, numbered by the counter KEYS[8], in the same
# step, with a copy of the result when its `copy` is 1. With KEYS[3], the call is closed
# in the same step too (for ARGV[4] seconds): a redelivery of its message does not run
# it again. With KEYS[4] (the pending hash; KEYS[5] the session's pending set, KEYS[6]
# the call's closed marker, KEYS[7] the pending calls' age index), the step also writes
# the long-running call's ticket: records the tool's initial response `record` - only
# while the ticket the worker opened is still there and the call not closed, marking the
# call ticketed (a redelivery does not run it again, `PendingCalls.open`) - or, `record`
# empty, takes it back. After ARGV[4], each result's `copy`, ticket call id,
# `record`, the number of its stream fields and values, and those. Each result's reply
# is its entry id, or its own error: one that fails fails no other. A stream's TTL is
# renewed once per run, however many of its results the run posts.
_POST = LuaScript(
    LUA_ITEM_REPLY
    + f"""
local renewed = {{}}
local function post(k, copy, call_id, record, fields)
  local id = redis.call('XADD', KEYS[k + 1], 'MAXLEN', '~', ARGV[1], '*', unpack(fields))
  if not renewed[KEYS[k + 1]] then
    redis.call('EXPIRE', KEYS[k + 1], ARGV[2])
    renewed[KEYS[k + 1]] = true
  end
  if KEYS[k + 2] ~= '' then
    local n = redis.pcall('INCR', KEYS[k + 8])
    if type(n) == 'table' then  -- not a number (overwritten): numbered anew, not refused
      redis.call('SET', KEYS[k + 8], 1)
      n = 1
    end
    local entry = {{'{FEED_STREAM_FIELD}', KEYS[k + 1], '{FEED_ENTRY_FIELD}', id,
                   '{FEED_NUMBER_FIELD}', n}}
    if copy == '1' then
      for j = 1, #fields do entry[#entry + 1] = fields[j] end
    end
    redis.call('XADD', KEYS[k + 2], 'MAXLEN', '~', ARGV[3], '*', unpack(entry))
  end
  if KEYS[k + 3] ~= '' then redis.call('SET', KEYS[k + 3], 1, 'EX', ARGV[4]) end
  if KEYS[k + 4] ~= '' then
    if record == '' then
      redis.call('HDEL', KEYS[k + 4], call_id)
      redis.call('SREM', KEYS[k + 5], call_id)
      redis.call('ZREM', KEYS[k + 7], call_id)
    elseif redis.call('EXISTS', KEYS[k + 6]) == 0
        and redis.call('HEXISTS', KEYS[k + 4], call_id) == 1 then
      redis.call('HSET', KEYS[k + 4], call_id, record)
      redis.call('SET', KEYS[k + 6] .. '{TICKETED_SUFFIX}', 1, 'EX', ARGV[4])
    end
  end
  return id
end
local replies = {{}}
local a = 5
for i = 0, #KEYS / 8 - 1 do
  local count = tonumber(ARGV[a + 3])
  local fields = {{}}
  for j = 1, count do fields[j] = ARGV[a + 3 + j] end
  replies[i + 1] = item_reply(pcall(post, 8 * i, ARGV[a], ARGV[a + 1], ARGV[a + 2], fields))
  a = a + 4 + count
end
return replies
"""
)
# Results posted by one run of the script at most: a larger batch goes as several runs
# in one pipeline, so that no run holds Redis for long.
POST_BATCH = 128


@dataclass(frozen=True)
class Feed:
    """The results feed (Keys.results_feed) and the counter numbering its entries."""

    stream: str
    count: str

    @classmethod
    def of(cls, keys: Keys) -> Feed:
        """The feed of the deployment of `keys`."""
        return cls(keys.results_feed(), keys.results_feed_count())


class ResultReporter:
    """Posts ToolResults to results streams, each capped at about `maxlen` entries, and a
    copy to the results `feed` when given.

    Each post renews the stream's TTL, so an abandoned session's inbox expires.
    """

    def __init__(
        self,
        client: redis.Redis,
        maxlen: int,
        signer: ResultSigner | None = None,
        sealer: Sealer | None = None,
        *,
        feed: Feed | None = None,
        replication: Replication = NO_WAIT,
    ) -> None:
        self._client = client
        # A result is reported (and its task acked) once replicas have it.
        self._replication = replication
        self._maxlen = maxlen
        self._feed = feed
        self._signer = signer  # signs each result with the fleet key, when there is one
        self._sealer = sealer  # seals its secrets with the key derived from it
        self._commits = GroupCommit(client)

    def post(
        self,
        stream: str,
        result: ToolResult,
        *,
        closes: str | None = None,
        ticket: TicketWrite | None = None,
    ) -> str:
        """Append `result` to `stream` (secrets sealed, signed) and renew its TTL; return
        the entry id. `closes`: the call's closed key (Keys.closed), set in the same step
        when the result is the call's final answer; `ticket`: what the same step does to
        a long-running call's ticket."""
        return self.send(Post(stream, result, closes, ticket))

    def send(self, post: Post) -> str:
        """`post` of a Post: its entry id."""
        # With the results of the calls ending at the same moment (a sync io worker's).
        keys, args = self._post_args(post)
        run = [len(keys), *keys, *self._common_args, *args]
        if self._replication.replicas > 0:  # one pipeline with its wait for the replicas
            replies = self._replication.run_sync(self._client, _POST, *run)
        else:
            replies = self._commits.run_script(_POST, *run)
        return _entry_id(only_reply(replies))

    def post_all(self, posts: Sequence[Post]) -> list[str | Exception]:
        """`post` for many results in one round trip: the calls an io worker concludes
        together. Each post's entry id, or its error; a connection error is raised."""
        items = [self._post_args(post) for post in posts]
        send = partial(self._replication.run_all_sync, self._client, _POST)
        return [
            reply if isinstance(reply, Exception) else _entry_id(reply)
            for reply in run_items(send, self._common_args, items, POST_BATCH)
        ]

    @property
    def _common_args(self) -> tuple[Any, ...]:
        """`_POST`'s arguments before each result's own."""
        return (self._maxlen, STREAM_TTL_S, FEED_MAXLEN, CLOSED_TTL_S)

    def _post_args(self, post: Post) -> tuple[list[str], list[Any]]:
        """The keys and own arguments of `post` in a run of `_POST`."""
        result = post.result
        payload = result.model_dump_json().encode()
        if self._sealer is not None and self._sealer.may_seal(payload):
            # State writes too: the orchestrator stores them as they come (state hash),
            # and the worker of a later call opens them. What the tool returned or wrote
            # is sealed whole, a sealed shape included (its inputs came opened): opening
            # it gives back that shape, never what a token relayed from elsewhere holds.
            delta = self._sealer.seal(result.state_delta, keep_sealed=False)
            response = self._sealer.seal(result.response, keep_sealed=False)
            result = result.model_copy(update={"response": response, "state_delta": delta})
            payload = result.model_dump_json().encode()
        fields: dict[str, bytes | str] = {RESULT_FIELD: payload}
        if self._signer is not None:
            fields[SIGNATURE_FIELD] = self._signer.sign(payload)

        ticket = post.ticket
        feed = self._feed
        keys = [post.stream, feed.stream if feed else "", post.closes or ""]
        keys += ["", "", "", ""] if ticket is None else list(ticket.keys)
        keys.append(feed.count if feed else "")
        copy = 1 if len(payload) <= FEED_COPY_MAX_BYTES else 0
        pairs = [x for kv in fields.items() for x in kv]
        args: list[Any] = [copy]
        args += ["", ""] if ticket is None else [ticket.call_id, ticket.record or ""]
        return keys, [*args, len(pairs), *pairs]


@dataclass(frozen=True)
class TicketWrite:
    """What a post does to a long-running call's ticket, in its step: record the tool's
    initial response (`record`, the ticket's JSON), or take the ticket back (None: the
    call is over without one). `keys`: the pending hash, the session's pending set, the
    call's closed marker and the pending calls' age index."""

    keys: tuple[str, str, str, str]
    call_id: str
    record: str | None


@dataclass(frozen=True)
class Post:
    """A result to post to `stream`; `closes`: the call's closed key, when it is final;
    `ticket`: what the post does to a long-running call's ticket."""

    stream: str
    result: ToolResult
    closes: str | None = None
    ticket: TicketWrite | None = None


def _entry_id(reply: Any) -> str:
    return reply.decode() if isinstance(reply, bytes) else str(reply)
