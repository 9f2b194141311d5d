"""A method that returns a coroutine object of its own, reported as a coroutine function.

ADK's session services are `async def`; older ADK's `create_session` was sync, and
programs written for it call it without `await` and read the result's `id`. A native
coroutine cannot carry that `id`, nor be made when never awaited, so `create_session`
returns a `collections.abc.Coroutine` of its own and is marked as a coroutine function:
`inspect.iscoroutinefunction` and `asyncio.iscoroutinefunction` say True, as they do
for ADK's, and `await`, `asyncio.run` and `asyncio.create_task` take what it returns.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar, cast

from toolfleet.orchestrator.sessions.session import Session

F = TypeVar("F", bound=Callable[..., Any])


class _CoroutineFunction:
    """`func`, function-like for `inspect`: the code it shows carries the coroutine flag
    (what Python 3.12's `inspect.markcoroutinefunction` marks with an attribute, which
    3.11's `inspect` does not read). That code is never run: calls go to `func`."""

    def __init__(self, func: Callable[..., Any]) -> None:
        functools.update_wrapper(self, func)
        code = func.__code__
        self.__code__ = code.replace(co_flags=code.co_flags | inspect.CO_COROUTINE)
        self.__defaults__ = func.__defaults__
        self.__kwdefaults__ = func.__kwdefaults__
        self._func = func

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._func(*args, **kwargs)

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        return self if instance is None else types.MethodType(self, instance)


def coroutine_function(func: F) -> F:
    """`func` (which returns a Coroutine) reported as a coroutine function."""
    return cast(F, _CoroutineFunction(func))


class SessionCreation(Coroutine[Any, Any, Session]):
    """What `create_session` returns: a coroutine for the Session, so `await`,
    `asyncio.run` and `asyncio.create_task` take it as ADK's. Made once, however often
    it is awaited; never awaited (older ADK's sync call), a Runner makes it when it
    first runs the session, and its `id` is the session's from the start."""

    def __init__(
        self, make: Callable[[], Awaitable[Session]], *, app_name: str, user_id: str, id: str
    ) -> None:
        self._make = make
        self._session: Session | None = None
        self._running: Generator[Any, None, Session] | None = None  # as a task's step
        self.app_name = app_name
        self.user_id = user_id
        self.id = id

    async def _made(self) -> Session:
        if self._session is None:
            self._session = await self._make()
        return self._session

    def __await__(self) -> Generator[Any, None, Session]:
        return self._made().__await__()

    def send(self, value: Any) -> Any:
        """A task's step: run the creation up to its next suspension."""
        if self._running is None:
            self._running = self.__await__()
        return self._running.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        """Raise `typ` where the creation is suspended (a task's cancellation)."""
        if self._running is None:
            self._running = self.__await__()
        if val is None and tb is None:
            return self._running.throw(typ)
        return self._running.throw(typ, val, tb)

    def close(self) -> None:
        """Stop a started creation; one never started has nothing to stop."""
        if self._running is not None:
            self._running.close()
