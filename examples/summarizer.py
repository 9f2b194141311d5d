"""An agent used as a tool (ADK "AgentTool" with skip_summarization).

`summary_agent` runs as a task on the `agents` pool with its own model loop; its own
tool (`count_words`) is dispatched to the `default` pool like any other call. With
skip_summarization the user gets its summary verbatim: no further model call.

Run: toolfleet run --agent examples.summarizer:root_agent "Quantum computing ..."
"""

from __future__ import annotations

from toolfleet import Agent, AgentTool, Call, ScriptView, Step, say


def count_words(text: str) -> dict[str, int]:
    """Counts the words and sentences of a text.

    Args:
        text: The text to measure.
    """
    sentences = sum(text.count(mark) for mark in ".!?") or 1
    return {"words": len(text.split()), "sentences": sentences}


def _measure(view: ScriptView) -> Step:
    return Step(calls=[Call("count_words", {"text": view.user_text})])


def _summary(view: ScriptView) -> str:
    counts = view.response("count_words")
    first_sentence = view.user_text.split(".")[0].strip()
    return f"Summary ({counts['words']} words, {counts['sentences']} sentences): {first_sentence}."


summary_agent = Agent(
    name="summary_agent",
    instruction=(
        "You are an expert summarizer. Please read the following text and provide a concise "
        "summary. Use count_words to report the text's length."
    ),
    description="Agent to summarize text",
    tools=[count_words],
    offline_script=[_measure, say(_summary)],
)


def _forward(view: ScriptView) -> Step:
    return Step(calls=[Call("summary_agent", {"request": view.user_text})])


def _present(view: ScriptView) -> str:
    return f"Here is the summary: {view.response('summary_agent')['result']}"


root_agent = Agent(
    name="root_agent",
    instruction=(
        "You are a helpful assistant. When the user provides a text, use the 'summary_agent' "
        "tool to generate a summary. Always forward the user's message exactly as received "
        "to the 'summary_agent' tool, without modifying or summarizing it yourself. Present "
        "the response from the tool to the user."
    ),
    tools=[AgentTool(agent=summary_agent, skip_summarization=True)],
    offline_script=[_forward],
)

# The same, with the model presenting the tool's answer (one model call more).
presenting_agent = Agent(
    name="presenting_agent",
    instruction=root_agent.instruction,
    tools=[AgentTool(agent=summary_agent)],
    offline_script=[_forward, say(_present)],
)
