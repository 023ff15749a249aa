"""exsim replay: rebuild any stored book, verify deals against orders, prove determinism.

>>> from replay import book_at, verify, rerun, stats     # doctest: +SKIP
>>> view = book_at("data/run1", "JPM", seq=1_000)          # doctest: +SKIP

- ``book_at``  the L2 (or L3) book of a symbol after any message (replay/book_at.py)
- ``verify``   independent checks of every fill against the orders and reports (replay/verify.py)
- ``rerun``    the journaled orders through a fresh Engine, outputs compared byte for byte
- ``stats``    mid, spread, microprice, imbalance and VWAP series (replay/analytics.py)
- ``backtest`` a strategy's orders merged with market flow through one engine, with latency;
  ``sweep`` runs a parameter grid (serially or on Dask), ``whatif`` compares history with and
  without the strategy (replay/backtest.py, sweep.py, whatif.py)

Imports are lazy: ``import replay`` (and so ``exsim --help``) loads neither numba nor the store;
a name's module is imported on its first use (PEP 562 ``__getattr__`` over ``_EXPORTS``).
"""

from __future__ import annotations

import importlib
import sys
import types

# public name -> submodule that defines it (the one table to extend; __all__ follows it)
_EXPORTS = {
    "book_at": "book_at", "BookView": "book_at",
    "rerun": "rerun", "RerunReport": "rerun", "Divergence": "rerun",
    "verify": "verify", "verify_arrays": "verify", "VerifyReport": "verify",
    "Violation": "verify",
    "stats": "analytics", "STATS_DTYPE": "analytics",
    "backtest": "backtest", "BacktestResult": "backtest_result", "L2Flow": "l2queue",
    "ConstantLatency": "latency", "RandomLatency": "latency", "RecordedLatency": "latency",
    "Strategy": "strategy", "QuoteStrategy": "strategy", "Context": "strategy",
    "sweep": "sweep", "whatif": "whatif", "WhatIf": "whatif",
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


class _Package(types.ModuleType):
    # why: three names are also submodules (book_at, rerun, verify); importing ``replay.verify``
    # makes the import system set the package attribute to the module, which would shadow the
    # function; the function wins, as it did when this package imported everything eagerly
    def __setattr__(self, name, value):
        if (isinstance(value, types.ModuleType) and _EXPORTS.get(name) == name
                and value.__name__ == f"{__name__}.{name}"):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
