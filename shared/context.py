"""ToolContext: what a tool running on a worker knows of its call and session."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from google.genai import types

from shared.errors import ToolfleetError
from shared.jobs import Job, JobScheduler
from shared.messages import ToolActions, ToolCall

if TYPE_CHECKING:
    from shared.artifacts import ArtifactStore
    from shared.auth import AuthConfig, CredentialStore
    from shared.memory import MemoryStore, SearchMemoryResponse

_S = TypeVar("_S")

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"


class State(MutableMapping[str, Any]):
    """A snapshot of the session's state whose writes are recorded as a delta.

    Keys follow ADK's scopes: no prefix is this session, `user:` every session of
    the user, `app:` every session of the app, `temp:` this invocation only.
    Deleting a key is recorded as setting it to None, as ADK does.
    """

    def __init__(self, snapshot: Mapping[str, Any]) -> None:
        self._snapshot = dict(snapshot)
        self._delta: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key in self._delta:
            return self._delta[key]
        return self._snapshot[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._delta[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self._delta[key] = None

    def __iter__(self) -> Iterator[str]:
        return iter({**self._snapshot, **self._delta})

    def __len__(self) -> int:
        return len({**self._snapshot, **self._delta})

    def __contains__(self, key: object) -> bool:
        return key in self._delta or key in self._snapshot

    @property
    def delta(self) -> dict[str, Any]:
        """Every write since the snapshot, in the order made."""
        return dict(self._delta)

    def has_delta(self) -> bool:
        return bool(self._delta)


@dataclass(frozen=True)
class ToolServices:
    """What a worker gives its tools: job scheduling, artifacts, memory."""

    scheduler: JobScheduler | None = None
    artifacts: ArtifactStore | None = None
    memory: MemoryStore | None = None
    credentials: CredentialStore | None = None


class ToolContext:
    """Injected into a tool that declares a `tool_context: ToolContext` parameter."""

    def __init__(self, call: ToolCall, services: ToolServices | None = None) -> None:
        self.function_call_id = call.call_id
        self.invocation_id = call.invocation_id
        self.session_id = call.session_id
        self.app_name = call.app_name
        self.user_id = call.user_id
        self.agent_name = call.agent
        self.depth = call.depth
        self.state = State(call.state)
        self.actions = ToolActions()
        self._services = services or ToolServices()

    def schedule_job(self, job: Job, *, delay_s: float = 0.0, **kwargs: Any) -> None:
        """Run `job(**kwargs)` on its pool's workers after `delay_s` seconds.

        Long-running tools use this to finish their work in the background; the job
        posts the final result with `job_context.post_result(call_id, ...)`.
        """
        if self._services.scheduler is None:
            raise ToolfleetError("jobs can be scheduled only from tools running on a worker")
        self._services.scheduler(job, delay_s, kwargs)

    async def save_artifact(self, filename: str, artifact: types.Part) -> int:
        """Store a new version of `filename` (`user:` names are per user); return it (from 0)."""
        store = self._need(self._services.artifacts, "artifacts")
        return store.save(self.app_name, self.user_id, self.session_id, filename, artifact)

    async def load_artifact(self, filename: str, version: int | None = None) -> types.Part | None:
        """The latest (or given) version of an artifact, or None if there is none."""
        store = self._need(self._services.artifacts, "artifacts")
        return store.load(self.app_name, self.user_id, self.session_id, filename, version)

    async def list_artifacts(self) -> list[str]:
        """Names of the session's and the user's artifacts."""
        store = self._need(self._services.artifacts, "artifacts")
        return store.list(self.app_name, self.user_id, self.session_id)

    async def search_memory(self, query: str) -> SearchMemoryResponse:
        """Past events of this user's sessions that share a word with `query`."""
        store = self._need(self._services.memory, "memory")
        return store.search(self.app_name, self.user_id, query)

    def get_auth_response(self, auth_config: AuthConfig) -> str | None:
        """The credential the user supplied for `auth_config`, or None: then call
        `request_credential(auth_config)` and return (the call runs again with it)."""
        store = self._need(self._services.credentials, "credentials")
        return store.get(self.app_name, self.user_id, auth_config)

    def request_credential(self, auth_config: AuthConfig) -> None:
        """Ask the user for a credential; a stored one (rejected, say) is forgotten.

        The model does not see this call's response: it sees the response of the run
        made once the credential is supplied.
        """
        store = self._need(self._services.credentials, "credentials")
        store.forget(self.app_name, self.user_id, auth_config)
        self.actions.requested_auth = auth_config.model_dump(mode="json")

    @staticmethod
    def _need(service: _S | None, what: str) -> _S:
        if service is None:
            raise ToolfleetError(f"{what} are available only to tools running on a worker")
        return service
