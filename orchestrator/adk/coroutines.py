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
from collections.abc import Callable
from typing import Any, TypeVar, cast

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
