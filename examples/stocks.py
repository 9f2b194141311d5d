"""Stock price agent (ADK seed). Prices are a fixed table: no network.

Run: toolfleet run --agent examples.stocks:agent "Price of GOOG and MSFT?"
"""

from __future__ import annotations

import re

from toolfleet import Agent, Call, ScriptView, Step, say

# Deterministic quotes in USD, so examples and tests never depend on a market feed.
PRICES = {"AAPL": 227.52, "GOOG": 178.35, "MSFT": 431.10, "NVDA": 135.07, "AMZN": 201.44}


def get_stock_price(symbol: str) -> float | None:
    """Retrieves the current stock price for a given symbol.

    Args:
        symbol (str): The stock symbol (e.g., "AAPL", "GOOG").

    Returns:
        float: The current stock price, or None if an error occurs.
    """
    return PRICES.get(symbol.strip().upper())


_SYMBOL = re.compile(r"\b[A-Z]{2,5}\b")


def _quotes(view: ScriptView) -> Step:
    symbols = [s for s in _SYMBOL.findall(view.user_text) if s in PRICES] or ["GOOG"]
    return Step(calls=[Call("get_stock_price", {"symbol": s}) for s in dict.fromkeys(symbols)])


def _answer(view: ScriptView) -> str:
    return "; ".join(
        f"{name} → {r['result']}" if r.get("result") is not None else "price not found"
        for name, r in view.responses
    )


agent = Agent(
    name="stock_agent",
    instruction=(
        "You are an agent who retrieves stock prices. If a ticker symbol is provided, fetch "
        "the current price. If the symbol is invalid or data cannot be retrieved, inform the "
        "user that the stock price could not be found."
    ),
    description="Retrieves stock prices for ticker symbols.",
    tools=[get_stock_price],
    offline_script=[_quotes, say(_answer)],
)
