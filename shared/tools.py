"""Tools: plain Python functions described to the model and run on the fleet."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, ItemsView, Iterable, KeysView, Mapping, ValuesView
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, TypeVar, overload, runtime_checkable

from toolfleet.shared.callables import callable_name
from toolfleet.shared.context import ToolContext
from toolfleet.shared.errors import ToolDefinitionError
from toolfleet.shared.schema import (
    ArgumentProblem,
    Signature,
    describe_function,
    validate_arguments,
)
from toolfleet.shared.tool_limits import parse_rate

_T = TypeVar("_T")

LONG_RUNNING_NOTE = (
    "NOTE: This is a long-running operation. Do not call this tool again if it has "
    "already returned some status (such as pending)."
)


@dataclass(frozen=True)
class ToolOptions:
    """How the fleet runs a tool.

    Attributes:
        pool: The pool (Celery queue `tools.<pool>`) whose workers run it; None: the
            settings' default pool of the tool's kind.
        timeout_s: Time limit of one call; None: the settings' default.
        retry_on: Exceptions after which the worker runs the call again.
        max_retries: Most retries after the first run.
        retry_backoff_s: Wait before the first retry, doubled for each next one.
        kind: `"io"` or `"cpu"`; None: a coroutine function is io, a plain one cpu. It
            chooses the default pool of that kind when `pool` is None.
        max_concurrency: Most calls of the tool running at once across the fleet; None:
            no limit.
        rate_limit: Most calls started per period across the fleet (`"100/m"`, `"5/s"`);
            None: no limit. A call over a limit waits its turn.
    """

    pool: str | None = None  # None: the settings' default pool
    timeout_s: float | None = None  # None: the settings' default time limit
    retry_on: tuple[type[BaseException], ...] = ()  # transient exceptions worth a retry
    max_retries: int = 3
    retry_backoff_s: float = 1.0  # first retry delay; doubles each time
    # None: an async function is io, a sync one cpu. Chooses the default pool of that kind
    # when `pool` is None; an explicit pool wins.
    kind: Literal["io", "cpu"] | None = None
    # Fleet-wide, across every worker: at most this many calls running at once (None: no
    # limit), and at most rate_limit starts ("100/m", "5/s"); a call waits its turn.
    max_concurrency: int | None = None
    rate_limit: str | None = None

    @property
    def limited(self) -> bool:
        """Whether a call waits on a fleet-wide limit (one Redis round trip or more)."""
        return self.max_concurrency is not None or self.rate_limit is not None


@dataclass(frozen=True, eq=False)
class FunctionTool:
    """A function offered to the model. Build with `FunctionTool(func)` or `@tool`.

    Attributes:
        func: The function; its name, Google-style docstring and type hints are the
            declaration the model sees. A worker imports it by its module-level name.
        name: The tool's name for the model; default: the function's name.
        options: How the fleet runs it (pool, time limit, retries, limits).
        is_long_running: The function returns at once and its final result is posted
            later; the model is told not to call it again.
        require_confirmation: True, or a function of the call's arguments (and
            `tool_context`, if it takes one) saying whether a call needs a person's yes
            before it is sent.
        answered_by_user: A long-running tool whose final result is its session's user's
            answer (ADK's `get_user_choice`): over HTTP, that user may post it, not only
            a service of the app or an admin.

    Raises:
        ToolDefinitionError: The function cannot be a tool (not callable, not importable
            by a worker, a name that is not an identifier, a parameter type with no JSON
            schema, limits out of range), saying which and why.
    """

    func: Callable[..., Any]
    name: str = ""
    options: ToolOptions = field(default_factory=ToolOptions)
    is_long_running: bool = False
    # ADK's: True, or a function of the call's arguments (and `tool_context`, if it takes
    # one) saying whether this call needs a person's confirmation before it is sent.
    require_confirmation: bool | Callable[..., Any] = field(default=False, kw_only=True)
    answered_by_user: bool = field(default=False, kw_only=True)
    signature: Signature = field(init=False, repr=False)
    # inspect's answer, asked once: the fleet routes every call by it (tool_pool).
    _is_async: bool = field(init=False, repr=False, compare=False)

    # Whether `func` is the user's, which a worker must import by its module-level name.
    # toolfleet's own wrappers (AgentTool, BaseTool) are found through their object.
    checks_importable: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not callable(self.func):
            raise ToolDefinitionError([f"{self.func!r} is not callable"])
        if self.checks_importable:
            problem = not_importable(self.func)
            if problem:
                raise ToolDefinitionError([problem])
        name = self.name or callable_name(self.func)
        if not name.isidentifier():
            raise ToolDefinitionError([f"tool name {name!r} is not an identifier"])
        if self.options.kind not in (None, "io", "cpu"):
            kind = self.options.kind
            raise ToolDefinitionError([f"tool {name!r}: kind {kind!r} is not 'io' or 'cpu'"])
        problems = _limit_problems(self.options)
        if problems:
            raise ToolDefinitionError([f"tool {name!r}: {p}" for p in problems])
        try:
            signature = describe_function(self.func, name, ToolContext)
        except ValueError as exc:
            raise ToolDefinitionError([f"tool {name!r} ({_where(self.func)}): {exc}"]) from exc
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "signature", signature)
        object.__setattr__(self, "_is_async", _is_async(self.func))

    @property
    def description(self) -> str:
        """What the model reads: the docstring's text, plus LONG_RUNNING_NOTE if long-running."""
        if self.is_long_running:
            return f"{self.signature.description}\n\n{LONG_RUNNING_NOTE}".strip()
        return self.signature.description

    @property
    def parameters_json_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments the model passes (a ToolContext parameter excluded)."""
        return self.signature.parameters_json_schema

    @property
    def is_async(self) -> bool:
        """Whether the function is a coroutine function (a worker runs it in an event loop)."""
        return self._is_async

    def declaration(self) -> dict[str, Any]:
        """The FunctionDeclaration sent to the model, as plain JSON."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters_json_schema": self.parameters_json_schema,
        }

    def validate(self, args: object) -> tuple[dict[str, Any], list[ArgumentProblem]]:
        """Check arguments against the signature: (Python values, problems).

        The orchestrator checks the model's arguments before dispatch, and the worker again.
        """
        return validate_arguments(self.signature.args_model, args)

    def renamed(self, name: str) -> FunctionTool:
        """The same tool under another name (toolset prefixes)."""
        return dataclasses.replace(self, name=name)


def LongRunningFunctionTool(  # named like ADK's class on purpose
    func: Callable[..., Any],
    *,
    name: str = "",
    options: ToolOptions | None = None,
    require_confirmation: bool | Callable[..., Any] = False,
    answered_by_user: bool = False,
) -> FunctionTool:
    """A tool that starts work and returns at once, typically {'status': 'pending', ...}.

    Args:
        func: The function that starts the work; the final result is posted later
            (`post_result`, or a job's `job_context.post_result`).
        name: The tool's name for the model; default: the function's name.
        options: How the fleet runs it; default: `ToolOptions()`.
        require_confirmation: True, or a function of the call's arguments saying whether
            a call needs a person's yes before it is sent.
        answered_by_user: Its final result is the session's user's answer (a choice they
            make): over HTTP that user may post it; otherwise only a service of the app
            (`service:<app>`) or an admin may.

    Returns:
        A FunctionTool with `is_long_running` set.

    Raises:
        ToolDefinitionError: The function cannot be a tool, saying why.
    """
    return FunctionTool(
        func,
        name,
        options or ToolOptions(),
        is_long_running=True,
        require_confirmation=require_confirmation,
        answered_by_user=answered_by_user,
    )


@overload
def tool(func: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    func: None = None,
    *,
    name: str = "",
    pool: str | None = None,
    timeout_s: float | None = None,
    retry_on: Iterable[type[BaseException]] = (),
    max_retries: int = 3,
    retry_backoff_s: float = 1.0,
    long_running: bool = False,
    kind: Literal["io", "cpu"] | None = None,
    require_confirmation: bool | Callable[..., Any] = False,
    max_concurrency: int | None = None,
    rate_limit: str | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str = "",
    pool: str | None = None,
    timeout_s: float | None = None,
    retry_on: Iterable[type[BaseException]] = (),
    max_retries: int = 3,
    retry_backoff_s: float = 1.0,
    long_running: bool = False,
    kind: Literal["io", "cpu"] | None = None,
    require_confirmation: bool | Callable[..., Any] = False,
    max_concurrency: int | None = None,
    rate_limit: str | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a function a tool the fleet runs: bare `@tool`, or `@tool(...)` with options.

    The function's name, docstring (Google style: `Args:` describe each parameter) and
    type hints are the declaration the model sees; a parameter `tool_context: ToolContext`
    is passed in by the worker and left out of it.

    Args:
        func: The function, when used bare (`@tool`); omitted with options.
        name: The tool's name for the model; default: the function's name.
        pool: The pool (Celery queue `tools.<pool>`) whose workers run it; default: the io
            pool for coroutine functions and `kind="io"`, else the default pool.
        timeout_s: Time limit of one call; default `TOOLFLEET_DEFAULT_TIMEOUT_S`.
        retry_on: Exceptions after which the worker runs the call again.
        max_retries: Most retries after the first run.
        retry_backoff_s: Wait before the first retry, doubled for each next one.
        long_running: The function starts work and returns at once; its final result is
            posted later (`LongRunningFunctionTool`).
        kind: `"io"` (many calls per worker process) or `"cpu"` (one per process).
        require_confirmation: True, or a function of the call's arguments saying whether
            this call needs a person's yes before it runs.
        max_concurrency: Most calls of this tool running at once across the whole fleet.
        rate_limit: Most calls started per period across the fleet: `"100/m"`, `"5/s"`.

    Returns:
        The `FunctionTool` (bare use), or a decorator that makes one (with options).

    Raises:
        ToolDefinitionError: The function cannot be a tool (a parameter type with no JSON
            schema, a name that is not an identifier, a nested function a worker cannot
            import, limits out of range), saying which and why.
    """
    options = ToolOptions(
        pool,
        timeout_s,
        tuple(retry_on),
        max_retries,
        retry_backoff_s,
        kind,
        max_concurrency=max_concurrency,
        rate_limit=rate_limit,
    )

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            f,
            name,
            options,
            is_long_running=long_running,
            require_confirmation=require_confirmation,
        )

    return wrap(func) if func is not None else wrap


@runtime_checkable
class ConvertsToTool(Protocol):
    """A tool object of another shape (a BaseTool subclass) that becomes a FunctionTool."""

    def as_function_tool(self) -> FunctionTool:
        """The FunctionTool that offers and runs it."""
        ...


def as_tool(obj: FunctionTool | ConvertsToTool | Callable[..., Any]) -> FunctionTool:
    """Wrap a plain function, convert a BaseTool; pass a FunctionTool through.

    Args:
        obj: A FunctionTool, an object with `as_function_tool()` (a BaseTool), or a
            function.

    Returns:
        `obj` itself if a FunctionTool, else the FunctionTool made of it.

    Raises:
        ToolDefinitionError: A function cannot be a tool, saying why.
    """
    if isinstance(obj, FunctionTool):
        return obj
    if isinstance(obj, ConvertsToTool):
        return obj.as_function_tool()
    return FunctionTool(obj)


@runtime_checkable
class ToolSource(Protocol):
    """Anything that can list every tool it may ever offer (agents, toolsets).

    Workers scan tool modules for these so that they can register every task.
    """

    def all_tools(self) -> Iterable[FunctionTool]:
        """Every tool it may ever offer, nested ones included; workers register each as a task."""
        ...


# What a worker does with a tool's calls beyond running its function: the same function
# under one name must be defined alike wherever it is offered.
_SERVED_AS = ("options", "is_long_running", "require_confirmation", "answered_by_user")


def _differences(one: FunctionTool, other: FunctionTool) -> list[str]:
    """The fields of `_SERVED_AS` two definitions of one tool differ in."""
    return [name for name in _SERVED_AS if getattr(one, name) != getattr(other, name)]


class ToolRegistry(Mapping[str, FunctionTool]):
    """Tools by name; two different functions under one name is a definition error."""

    def __init__(self, tools: Iterable[FunctionTool] = ()) -> None:
        self._tools: dict[str, FunctionTool] = {}
        problems = [p for t in tools if (p := self._add(t))]
        if problems:
            raise ToolDefinitionError(problems)

    def _add(self, new: FunctionTool) -> str | None:
        existing = self._tools.get(new.name)
        if existing is not None and existing.func is not new.func:
            return (
                f"duplicate tool name {new.name!r}: {_where(existing.func)} and "
                f"{_where(new.func)}; rename one (FunctionTool(func, name=...))"
            )
        differ = _differences(existing, new) if existing is not None else []
        if differ:
            # One name is one tool to a worker: it would run every call as one of them
            # (a confirmation required of one agent's calls, dropped for the other's).
            return (
                f"tool name {new.name!r} names {_where(new.func)} twice, with different "
                f"{', '.join(differ)}; give each a name of its own (FunctionTool(func, "
                "name=...)) or define the tool once"
            )
        self._tools[new.name] = new
        return None

    def __getitem__(self, name: str) -> FunctionTool:
        return self._tools[name]

    def __iter__(self) -> Any:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    # The dict's own: Mapping's mixins go through __getitem__ in Python (a turn looks up
    # its tools several times).
    def __contains__(self, name: object) -> bool:
        return name in self._tools

    @overload
    def get(self, name: str) -> FunctionTool | None: ...

    @overload
    def get(self, name: str, default: FunctionTool | _T) -> FunctionTool | _T: ...

    def get(self, name: str, default: Any = None) -> Any:
        """The tool named `name`, or `default`."""
        return self._tools.get(name, default)

    def keys(self) -> KeysView[str]:
        """The tools' names."""
        return self._tools.keys()

    def values(self) -> ValuesView[FunctionTool]:
        """The tools."""
        return self._tools.values()

    def items(self) -> ItemsView[str, FunctionTool]:
        """(name, tool) pairs."""
        return self._tools.items()


def not_importable(func: Callable[..., Any]) -> str | None:
    """Why a worker could not import `func` (a lambda, a nested function, a bound
    method), as a message saying what to do; None when it can."""
    where = _where(func)
    advice = (
        "a worker imports each tool by its name in its module: define it with `def` at "
        "the top level of a module"
    )
    if inspect.ismethod(func):
        return (
            f"tool {where} is a bound method; {advice} (it may call a method of an object "
            "created there)"
        )
    if getattr(func, "__name__", "") == "<lambda>":
        return f"tool {where} is a lambda; {advice}"
    if "<locals>" in getattr(func, "__qualname__", ""):
        return f"tool {where} is a nested function, defined inside another function; {advice}"
    return None


def _limit_problems(options: ToolOptions) -> list[str]:
    """What is wrong with a tool's fleet-wide limits, each saying what to write."""
    problems = []
    n = options.max_concurrency
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        problems.append(f"max_concurrency {n!r} must be a whole number of at least 1")
    if options.rate_limit is not None:
        try:
            parse_rate(str(options.rate_limit))
        except ValueError as exc:
            problems.append(str(exc))
    return problems


def _is_async(func: Callable[..., Any]) -> bool:
    """A coroutine function, a partial of one, or an object whose `__call__` is one."""
    if inspect.iscoroutinefunction(func):
        return True
    return not inspect.isroutine(func) and inspect.iscoroutinefunction(type(func).__call__)


def _where(func: Callable[..., Any]) -> str:
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', func)!s}"
