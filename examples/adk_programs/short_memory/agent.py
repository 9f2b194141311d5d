"""A chat agent that forgets everything before the user's latest message.

Exercises a before_model_callback that trims llm_request.contents in place (deleting
from the list rather than assigning a new one).
"""

from toolfleet.adk import Agent, CallbackContext, LlmRequest


def forget_earlier_turns(callback_context: CallbackContext, llm_request: LlmRequest) -> None:
    """Delete every content before the user's latest message."""
    contents = llm_request.contents
    assert isinstance(contents, list)  # a list on ADK; toolfleet types it a Sequence
    for index in range(len(contents) - 1, -1, -1):
        content = contents[index]
        if content.role == "user" and any(part.text for part in content.parts or ()):
            del contents[:index]
            return


root_agent = Agent(
    name="short_memory",
    model="gemini-2.0-flash",
    instruction="Answer the user's latest message.",
    before_model_callback=forget_earlier_turns,
)
