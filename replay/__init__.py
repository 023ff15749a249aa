"""exsim replay: rebuild any stored book, verify deals against orders, prove determinism.

>>> from exsim.replay import book_at, verify, rerun, stats     # doctest: +SKIP
>>> view = book_at("data/run1", "JPM", seq=1_000)          # doctest: +SKIP

- ``book_at``  the L2 (or L3) book of a symbol after any message (replay/rebuild.py)
- ``verify``   independent checks of every fill against the orders and reports
  (replay/verification/)
- ``rerun``    the journaled orders through a fresh Engine, outputs compared byte for byte
- ``stats``    mid, spread, microprice, imbalance and VWAP series (replay/analytics.py)
- ``backtest`` a strategy's orders merged with market flow through one engine, with latency;
  ``sweep`` runs a parameter grid (serially or on Dask), ``whatif`` compares history with and
  without the strategy (replay/backtesting/)

Imports are lazy: ``import exsim.replay`` (and so ``exsim --help``) loads neither numba nor the store;
a name's module is imported on its first use (PEP 562 ``__getattr__`` over ``_EXPORTS``).
"""

from __future__ import annotations

import importlib

# public name -> submodule that defines it (the one table to extend; __all__ follows it)
_EXPORTS = {
    "book_at": "rebuild", "BookView": "rebuild",
    "rerun": "determinism", "RerunReport": "determinism", "Divergence": "determinism",
    "verify": "verification.run", "verify_arrays": "verification.run",
    "VerifyReport": "verification.report", "Violation": "verification.report",
    "stats": "analytics", "STATS_DTYPE": "analytics", "phase_stats": "analytics",
    "AUCTION_DTYPE": "analytics",
    "backtest": "backtesting.driver", "BacktestResult": "backtesting.result",
    "L2Flow": "backtesting.l2queue",
    "ConstantLatency": "backtesting.latency", "RandomLatency": "backtesting.latency",
    "RecordedLatency": "backtesting.latency", "SplitLatency": "backtesting.latency",
    "Strategy": "backtesting.strategy", "QuoteStrategy": "backtesting.strategy",
    "Context": "backtesting.strategy",
    "sweep": "backtesting.grid", "whatif": "backtesting.counterfactual",
    "WhatIf": "backtesting.counterfactual",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'replay' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value   # later lookups skip this hook
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
