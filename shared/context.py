"""ToolContext: what a tool running on a worker knows of its call and session."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from toolfleet.shared.confirmation import ToolConfirmation
from toolfleet.shared.errors import ToolfleetError
from toolfleet.shared.jobs import Job, JobScheduler, PostResult
from toolfleet.shared.messages import ToolActions, ToolCall
from toolfleet.shared.state import State

if TYPE_CHECKING:
    from google.genai import types

    from toolfleet.shared.artifacts import ArtifactStore
    from toolfleet.shared.auth import AuthConfig, CredentialStore
    from toolfleet.shared.config import Settings
    from toolfleet.shared.memory import MemoryStore, SearchMemoryResponse

_S = TypeVar("_S")


@dataclass(frozen=True)
class ToolServices:
    """What a worker gives its tools: its settings, job scheduling, artifacts, memory,
    credentials, and posting the results of pending calls."""

    settings: Settings | None = None
    scheduler: JobScheduler | None = None
    artifacts: ArtifactStore | None = None
    memory: MemoryStore | None = None
    credentials: CredentialStore | None = None
    post_result: PostResult | None = None


class ToolContext:
    """Injected into a tool that declares a `tool_context: ToolContext` parameter.

    Args:
        call: The call being run: its ids, session, agent, state snapshot and, once
            confirmed, the person's answer (`tool_confirmation`).
        services: What the worker offers its tools (settings, jobs, artifacts, memory,
            credentials, posting results); default: none, and a method that needs a
            missing one raises ToolfleetError.
    """

    def __init__(self, call: ToolCall, services: ToolServices | None = None) -> None:
        self.function_call_id = call.call_id
        self.invocation_id = call.invocation_id
        self.session_id = call.session_id
        self.app_name = call.app_name
        self.user_id = call.user_id
        self.agent_name = call.agent
        self.depth = call.depth
        # The calling run's max_llm_calls (None: none): an AgentTool's child obeys it too.
        self.max_llm_calls = call.max_llm_calls
        self.state = State(call.state)
        self.actions = ToolActions()
        # A person's answer, when this call runs once confirmed (ADK's tool_confirmation).
        self.tool_confirmation = (
            ToolConfirmation.model_validate(call.confirmation) if call.confirmation else None
        )
        self._services = services or ToolServices()

    @property
    def settings(self) -> Settings:
        """The worker's settings (its Redis, key prefix and pools), for tools that
        connect to the fleet themselves, such as an AgentTool's child runner."""
        return self._need(self._services.settings, "settings")

    def schedule_job(self, job: Job, *, delay_s: float = 0.0, **kwargs: Any) -> None:
        """Run `job(**kwargs)` on its pool's workers after `delay_s` seconds.

        Long-running tools use this to finish their work in the background; the job
        posts the final result with `job_context.post_result(call_id, ...)`.
        """
        if self._services.scheduler is None:
            raise ToolfleetError("jobs can be scheduled only from tools running on a worker")
        self._services.scheduler(job, delay_s, kwargs)

    def post_result(self, response: dict[str, Any], *, final: bool = True) -> None:
        """For a long-running call that goes on after the tool returned (in this worker
        process): post its progress (`final=False`) or its final result."""
        post = self._need(self._services.post_result, "posting results")
        post(self.function_call_id, response, final=final)

    async def save_artifact(self, filename: str, artifact: types.Part) -> int:
        """Store a new version of `filename` (`user:` names are per user); return it (from 0)."""
        store = self._need(self._services.artifacts, "artifacts")
        version = store.save(self.app_name, self.user_id, self.session_id, filename, artifact)
        self.actions.artifact_delta[filename] = version  # the event says what changed
        return version

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

    def request_confirmation(self, *, hint: str | None = None, payload: Any = None) -> None:
        """Ask a person to confirm this call, as ADK's: the model does not see this run's
        response. Once confirmed, the call runs again with `tool_confirmation` set
        (`confirmed`, and `payload` as the person may have edited it); rejected, the
        model gets an error response."""
        asked = ToolConfirmation(hint=hint or "", payload=payload)
        self.actions.requested_confirmation = asked.model_dump(mode="json")

    @staticmethod
    def _need(service: _S | None, what: str) -> _S:
        if service is None:
            raise ToolfleetError(f"{what} are available only to tools running on a worker")
        return service
