"""exsim's matching engine: a numba price-time-priority book over batches of numpy messages.

The rest of exsim relies on ``EngineProtocol`` (``exchange.protocol``: what store, replay and
the backtests call on an engine), ``Engine.state``/``Engine.grow`` (``exchange.state``: the book
arrays, for kernels that extend the engine) and ``exchange.checkpoint`` (the checkpoint layout's
one writer and parser); the other modules are the engine's own.

>>> from exsim.exchange import Engine
>>> eng = Engine()
>>> jpm = eng.add_symbol("JPM")
>>> _ = eng.submit("JPM", "sell", price=101, qty=5, trader=1)
>>> res = eng.submit("JPM", "buy", price=102, qty=3, trader=2)
>>> int(res.fills["price"][0]), int(res.fills["qty"][0])
(101, 3)
"""

import importlib

from .errors import (
    CorruptionError, ExsimError, InputError, StoreError, UsageError, VerificationError, WriteError,
)
from .ingest import ForeignField, RecordLayout
from .protocol import EngineProtocol, OutputBuffers, Result
from .schema import (
    AUCTION_SIDE, CALL_MARKET_PRICE, CALL_PHASES, CHECKPOINT_DTYPE, DEPTH_DTYPE, EVENT_DTYPE,
    FILL_DTYPE, L2_DTYPE, L3_DTYPE, MAX_LEVEL_QTY, MAX_PRICE, MAX_QTY, ORDER_DTYPE, TABLE_DTYPES,
    Event, Flag, Kind, OrderType, Phase, Reason, Side, Stp, Tif,
)

__all__ = [
    "Engine", "EngineProtocol", "Result", "OutputBuffers",
    "ORDER_DTYPE", "FILL_DTYPE", "L2_DTYPE", "EVENT_DTYPE", "L3_DTYPE", "CHECKPOINT_DTYPE",
    "DEPTH_DTYPE", "TABLE_DTYPES", "MAX_QTY", "MAX_PRICE", "MAX_LEVEL_QTY",
    "Side", "Kind", "OrderType", "Tif", "Flag", "Event", "Reason", "Stp", "Phase",
    "CALL_PHASES", "CALL_MARKET_PRICE", "AUCTION_SIDE",
    "ExsimError", "UsageError", "InputError", "StoreError", "CorruptionError", "WriteError",
    "VerificationError",
    "RecordLayout", "ForeignField",
]

# ``ShardedEngine`` (what ``Engine(threads=N)`` returns for N > 1) is importable from here but
# left out of __all__: users build it through ``Engine``.
# The engine pulls in numba (~0.4 s); loading it on first use keeps `exsim --help`, the error
# classes and the dtypes cheap for the CLI and for tools that only read the store.
_LAZY = {"Engine": ".engine", "ShardedEngine": ".shards"}


def __getattr__(name):
    """Return the lazily imported engine class `name`; raise AttributeError for unknown names."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
