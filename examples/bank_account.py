"""A tool that needs the user's bearer token (ADK "Authentication": request_credential).

The first call asks the user for a token and pauses; once supplied
(`toolfleet tickets credential <call-id>`) the call runs again with it. The token is
kept encrypted for the user and reused by later calls until the API rejects it.

Run against your API: TOOLFLEET_EXAMPLE_API_URL=http://127.0.0.1:8765 \
    toolfleet run --agent examples.bank_account:agent "Balance of account ACC-1?"
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from typing import Any

from toolfleet import Agent, AuthConfig, Call, ScriptView, Step, ToolContext, say

BANK_AUTH = AuthConfig(
    key="bank_api",
    scheme="bearer",
    description="A personal access token for the bank API (Settings > Tokens).",
)


def get_account_balance(account_id: str, tool_context: ToolContext) -> dict[str, Any]:
    """Returns the balance of one of the user's bank accounts.

    Args:
        account_id: The account, e.g. "ACC-1".
    """
    token = tool_context.get_auth_response(BANK_AUTH)
    if token is None:
        tool_context.request_credential(BANK_AUTH)
        return {"status": "pending", "message": "waiting for the user's bank API token"}
    base = os.environ.get("TOOLFLEET_EXAMPLE_API_URL", "http://127.0.0.1:8765")
    request = urllib.request.Request(
        f"{base}/accounts/{account_id}/balance", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return {"status": "success", **json.load(response)}
    except urllib.error.HTTPError as exc:
        if exc.code == 401:  # the token was revoked or mistyped: ask again
            tool_context.request_credential(BANK_AUTH)
            return {"status": "pending", "message": "the token was rejected"}
        return {"status": "error", "error_message": f"bank API answered {exc.code}"}


_ACCOUNT = re.compile(r"ACC-\d+", re.IGNORECASE)


def _ask(view: ScriptView) -> Step:
    match = _ACCOUNT.search(view.user_text)
    return Step(
        calls=[Call("get_account_balance", {"account_id": match.group(0) if match else "ACC-1"})]
    )


def _answer(view: ScriptView) -> str:
    result = view.response("get_account_balance")
    if result.get("status") == "success":
        return f"Account {result['account_id']} holds {result['balance']} {result['currency']}."
    return f"I could not read the balance: {result.get('error_message')}"


agent = Agent(
    name="bank_agent",
    instruction="You answer questions about the user's bank accounts with get_account_balance.",
    description="Reads account balances with the user's own API token.",
    tools=[get_account_balance],
    offline_script=[_ask, say(_answer)],
)
