"""What a tool's callable is called, what its docstring says, and its parameters' hints.

A tool may be a function, a `functools.partial` or an object with `__call__`, as in
ADK: each is named and documented the way ADK's FunctionTool names and documents it.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

_PARTIAL_DOC = inspect.getdoc(functools.partial)
_CALL_DOC = inspect.getdoc(type.__call__)


def callable_name(func: Callable[..., Any]) -> str:
    """A function's name; a partial's is its function's; an object's is its class's."""
    if isinstance(func, functools.partial) and not hasattr(func, "__name__"):
        return callable_name(func.func)
    return getattr(func, "__name__", None) or type(func).__name__


def callable_doc(func: Callable[..., Any]) -> str:
    """The docstring the model reads: a class's own (not inherited), a partial's
    function's, an object's class's or else its `__call__`'s."""
    if isinstance(func, type):
        own = func.__doc__
        return inspect.cleandoc(own) if isinstance(own, str) else ""
    doc = inspect.getdoc(func) or ""
    if isinstance(func, functools.partial) and doc == _PARTIAL_DOC:
        return callable_doc(func.func)
    if not doc and not inspect.isroutine(func):
        call_doc = inspect.getdoc(type(func).__call__) or ""
        doc = call_doc if call_doc != _CALL_DOC else ""
    return "" if doc == _CALL_DOC else doc


def parameter_hints(func: Callable[..., Any]) -> dict[str, Any]:
    """The parameters' resolved type hints (Annotated kept); the return hint is not
    needed, so one that cannot be resolved does not stop the parameters'.

    Raises NameError (or another exception of typing's) when a parameter's hint names
    something that does not exist.
    """
    target = _annotated_target(func)
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception:
        annotations = dict(getattr(target, "__annotations__", None) or {})
        annotations.pop("return", None)
        stand_in = types.FunctionType(
            _stand_in.__code__, getattr(target, "__globals__", None) or _module_globals(target)
        )
        stand_in.__annotations__ = annotations
        hints = typing.get_type_hints(stand_in, include_extras=True)
    hints.pop("return", None)
    return hints


def _annotated_target(func: Callable[..., Any]) -> Any:
    """The object whose `__annotations__` hold the parameters' hints."""
    while isinstance(func, functools.partial):
        func = func.func
    if inspect.isroutine(func) or isinstance(func, type):
        return func
    return type(func).__call__


def _module_globals(target: Any) -> dict[str, Any]:
    module = inspect.getmodule(target)
    return vars(module) if module is not None else {}


def _stand_in() -> None:
    """Carries the parameters' annotations when the return annotation cannot be resolved."""
