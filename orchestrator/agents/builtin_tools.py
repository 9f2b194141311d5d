"""Gemini's built-in tools, as ADK passes them: `google_search`, `url_context` in an
agent's tools and `code_executor=BuiltInCodeExecutor()`.

Gemini runs them itself: each goes in the request's tools as a `types.Tool` of its
kind (never a function declaration), and nothing of them is dispatched to the fleet.
A model other than Gemini gets them in `ModelRequest.config.tools` and may ignore them
(the offline model does).
"""

from __future__ import annotations

from google.genai import types

from toolfleet.shared.errors import ConfigError


class BuiltInTool:
    """A tool the model runs itself; `gemini_tool()` is what the request carries."""

    def __init__(self, name: str, description: str) -> None:
        self.name = name
        self.description = description

    def gemini_tool(self) -> types.Tool:
        """The `types.Tool` that offers this tool to Gemini."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class GoogleSearchTool(BuiltInTool):
    """ADK's `google_search`: Gemini searches Google (`types.Tool(google_search=...)`).

    Args:
        bypass_multi_tools_limit: Refused when True: give a sub-agent `google_search`
            and offer it as an AgentTool instead.
        model: Refused when set: the search runs with the agent's own model.

    Raises:
        ConfigError: `bypass_multi_tools_limit` or `model` is given, saying what to do.
    """

    def __init__(self, *, bypass_multi_tools_limit: bool = False, model: str | None = None):
        super().__init__("google_search", "google_search")
        if bypass_multi_tools_limit or model is not None:
            # ADK answers those with a search agent of its own, run as an AgentTool.
            raise ConfigError(
                "GoogleSearchTool(bypass_multi_tools_limit=..., model=...) is not taken: "
                "use google_search with the agent's model, or give a sub-agent "
                "tools=[google_search] and offer it as an AgentTool"
            )
        self.bypass_multi_tools_limit = False
        self.model: str | None = None

    def gemini_tool(self) -> types.Tool:
        """`types.Tool(google_search=types.GoogleSearch())`."""
        return types.Tool(google_search=types.GoogleSearch())


class UrlContextTool(BuiltInTool):
    """ADK's `url_context`: Gemini reads the URLs in the conversation
    (`types.Tool(url_context=...)`)."""

    def __init__(self) -> None:
        super().__init__("url_context", "url_context")

    def gemini_tool(self) -> types.Tool:
        """`types.Tool(url_context=types.UrlContext())`."""
        return types.Tool(url_context=types.UrlContext())


class BuiltInCodeExecutor:
    """ADK's: Gemini runs the code it writes (`types.Tool(code_execution=...)`); its
    executable_code and code_execution_result parts stay in the agent's turn."""

    def gemini_tool(self) -> types.Tool:
        """The `types.Tool` that turns on Gemini's code execution."""
        return types.Tool(code_execution=types.ToolCodeExecution())

    def __repr__(self) -> str:
        return "BuiltInCodeExecutor()"


google_search = GoogleSearchTool()
url_context = UrlContextTool()


def search_without_functions(tools: list[BuiltInTool], model_name: str) -> str | None:
    """ADK's rule for an agent that may transfer: a Gemini model before 3 takes no
    built-in search next to function declarations (the API answers 400). The message
    if `tools` hold google_search and `model_name` is such a model; None otherwise (a
    model not named gemini-*, such as the offline one, is not checked)."""
    if not any(isinstance(t, GoogleSearchTool) for t in tools):
        return None
    name = gemini_name(model_name)
    if name is None:
        return None
    major = name.removeprefix("gemini-").split("-", 1)[0].split(".", 1)[0]
    if major.isdigit() and int(major) >= 3:
        return None
    return (
        f"google_search cannot go with transfer_to_agent on {name}: Gemini models before "
        "3.0 do not allow built-in search tools to be combined with function calling "
        "(agent delegation). Use a Gemini 3+ model, or give a sub-agent "
        "tools=[google_search] and offer it as an AgentTool"
    )


def gemini_name(model_name: str) -> str | None:
    """The Gemini model id in `model_name` ("gemini-2.5-flash" in itself, in
    ".../models/gemini-2.5-flash" or in LiteLLM's "gemini/gemini-2.5-flash"), as ADK
    reads it; None if it names no Gemini model."""
    name = model_name.rsplit("/", 1)[-1]
    return name if name.startswith("gemini-") else None


def not_for_model(agent_name: str, tools: list[types.Tool], model_name: str) -> str | None:
    """ADK's refusal of Gemini's built-in tools on a model that is not Gemini (a BaseLlm
    such as LiteLlm would drop them unsaid); None for a Gemini model."""
    if gemini_name(model_name) is not None:
        return None
    kinds = [
        k
        for t in tools
        for k in ("google_search", "url_context", "code_execution")
        if getattr(t, k)
    ]
    return (
        f"agent {agent_name!r}: {', '.join(kinds)} run in Gemini and are not supported for "
        f"model {model_name}: use a Gemini model for this agent, or leave them out"
    )
