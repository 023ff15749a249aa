"""Every dtype and integer code exsim uses, declared once.

Invariants:
- Prices are int64 ticks, quantities int64 lots, timestamps int64 nanoseconds taken from the input.
  No floats below the Python surface.
- Enum values are small ints; kernels, the store and replay import them from here and nowhere
  redeclares a field or a code.
- Reason codes are grouped by range: 0 none; 1-31 validation rejects; 32-63 matching rejects;
  64-95 cancel causes; 96-127 why a symbol's phase changed. ``reason_group`` tells which range a
  code is in.
- Structured dtypes are packed (no padding bytes), so equal rows are equal bytes: outputs can be
  hashed, checksummed and compared with ``tobytes()`` however they were built (np.concatenate
  leaves padding uninitialised). Fields are laid out widest first; x86 loads unaligned fields at
  no measurable cost. The field list of each dtype is its wire and storage schema.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

__all__ = [
    "Side", "Kind", "OrderType", "Tif", "Flag", "Event", "Reason", "Stp", "Phase",
    "CALL_PHASES", "AUCTION_SIDE", "CALL_MARKET_PRICE",
    "ORDER_DTYPE", "FILL_DTYPE", "L2_DTYPE", "EVENT_DTYPE", "L3_DTYPE", "CHECKPOINT_DTYPE",
    "DEPTH_DTYPE",
    "MAX_QTY", "MAX_PRICE", "MAX_LEVEL_QTY", "KNOWN_FLAGS", "TABLE_DTYPES", "reason_group",
]


class Side(IntEnum):
    """Side of an order or a book level."""

    BUY = 0
    SELL = 1


class Kind(IntEnum):
    """What an order message asks for."""

    NEW = 0
    CANCEL = 1
    MODIFY = 2
    PHASE = 3    # move the symbol to the message's ``phase`` (docs/semantics.md, Trading phases)


class Phase(IntEnum):
    """A symbol's trading phase (docs/semantics.md, Trading phases). CONTINUOUS is 0, so a symbol
    that never gets a PHASE message, and every flow written before phases existed, is continuous.

    PRE_OPEN, PRE_CLOSE and REOPENING_AUCTION are *calls*: orders rest without matching and the
    engine publishes the indicative uncross. OPENING_AUCTION and CLOSING_AUCTION are never a
    resting state: as a PHASE message's target they mean "uncross now", then CONTINUOUS
    (opening) or CLOSED (closing); on an UNCROSS event they name which auction it was, as
    REOPENING_AUCTION does for the re-opening call."""

    CONTINUOUS = 0
    CLOSED = 1
    PRE_OPEN = 2
    OPENING_AUCTION = 3
    PRE_CLOSE = 4
    CLOSING_AUCTION = 5
    HALTED = 6
    REOPENING_AUCTION = 7


CALL_PHASES = frozenset({Phase.PRE_OPEN, Phase.PRE_CLOSE, Phase.REOPENING_AUCTION})


class OrderType(IntEnum):
    """LIMIT rests at its price; MARKET never rests and takes any price; STOP and STOP_LIMIT wait
    outside the book until the last trade price reaches ``stop_price``, then enter as a MARKET or
    a LIMIT at ``price``."""

    LIMIT = 0
    MARKET = 1
    STOP = 2
    STOP_LIMIT = 3


class Tif(IntEnum):
    """Time in force: GTC rests, IOC cancels what does not fill at once, FOK fills whole or not at
    all, DAY rests until the symbol's session close, GTD until the message's ``expire_ts``."""

    GTC = 0
    IOC = 1
    FOK = 2
    DAY = 3
    GTD = 4


class Flag(IntEnum):
    """Bits of the order message's ``flags`` field."""

    POST_ONLY = 1  # reject instead of crossing; only with LIMIT + GTC, DAY or GTD


KNOWN_FLAGS = int(Flag.POST_ONLY)


class Event(IntEnum):
    """Execution report kinds (one row of the events table each)."""

    ACCEPTED = 0   # a NEW passed validation; leaves_qty = its quantity
    REJECTED = 1   # the message changed nothing; reason says why; filled_qty = leaves_qty = 0
    PARTIAL = 2    # a fill left the order open; filled_qty is cumulative
    FILLED = 3     # a fill completed the order
    CANCELLED = 4  # the order left the book (or never rested); reason says why
    MODIFIED = 5   # a MODIFY was applied; leaves_qty = the new open quantity
    TRIGGERED = 6  # a pending stop was released into the book (as MARKET or LIMIT); leaves = qty
    # symbol events: order_id 0, ``phase`` and ``price`` as below
    PHASE = 7       # the symbol entered ``phase``; price = its reference price; reason says why
    INDICATIVE = 8  # in a call, the uncross changed: price (0: none), filled = volume that would
                    # execute, leaves = surplus at that price (> 0 buy side, < 0 sell side)
    UNCROSS = 9     # an auction executed: price, filled = volume, leaves = surplus as above;
                    # phase = which auction (OPENING_AUCTION, CLOSING_AUCTION, REOPENING_AUCTION)


class Reason(IntEnum):
    """Why an order was rejected or cancelled. Grouped by range (see module docstring)."""

    NONE = 0
    # 1-31: validation rejects (the message is malformed or names something that does not exist)
    BAD_KIND = 1
    UNKNOWN_SYMBOL = 2
    BAD_SIDE = 3
    BAD_ORDER_TYPE = 4
    BAD_TIF = 5
    BAD_FLAGS = 6
    BAD_QTY = 7            # qty <= 0 (a modify to 0 too: use CANCEL)
    BAD_PRICE = 8          # limit price <= 0
    PRICE_OUT_OF_BAND = 9  # limit price outside the symbol's [min_price, max_price]
    DUPLICATE_ID = 10      # order_id already live on this symbol
    UNKNOWN_ID = 11        # cancel/modify of an id that is not live on this symbol
    OVERFLOW = 12          # qty above MAX_QTY, or a level total would pass MAX_LEVEL_QTY
    NOT_OWNER = 13         # cancel/modify by a trader other than the order's (engine option)
    OFF_TICK = 14          # a price or stop price not on the symbol's tick table
    OFF_LOT = 15           # a quantity not a multiple of the symbol's lot size
    BELOW_MIN_QTY = 16     # a quantity below the symbol's minimum order quantity
    BAD_STOP_PRICE = 17    # a stop's stop_price <= 0, outside the band or off tick
    BAD_DISPLAY_QTY = 18   # display_qty < 0, > qty, off lot, or on an order that cannot rest
    BAD_EXPIRY = 19        # GTD whose expire_ts <= ts, or expire_ts on anything but GTD
    BAD_MIN_QTY = 20       # min_qty < 0, > qty, off lot, or on FOK or a stop
    BAD_PHASE = 21         # a PHASE message naming no Phase
    OUTSIDE_STATIC_BAND = 22  # limit price outside the static band around the reference price
    # 32-63: matching rejects (valid message, refused by the state of the book)
    POST_ONLY_WOULD_CROSS = 32
    FOK_CANNOT_FILL = 33
    STOP_PRICE_REACHED = 34   # buy stop at or below the last trade price (sell: at or above)
    MIN_QTY_CANNOT_FILL = 35  # less than min_qty would fill at once
    SYMBOL_CLOSED = 36        # NEW or MODIFY while the symbol is CLOSED
    SYMBOL_HALTED = 37        # NEW or MODIFY while the symbol is HALTED
    NOT_IN_CALL = 38          # IOC, FOK, POST_ONLY or min_qty during a call; MODIFY of a call MARKET
    # 64-95: why a live or incoming order was cancelled
    USER_CANCEL = 64
    NO_LIQUIDITY = 65      # a MARKET order's unfilled rest
    IOC_UNFILLED = 66      # an IOC order's unfilled rest
    SELF_TRADE = 67        # self-trade prevention removed it
    EXPIRED = 68           # a DAY or GTD order reached its expiry (engine clock = message ts)
    # 96-127: why a symbol's phase changed (PHASE events; NONE: a PHASE message)
    PRICE_BAND = 96        # a trade would have printed outside the dynamic band: re-opening auction
    AUCTION_END = 97       # a re-opening auction reached its end time and uncrossed


class Stp(IntEnum):
    """Self-trade prevention mode (an engine option); two orders self-trade when traders are equal."""

    NONE = 0
    CANCEL_RESTING = 1
    CANCEL_INCOMING = 2
    CANCEL_BOTH = 3


def reason_group(reason: int) -> str:
    """Return the range a reason code belongs to: 'none', 'validation', 'matching', 'cancel' or
    'phase'.

    Raises ValueError for a code outside every range.
    """
    if reason == 0:
        return "none"
    if 1 <= reason <= 31:
        return "validation"
    if 32 <= reason <= 63:
        return "matching"
    if 64 <= reason <= 95:
        return "cancel"
    if 96 <= reason <= 127:
        return "phase"
    raise ValueError(f"reason code {reason} is outside every range")


# Limits that keep every sum inside int64 (see docs/semantics.md, "Overflow").
MAX_QTY = 1 << 40         # largest quantity of one order
MAX_PRICE = 1 << 62       # largest price in ticks
MAX_LEVEL_QTY = 1 << 62   # largest total quantity resting at one price

# A MARKET order entered during a call rests until the uncross at this price of its side (BUY,
# SELL): beyond every limit price, so it has priority over every limit and its level is the best.
CALL_MARKET_PRICE = (MAX_PRICE + 1, 0)

AUCTION_SIDE = 2   # a fill's aggressor_side when an uncross made it (an auction has no aggressor)

ORDER_DTYPE = np.dtype(
    [
        ("ts", "<i8"),          # input timestamp, ns
        ("order_id", "<u8"),    # caller's id; unique among the live orders of a symbol
        ("price", "<i8"),       # limit price in ticks (ignored for MARKET, CANCEL)
        ("qty", "<i8"),         # lots (NEW: quantity; MODIFY: new open quantity)
        ("symbol", "<u4"),      # symbol id from Engine.add_symbol
        ("trader", "<u4"),      # account id (self-trade prevention compares it)
        ("kind", "u1"),         # Kind
        ("order_type", "u1"),   # OrderType
        ("tif", "u1"),          # Tif
        ("flags", "u1"),        # Flag bits
        ("side", "u1"),         # Side (ignored for CANCEL, MODIFY)
        # appended (not widest-first) so the 45-byte rows of older journals are a prefix
        ("stop_price", "<i8"),  # STOP / STOP_LIMIT trigger in ticks (MODIFY of a stop: new one)
        ("display_qty", "<i8"), # iceberg: largest quantity shown at once (0: all shown)
        ("min_qty", "<i8"),     # NEW: fill at least this much at once or reject (0: none)
        ("expire_ts", "<i8"),   # GTD: expiry timestamp, ns (0 for every other tif); PHASE to
                                # REOPENING_AUCTION: when it uncrosses (0: at a later PHASE)
        ("phase", "u1"),        # PHASE: the Phase to enter (0 on every other kind)
    ],
)

FILL_DTYPE = np.dtype(
    [
        ("seq", "<i8"),            # seq of the aggressing message
        ("ts", "<i8"),             # its timestamp
        ("trade_id", "<i8"),       # engine-wide, 1, 2, 3 ...
        ("price", "<i8"),          # the resting order's price
        ("qty", "<i8"),
        ("buy_order_id", "<u8"),
        ("sell_order_id", "<u8"),
        ("symbol", "<u4"),
        ("buy_trader", "<u4"),
        ("sell_trader", "<u4"),
        ("aggressor_side", "u1"),  # Side of the incoming order; AUCTION_SIDE for an uncross
    ],
)

L2_DTYPE = np.dtype(
    [
        ("seq", "<i8"),
        ("ts", "<i8"),
        ("price", "<i8"),
        ("qty", "<i8"),     # new total at the level; 0 removes the level
        ("symbol", "<u4"),
        ("count", "<i4"),   # orders at the level after the change
        ("side", "u1"),
    ],
)

EVENT_DTYPE = np.dtype(
    [
        ("seq", "<i8"),
        ("ts", "<i8"),
        ("order_id", "<u8"),
        ("filled_qty", "<i8"),  # cumulative over the order's life
        ("leaves_qty", "<i8"),  # open quantity after the event (0 once the order is done)
        ("symbol", "<u4"),
        ("event", "u1"),        # Event
        ("reason", "u1"),       # Reason
        # appended so the 37-byte rows of older stores are a prefix
        ("price", "<i8"),       # PARTIAL/FILLED: the fill's price; PHASE: the reference price;
                                # INDICATIVE/UNCROSS: the auction price; 0 otherwise
        ("phase", "u1"),        # the symbol's Phase after the event (UNCROSS: the auction)
    ],
)

# One live order as orders()/stops() report it (L3), in priority order.
L3_DTYPE = np.dtype(
    [
        ("order_id", "<u8"),
        ("price", "<i8"),       # limit price (0 for a pending STOP)
        ("qty", "<i8"),         # displayed open quantity (a pending stop: its whole quantity)
        ("filled", "<i8"),      # filled so far
        ("trader", "<u4"),
        ("side", "u1"),
        ("flags", "u1"),
        ("hidden", "<i8"),      # iceberg reserve not shown (open = qty + hidden)
        ("stop_price", "<i8"),  # a pending stop's trigger (0: not a stop)
        ("display_qty", "<i8"), # iceberg slice size (0: not an iceberg)
        ("expire_ts", "<i8"),   # when it expires (DAY: the session close computed at entry; 0: never)
        ("order_type", "u1"),   # OrderType (a released STOP_LIMIT rests as LIMIT, stop_price 0)
        ("tif", "u1"),
    ],
)

# A checkpoint row: an L3 row with its symbol and whether it is a pending stop, so one array
# holds every book and stop book of an engine.
CHECKPOINT_DTYPE = np.dtype(
    [
        ("order_id", "<u8"),
        ("price", "<i8"),
        ("qty", "<i8"),
        ("filled", "<i8"),
        ("symbol", "<u4"),
        ("trader", "<u4"),
        ("side", "u1"),
        ("flags", "u1"),
        ("hidden", "<i8"),
        ("stop_price", "<i8"),
        ("display_qty", "<i8"),
        ("expire_ts", "<i8"),
        ("order_type", "u1"),
        ("tif", "u1"),
        ("pending", "u1"),      # 1: a stop waiting for its trigger; 0: resting in the book
    ],
)

# One price level as Engine.depth reports it.
DEPTH_DTYPE = np.dtype([("price", "<i8"), ("qty", "<i8"), ("count", "<i8")])

# The four output/input tables the store journals, by name.
TABLE_DTYPES = {
    "orders": ORDER_DTYPE,
    "fills": FILL_DTYPE,
    "l2": L2_DTYPE,
    "events": EVENT_DTYPE,
}
