"""Artifacts and memory (ADK "ToolContext: artifacts, memory"): process_document.

Artifacts live in Redis, so a document saved by a tool on one worker is loaded by a
tool on another. search_memory is a plain word match over the user's past sessions.

Run: toolfleet run --agent examples.documents:agent "Save report.txt: revenue grew 12%"
"""

from __future__ import annotations

import re
from typing import Any

from google.genai import types

from toolfleet import Agent, Call, ScriptView, Step, ToolContext, say


async def save_document(document_name: str, text: str, tool_context: ToolContext) -> dict[str, Any]:
    """Stores a text document as an artifact (a new version each time).

    Args:
        document_name: The file name, e.g. "report.txt".
        text: The document's text.
    """
    version = await tool_context.save_artifact(document_name, types.Part.from_text(text=text))
    return {"status": "success", "document": document_name, "version": version}


async def process_document(
    document_name: str, analysis_query: str, tool_context: ToolContext
) -> dict[str, Any]:
    """Analyzes a document using context from memory.

    Args:
        document_name: The artifact to analyze, e.g. "report.txt".
        analysis_query: What to look for.
    """
    document_part = await tool_context.load_artifact(document_name)
    if document_part is None or document_part.text is None:
        return {"status": "error", "message": f"Document '{document_name}' not found."}
    memory = await tool_context.search_memory(
        f"Context for analyzing document about {analysis_query}"
    )
    memory_context = [m.text for m in memory.memories][:3]
    analysis = (
        f"Analysis of '{document_name}' ({len(document_part.text)} chars) regarding "
        f"'{analysis_query}' with {len(memory.memories)} related memories."
    )
    new_artifact_name = f"analysis_{document_name}"
    version = await tool_context.save_artifact(
        new_artifact_name, types.Part.from_text(text=analysis)
    )
    return {
        "status": "success",
        "analysis_artifact": new_artifact_name,
        "version": version,
        "memory_context": memory_context,
    }


async def list_documents(tool_context: ToolContext) -> dict[str, Any]:
    """Lists the documents (artifacts) of this session and of the user."""
    return {"documents": await tool_context.list_artifacts()}


_SAVE = re.compile(r"save\s+(\S+?):\s*(.+)", re.IGNORECASE | re.DOTALL)
_ANALYZE = re.compile(r"analy[sz]e\s+(\S+)\s+(?:for|about)\s+(.+)", re.IGNORECASE)


def _act(view: ScriptView) -> Step:
    if saved := _SAVE.search(view.user_text):
        return Step(
            calls=[Call("save_document", {"document_name": saved.group(1), "text": saved.group(2)})]
        )
    if analyze := _ANALYZE.search(view.user_text):
        args = {"document_name": analyze.group(1), "analysis_query": analyze.group(2)}
        return Step(calls=[Call("process_document", args)])
    return Step(calls=[Call("list_documents")])


def _report(view: ScriptView) -> str:
    ((tool, response),) = view.responses
    return f"{tool}: {response}"


agent = Agent(
    name="documents_agent",
    instruction="You save documents and analyze them with context from the user's history.",
    description="Saves and analyzes documents.",
    tools=[save_document, process_document, list_documents],
    offline_script=[_act, say(_report)],
)
