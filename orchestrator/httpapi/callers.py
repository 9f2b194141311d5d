"""Who is calling and what they may do: a Caller is a subject (the user id) and roles.

Roles, as written in API keys and in a JWT's roles claim:
- `admin`: everything;
- `approver:<app>` (or `approver:*`): list and decide the app's tickets;
- `service:<app>`, `service:<app>/<tool>` (or `service:*`): list the tickets in scope and
  post their results (a ticket system's webhook).
Every caller is also the user named by its subject: it owns that user's sessions and
tickets, and only it may supply their credentials.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from toolfleet.shared.confirmation import SERVED_AGENT, is_served_session
from toolfleet.shared.errors import ConfigError
from toolfleet.shared.messages import PendingCall
from toolfleet.shared.state import APP_PREFIX

ANY = "*"
Action = Literal["approve", "reject", "result", "credential", "confirm"]


class UnknownRoleError(ValueError):
    """A role string that is none of admin, approver:<app>, service:<app>[/<tool>]."""


@dataclass(frozen=True)
class Scope:
    """An app (or every app, `*`) and optionally one of its tools."""

    app: str
    tool: str | None = None

    def covers(self, call: PendingCall) -> bool:
        """True when `call` is of this scope's app (and tool, when it names one)."""
        app_ok = self.app in (ANY, call.app_name)
        return app_ok and (self.tool is None or self.tool == call.tool)


@dataclass(frozen=True)
class Caller:
    """An authenticated caller: `subject` is the user it acts as; `every_user`: the one
    person of a server with no identities configured, who is each of its users (their
    credentials too)."""

    subject: str
    admin: bool = False
    approves: frozenset[Scope] = field(default_factory=frozenset)
    serves: frozenset[Scope] = field(default_factory=frozenset)
    every_user: bool = False

    @classmethod
    def of(cls, subject: str, roles: Iterable[str]) -> Caller:
        """The caller `subject` with `roles`; UnknownRoleError names a role it cannot read."""
        admin = False
        approves: set[Scope] = set()
        serves: set[Scope] = set()
        for role in roles:
            if role == "admin":
                admin = True
            elif role.startswith("approver:"):
                approves.add(_scope(role, allow_tool=False))
            elif role.startswith("service:"):
                serves.add(_scope(role, allow_tool=True))
            else:
                raise UnknownRoleError(
                    f"unknown role {role!r}: use admin, approver:<app> or service:<app>[/<tool>]"
                )
        return cls(subject, admin, frozenset(approves), frozenset(serves))

    @property
    def roles(self) -> list[str]:
        """The roles as written in configuration, sorted."""
        out = ["admin"] if self.admin else []
        out += [f"approver:{s.app}" for s in self.approves]
        out += [f"service:{s.app}" + (f"/{s.tool}" if s.tool else "") for s in self.serves]
        return sorted(out)

    def owns(self, user_id: str) -> bool:
        """May act as `user_id`: their sessions, messages and event streams."""
        return self.admin or self.subject == user_id

    def shared_state_in(self, state: Mapping[str, object] | None) -> list[str]:
        """The keys of `state` this caller may not write: app-wide ones (`app:`), which
        every user of the app reads, unless it is an admin. A session's own state and
        its user's (`user:`) are the caller's to write."""
        if self.admin or not state:
            return []
        return sorted(key for key in state if key.startswith(APP_PREFIX))

    def owns_session(self, user_id: str, session_id: str) -> bool:
        """May act as `user_id` in its session `session_id`: not in one `toolfleet mcp
        serve` keeps its calls in (no person's; an admin's only), whatever the subject."""
        return self.owns(user_id) and (self.admin or not is_served_session(user_id, session_id))

    def owns_call(self, call: PendingCall) -> bool:
        """Is the user who made `call` (or admin). A call made through `toolfleet mcp
        serve` has no person behind its user id: no caller but an admin owns it, whatever
        its subject."""
        return self.owns(call.user_id) and (self.admin or call.agent != SERVED_AGENT)

    def sees(self, call: PendingCall) -> bool:
        """May see the ticket: its user, an approver or service of its app, or admin."""
        return (
            self.owns_call(call)
            or self.may_decide(call)
            or self.may_post_result(call)
            or self.may_confirm(call)
        )

    def may_decide(self, call: PendingCall) -> bool:
        """May approve or reject it: an approver of its app, admin, or a service in scope."""
        if call.kind != "result":
            return False
        covered = any(s.covers(call) for s in self.approves)
        return covered or self.may_post_result(call)

    def may_post_result(self, call: PendingCall) -> bool:
        """May post its result: a service whose scope covers it, or admin; or its own user
        when its tool's result is the user's answer (`answered_by_user`, not for a call
        made through `toolfleet mcp serve`)."""
        if call.kind != "result":
            return False
        users = call.answered_by_user and self.owns_call(call)
        return self.admin or users or any(s.covers(call) for s in self.serves)

    def may_supply_credential(self, call: PendingCall) -> bool:
        """Only the ticket's own user: a credential is stored as theirs and used for them
        (without identities, the one person at the server is each user)."""
        return call.kind == "credential" and (self.every_user or self.subject == call.user_id)

    def may_confirm(self, call: PendingCall) -> bool:
        """May confirm or reject a call waiting for a person: its own user (as in ADK,
        where the user answers; not for a call made through `toolfleet mcp serve`), an
        approver of its app, or admin."""
        if call.kind != "confirmation":
            return False
        return self.owns_call(call) or any(s.covers(call) for s in self.approves)

    def actions(self, call: PendingCall) -> list[Action]:
        """What this caller may do with the ticket, for the approvals page."""
        out: list[Action] = []
        if self.may_decide(call):
            out += ["approve", "reject"]
        if self.may_post_result(call):
            out.append("result")
        if self.may_supply_credential(call):
            out.append("credential")
        if self.may_confirm(call):
            out.append("confirm")
        return out


OPERATOR = Caller("operator", admin=True)
# The caller of a server with no identities configured (loopback clients only).
LOCAL_OPERATOR = Caller("operator", admin=True, every_user=True)


def caller_of_key(subject: str, roles: Iterable[str]) -> Caller:
    """The caller of a configured API key; a role it cannot read is a ConfigError."""
    try:
        return Caller.of(subject, roles)
    except UnknownRoleError as exc:
        raise ConfigError(f"TOOLFLEET_HTTP_API_KEYS, key of {subject!r}: {exc}") from exc


def _scope(role: str, *, allow_tool: bool) -> Scope:
    kind, _, target = role.partition(":")
    app, slash, tool = target.partition("/")
    if not app or (slash and (not allow_tool or not tool or app == ANY)):
        form = f"{kind}:<app>" + ("[/<tool>]" if allow_tool else "")
        raise UnknownRoleError(f"role {role!r} is not of the form {form} (or {kind}:*)")
    return Scope(app, tool or None)
