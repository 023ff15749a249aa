"""The per-order calls: ``submit``, ``cancel``, ``modify`` and ``set_phase``, one message each.

``OrderCalls`` is a part of ``exchange.single.SingleEngine``: each call checks its Python
arguments (``exchange.arguments``), packs them into the engine's one-row message and matches it
through ``Processing._process_small``.

Invariants:
- A call's Result is byte for byte what ``process`` returns for the same one-row message.
- Misuse (an unknown symbol, side or phase, a value its message field cannot hold) raises
  UsageError naming the first bad argument (in a fixed order of checks, the same in the sharded
  engine's calls); values the field holds but the engine refuses come back as a REJECTED event.
- An automatic order id is never one live on the symbol, and the engine's next automatic id
  only grows.
"""

from __future__ import annotations

import numpy as np

from .arguments import I64, PHASES, SIDES, TIFS, TYPES, U32, U64, enum_arg, int_arg, is_bool
from .errors import UsageError
from .order_index import index_find
# _ROW: the struct layout of the one-row message (submit packs into the engine's row itself: a
# call less than Processing._message)
from .processing import _ROW, compiled_entry
from .protocol import Result
from .schema import Flag, Kind, OrderType, Phase, Side, Tif

__all__ = ["OrderCalls"]

_INDEX_FIND = None       # index_find's entry point, for (index, int symbol, uint64 order id)
_POST_ONLY = int(Flag.POST_ONLY)
_NEW = int(Kind.NEW)
_I64_MIN, _I64_MAX = I64
_U64_MAX = U64[1]
_U32_MAX = U32[1]
_setattr = object.__setattr__


def _index_find_entry(index, sid, order_id):
    """Return index_find's entry point for an engine index, a symbol and a uint64 order id."""
    global _INDEX_FIND
    _INDEX_FIND = compiled_entry(index_find, (index, sid, np.uint64(order_id)))
    return _INDEX_FIND


class OrderCalls:
    """The per-order calls of ``SingleEngine`` (see the module)."""

    def submit(self, symbol: str | int, side: str | int, *, qty: int, price: int = 0,
               order_type: str | int = "limit", tif: str | int = "gtc", post_only: bool = False,
               trader: int = 0, order_id: int | None = None, ts: int | None = None,
               stop_price: int = 0, display_qty: int = 0, min_qty: int = 0,
               expire_ts: int = 0) -> Result:
        """Send one NEW order; return its Result (same bytes as ``process`` on that message).

        Without ``order_id`` the engine takes its next id not live on the symbol. ``ts``
        defaults to 0. ``stop_price``: a STOP or STOP_LIMIT's trigger; ``display_qty``: an
        iceberg's shown size (0: all shown); ``min_qty``: fill at least this much at once or
        reject (0: none); ``expire_ts``: a GTD order's expiry (ns, message clock). Raises
        UsageError for an unknown symbol, side, order type or tif (name or code), or an argument
        its message field cannot hold: qty, price, ts, stop_price, display_qty, min_qty and
        expire_ts must be integers in int64, order_id in uint64, trader in uint32 (ints, numpy
        integers or integral floats; never bool), post_only a bool. Values the field holds but
        the engine refuses (qty <= 0, a price out of band ...) are not errors: they come back as
        a REJECTED event.
        """
        sid = self.symbol_id(symbol)
        # checked in a fixed order, so a UsageError always names the same first bad argument;
        # each int check inline first (a call per argument was a third of submit's cost)
        side = enum_arg(SIDES, Side, side, "side")
        order_type = enum_arg(TYPES, OrderType, order_type, "order_type")
        tif = enum_arg(TIFS, Tif, tif, "tif")
        if type(trader) is not int or not 0 <= trader <= _U32_MAX:
            trader = int_arg(trader, "trader", *U32)
        if type(stop_price) is not int or not _I64_MIN <= stop_price <= _I64_MAX:
            stop_price = int_arg(stop_price, "stop_price", *I64)
        if type(display_qty) is not int or not _I64_MIN <= display_qty <= _I64_MAX:
            display_qty = int_arg(display_qty, "display_qty", *I64)
        if type(min_qty) is not int or not _I64_MIN <= min_qty <= _I64_MAX:
            min_qty = int_arg(min_qty, "min_qty", *I64)
        if type(expire_ts) is not int or not _I64_MIN <= expire_ts <= _I64_MAX:
            expire_ts = int_arg(expire_ts, "expire_ts", *I64)
        if type(qty) is not int or not _I64_MIN <= qty <= _I64_MAX:
            qty = int_arg(qty, "qty", *I64)
        if type(price) is not int or not _I64_MIN <= price <= _I64_MAX:
            price = int_arg(price, "price", *I64)
        if ts is None:
            ts = 0
        elif type(ts) is not int or not _I64_MIN <= ts <= _I64_MAX:
            ts = int_arg(ts, "ts", *I64)
        if post_only is False:
            flags = 0
        elif is_bool(post_only) or (type(post_only) is int and post_only in (0, 1)):
            flags = _POST_ONLY if post_only else 0
        else:
            raise UsageError(f"post_only must be a bool; got {post_only!r}")
        if order_id is None:
            order_id = self._next_auto_id
            find = _INDEX_FIND or _index_find_entry(self._index, sid, order_id)
            while order_id <= _U64_MAX and find(self._index, sid, order_id) >= 0:
                order_id += 1
            if order_id > _U64_MAX:
                raise UsageError("no automatic order id is left below 2^64 on "
                                 f"{self._names[sid]!r}; pass order_id")
            _setattr(self, "_next_auto_id", order_id + 1)   # not a cached argument
        elif type(order_id) is not int or not 0 <= order_id <= _U64_MAX:
            order_id = int_arg(order_id, "order_id", *U64)
        row = self._row
        if row is None:
            return self._process_small(self._message(
                _NEW, sid, order_id, price, qty, ts, trader, side, order_type, tif, flags,
                stop_price, display_qty, min_qty, expire_ts))
        _ROW.pack_into(row[1], 0, ts, order_id, price, qty, sid, trader, _NEW, order_type, tif,
                       flags, side, stop_price, display_qty, min_qty, expire_ts, 0)
        return self._process_small(row[0])     # _message, inline (a call less)

    def cancel(self, symbol: str | int, order_id: int, *, trader: int = 0,
               ts: int | None = None) -> Result:
        """Cancel a live order for ``trader``; return the Result (a REJECTED event if it is not
        live, or NOT_OWNER if ownership is on and ``trader`` is not the order's).

        Raises UsageError for an unknown symbol, an order_id that is not an integer in uint64,
        a trader not in uint32 or a ts that is not an integer in int64."""
        sid = self.symbol_id(symbol)
        order_id = int_arg(order_id, "order_id", *U64)
        return self._process_small(self._message(Kind.CANCEL, sid, order_id, 0, 0,
                                                 self._ts_arg(ts),
                                                 trader=int_arg(trader, "trader", *U32)))

    def modify(self, symbol: str | int, order_id: int, *, price: int, qty: int,
               trader: int = 0, ts: int | None = None, stop_price: int = 0) -> Result:
        """Change a live order's price and open quantity (displayed plus reserve), and a pending
        stop's ``stop_price``, for ``trader``; return the Result (see semantics.md, MODIFY;
        NOT_OWNER if ownership is on and ``trader`` is not the order's).

        Raises UsageError for an unknown symbol or an argument its field cannot hold (order_id
        uint64; price, qty, ts, stop_price int64; trader uint32); refused values in range come
        back as a REJECTED event."""
        sid = self.symbol_id(symbol)
        order_id = int_arg(order_id, "order_id", *U64)
        price, qty = int_arg(price, "price", *I64), int_arg(qty, "qty", *I64)
        return self._process_small(self._message(
            Kind.MODIFY, sid, order_id, price, qty, self._ts_arg(ts),
            trader=int_arg(trader, "trader", *U32),
            stop_price=int_arg(stop_price, "stop_price", *I64)))

    def set_phase(self, symbol: str | int, phase: str | int, *, ts: int | None = None,
                  reference_price: int = 0, end_ts: int = 0) -> Result:
        """Send one PHASE message moving ``symbol`` to ``phase`` (a Phase, its name or code);
        return its Result (same bytes as ``process`` on that message): the uncross when the
        target ends an auction, the PHASE event, the indicative of a call it enters.
        ``reference_price`` > 0 sets the reference price first (0 keeps it); ``end_ts``: with
        target REOPENING_AUCTION, when it uncrosses (0: at a later PHASE message).

        Raises UsageError for an unknown symbol or phase, or an argument its field cannot hold
        (reference_price, ts, end_ts int64); refused values in range (a negative price, an end
        not after ``ts`` ...) come back as a REJECTED event."""
        sid = self.symbol_id(symbol)
        code = enum_arg(PHASES, Phase, phase, "phase")
        price = int_arg(reference_price, "reference_price", *I64)
        return self._process_small(self._message(Kind.PHASE, sid, 0, price, 0,
                                                 self._ts_arg(ts), phase=code,
                                                 expire_ts=int_arg(end_ts, "end_ts", *I64)))

    @staticmethod
    def _ts_arg(ts) -> int:
        """Return ``ts`` as an int64 (None: 0). Raises UsageError as ``int_arg`` does."""
        return 0 if ts is None else int_arg(ts, "ts", *I64)

