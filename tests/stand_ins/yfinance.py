"""A stand-in for yfinance (no network in tests): `Ticker(symbol).history(period=...)`
returns a frame-like object with `empty` and `["Close"].iloc[-1]`, as the stock price
examples use it. Tests put this directory first on the import path."""

from __future__ import annotations

from typing import Any

PRICES = {"GOOG": 175.25, "AAPL": 229.5}


class _Column:
    def __init__(self, values: list[float]) -> None:
        self.iloc = values


class _History:
    def __init__(self, closes: list[float]) -> None:
        self.empty = not closes
        self._closes = closes

    def __getitem__(self, column: str) -> _Column:
        if column != "Close":
            raise KeyError(column)
        return _Column(self._closes)


class Ticker:
    """A ticker whose history is the fixed price of PRICES, or empty for other symbols."""

    def __init__(self, symbol: str) -> None:
        self.symbol = symbol

    def history(self, period: str = "1mo", **_: Any) -> _History:
        """The day's close, as a one-row history."""
        price = PRICES.get(self.symbol.upper())
        return _History([] if price is None else [price])
