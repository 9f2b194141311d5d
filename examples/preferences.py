"""User preferences in `user:` state (ADK "ToolContext: state"), read back by the
instruction template `{user:preferences?}` in every later session of the user.

Run: toolfleet run --agent examples.preferences:agent "Please use the dark theme"
"""

from __future__ import annotations

import re
from typing import Any

from toolfleet import Agent, Call, ScriptView, Step, ToolContext, say


def update_user_preference(
    preference: str, value: str, tool_context: ToolContext
) -> dict[str, Any]:
    """Updates a user-specific preference.

    Args:
        preference: The preference's name, e.g. "theme".
        value: Its new value, e.g. "dark".
    """
    user_prefs_key = "user:preferences"
    preferences = dict(tool_context.state.get(user_prefs_key) or {})
    preferences[preference] = value
    tool_context.state[user_prefs_key] = preferences
    return {"status": "success", "updated_preference": preference}


_SETTING = re.compile(r"(\w+)\s+(theme|language|units)", re.IGNORECASE)


def _update(view: ScriptView) -> Step:
    match = _SETTING.search(view.user_text)
    value, preference = (match.group(1), match.group(2)) if match else ("dark", "theme")
    return Step(
        calls=[
            Call(
                "update_user_preference", {"preference": preference.lower(), "value": value.lower()}
            )
        ]
    )


agent = Agent(
    name="preferences_agent",
    instruction=(
        "You remember how the user likes things. Known preferences: {user:preferences?}. "
        "When the user states a preference, save it with update_user_preference."
    ),
    description="Remembers user preferences across sessions.",
    tools=[update_user_preference],
    offline_script=[_update, say("Saved. I will remember that in your next sessions too.")],
)
