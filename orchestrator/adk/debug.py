"""How ADK's `run_debug` prints an event: the author, then its text (and, verbose, its
calls and their results, cut short)."""

from __future__ import annotations

from toolfleet.orchestrator.sessions.events import Event

ARGS_MAX = 50  # characters of a call's arguments shown
RESPONSE_MAX = 100  # characters of a result shown


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def print_event(event: Event, *, verbose: bool = False) -> None:
    """Print `event` as ADK's run_debug does: consecutive text parts on one line after
    `author >`; calls and results only when `verbose`; thoughts never unless verbose."""
    if event.content is None or not event.content.parts:
        return
    texts: list[str] = []

    def flush() -> None:
        if texts:
            print(f"{event.author} > {''.join(texts)}")
            texts.clear()

    for part in event.content.parts:
        if part.thought and not verbose:
            continue
        if part.text:
            texts.append(part.text)
            continue
        flush()
        if verbose and part.function_call:
            args = _cut(str(part.function_call.args), ARGS_MAX)
            print(f"{event.author} > [Calling tool: {part.function_call.name}({args})]")
        elif verbose and part.function_response:
            result = _cut(str(part.function_response.response), RESPONSE_MAX)
            print(f"{event.author} > [Tool result: {result}]")
    flush()
