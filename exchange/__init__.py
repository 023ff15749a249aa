"""exsim's matching engine: a numba price-time-priority book over batches of numpy messages.

>>> from exchange import Engine
>>> eng = Engine()
>>> jpm = eng.add_symbol("JPM")
>>> _ = eng.submit("JPM", "sell", price=101, qty=5, trader=1)
>>> res = eng.submit("JPM", "buy", price=102, qty=3, trader=2)
>>> int(res.fills["price"][0]), int(res.fills["qty"][0])
(101, 3)
"""

from .engine import Engine, Result
from .errors import (
    CorruptionError, ExsimError, InputError, StoreError, UsageError, VerificationError, WriteError,
)
from .schema import (
    CHECKPOINT_DTYPE, DEPTH_DTYPE, EVENT_DTYPE, FILL_DTYPE, L2_DTYPE, L3_DTYPE, MAX_LEVEL_QTY,
    MAX_PRICE, MAX_QTY, ORDER_DTYPE, TABLE_DTYPES, Event, Flag, Kind, OrderType, Reason, Side, Stp,
    Tif,
)

__all__ = [
    "Engine", "Result",
    "ORDER_DTYPE", "FILL_DTYPE", "L2_DTYPE", "EVENT_DTYPE", "L3_DTYPE", "CHECKPOINT_DTYPE",
    "DEPTH_DTYPE", "TABLE_DTYPES", "MAX_QTY", "MAX_PRICE", "MAX_LEVEL_QTY",
    "Side", "Kind", "OrderType", "Tif", "Flag", "Event", "Reason", "Stp",
    "ExsimError", "UsageError", "InputError", "StoreError", "CorruptionError", "WriteError",
    "VerificationError",
]
