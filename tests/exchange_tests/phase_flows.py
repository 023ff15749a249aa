"""Message builders and hypothesis strategies for trading-phase flows (issue 16).

A flow is an ORDER_DTYPE array. The builders write every field by name (``phase`` included), so
a message reads as what it means: ``new(1, BUY, 101, 5)``, ``market(2, SELL, 3)``,
``to_phase(Phase.OPENING_AUCTION, price=100)``. The strategies draw flows that reach every rule
of docs/semantics.md "Trading phases, auctions and price bands" often: calls with crossed books,
market orders, icebergs and equal sizes (ties on volume and surplus), PHASE messages to every
target (and invalid ones), reference prices inside and outside the auction range, halts during a
call, dynamic band breaches whose re-opening auctions end by time within the flow, DAY and GTD
orders expiring during calls, and stops pending across an uncross.

Invariants of every drawn flow: timestamps never step back; every message of one
``(symbol, order_id)`` carries the trader of the NEW that entered it (ownership never refuses),
except where a test asks otherwise.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from exsim.exchange.schema import MAX_PRICE, ORDER_DTYPE, Kind, OrderType, Phase, Side, Tif

BUY, SELL = Side.BUY, Side.SELL
DAY_NS = 86_400 * 10**9
SESSION_CLOSE = 3_600 * 10**9
# flows start a little before a session close of symbol B, so DAY orders expire mid-flow
T0 = 20_000 * DAY_NS + SESSION_CLOSE - 200
INTERRUPTION_NS = 8
# A: no bands, starts in the pre-open call with a reference price; B: static band [95, 105]
# around 100, dynamic band of 2 % (+-2 at 100) with short interruptions, DAY close mid-flow.
PHASE_SYMBOLS = [
    ("A", 1, MAX_PRICE, dict(reference_price=100, phase="pre_open")),
    ("B", 90, 110, dict(reference_price=100, static_band_bps=500, dynamic_band_bps=200,
                        interruption_ns=INTERRUPTION_NS, session_close=SESSION_CLOSE)),
]
UNKNOWN_SYMBOL = len(PHASE_SYMBOLS)


# ---- builders -------------------------------------------------------------------------------------

def message(**fields):
    """One ORDER_DTYPE row (a 1-element array); fields not given are 0."""
    row = np.zeros(1, ORDER_DTYPE)
    for name, value in fields.items():
        row[name] = value
    return row


def new(order_id, side, price, qty, **kw):
    """A NEW LIMIT GTC (override with order_type=, tif=, ...) of trader 1 on symbol 0."""
    return message(kind=Kind.NEW, order_id=order_id, side=side, price=price, qty=qty,
                   **{"trader": 1, **kw})


def market(order_id, side, qty, **kw):
    """A NEW MARKET GTC (the tif a market order may rest with during a call)."""
    return new(order_id, side, 0, qty, order_type=OrderType.MARKET, **kw)


def cancel(order_id, **kw):
    return message(kind=Kind.CANCEL, order_id=order_id, **{"trader": 1, **kw})


def modify(order_id, price, qty, **kw):
    return message(kind=Kind.MODIFY, order_id=order_id, price=price, qty=qty,
                   **{"trader": 1, **kw})


def to_phase(phase, *, price=0, end=0, **kw):
    """A PHASE message: enter `phase` (a Phase or any code), new reference `price` (0 keeps it),
    re-opening end `end` (0: none)."""
    return message(kind=Kind.PHASE, phase=int(phase), price=price, expire_ts=end, **kw)


def chain(*rows, t0=0, dt=0):
    """Concatenate rows into one flow; with `dt`, message k gets ts = t0 + k * dt."""
    out = np.concatenate(rows) if rows else np.zeros(0, ORDER_DTYPE)
    if dt:
        out["ts"] = t0 + dt * np.arange(len(out))
    return out


# ---- strategies -----------------------------------------------------------------------------------

_TARGETS = [Phase.PRE_OPEN, Phase.OPENING_AUCTION, Phase.CONTINUOUS, Phase.CONTINUOUS,
            Phase.PRE_CLOSE, Phase.CLOSING_AUCTION, Phase.HALTED, Phase.REOPENING_AUCTION,
            Phase.CLOSED, Phase.PRE_OPEN, Phase.REOPENING_AUCTION, Phase.OPENING_AUCTION]


@st.composite
def phase_messages(draw):
    """One message of a phase flow as a dict of ORDER_DTYPE fields plus `dt` (the ts step) and
    `ttl` (a GTD's expiry, or a re-opening end, relative to its ts). PHASE messages get
    reference prices 0 (keep), near the book, far from it, negative or out of B's band."""
    k = draw(st.integers(0, 39))
    kind = (Kind.NEW if k < 24 else Kind.CANCEL if k < 28 else Kind.MODIFY if k < 32
            else Kind.PHASE)
    s = draw(st.integers(0, 20))
    symbol = 0 if s < 10 else 1 if s < 20 else UNKNOWN_SYMBOL
    m = dict(kind=kind, symbol=symbol, order_id=draw(st.integers(1, 12)),
             trader=draw(st.integers(1, 3)), side=draw(st.sampled_from([BUY, SELL])),
             price=draw(st.integers(97, 103)), qty=draw(st.sampled_from([1, 2, 2, 3, 4, 5])),
             order_type=OrderType.LIMIT, tif=Tif.GTC, flags=0, stop_price=0, display_qty=0,
             min_qty=0, expire_ts=0, phase=0,
             dt=draw(st.sampled_from([0, 1, 1, 2, 3, 10])),
             ttl=draw(st.sampled_from([0, 1, 2, 4, 8, 30])))
    if kind == Kind.PHASE:
        m["phase"] = draw(st.sampled_from(_TARGETS)) if draw(st.integers(0, 19)) else \
            draw(st.sampled_from([8, 255]))
        # a reference price now and then, sometimes far from the book (outside the range)
        m["price"] = draw(st.sampled_from([0, 0, 0, 99, 100, 101, 95, 107, -1, 200]))
        m["qty"] = m["order_id"] = 0
        return m
    t = draw(st.integers(0, 19))
    m["order_type"] = (OrderType.LIMIT if t < 12 else OrderType.MARKET if t < 15
                       else OrderType.STOP if t < 17 else OrderType.STOP_LIMIT)
    if m["order_type"] == OrderType.LIMIT:
        m["tif"] = draw(st.sampled_from([Tif.GTC, Tif.GTC, Tif.GTC, Tif.DAY, Tif.GTD, Tif.IOC,
                                         Tif.FOK]))
    elif m["order_type"] == OrderType.MARKET:
        m["tif"] = draw(st.sampled_from([Tif.GTC, Tif.GTC, Tif.IOC, Tif.FOK]))
    else:
        m["tif"] = draw(st.sampled_from([Tif.GTC, Tif.DAY, Tif.GTD, Tif.IOC]))
        m["stop_price"] = draw(st.integers(97, 103))
    extra = draw(st.integers(0, 9))
    rests = m["order_type"] == OrderType.LIMIT and m["tif"] in (Tif.GTC, Tif.DAY, Tif.GTD)
    if rests and extra < 3:
        m["display_qty"] = draw(st.integers(1, 2))
    elif rests and extra == 3:
        m["flags"] = 1                                     # POST_ONLY: refused in a call
    elif m["order_type"] in (OrderType.LIMIT, OrderType.MARKET) and m["tif"] != Tif.FOK \
            and extra == 4:
        m["min_qty"] = draw(st.integers(1, m["qty"]))      # refused in a call
    if symbol == 1 and draw(st.integers(0, 9)) == 0:
        m["price"] = draw(st.sampled_from([92, 94, 106, 108]))   # outside the static band
    return m


def phase_orders(msgs, t0=T0):
    """Phase message dicts as an ORDER_DTYPE array: ts advance by each `dt` from `t0`; a GTD
    expires `ttl` (at least 1) after its ts; a PHASE to REOPENING_AUCTION with `ttl` ends that
    long after its ts (other targets with `ttl` 30 get an end too, which they refuse); cancels and modifies of an id never entered aim at the last NEW instead;
    every message of a (symbol, id) carries its owner's trader; half the modifies keep the price
    of the last NEW of their id."""
    out = np.zeros(len(msgs), ORDER_DTYPE)
    last, ts = {}, t0
    for row, m in zip(out, msgs):
        ts += m["dt"]
        m = {**m, "ts": ts}
        if m["kind"] == Kind.NEW and m["tif"] == Tif.GTD:
            m["expire_ts"] = ts + max(m["ttl"], 1)
        if m["kind"] == Kind.PHASE and m["ttl"] and (m["phase"] == Phase.REOPENING_AUCTION
                                                     or m["ttl"] == 30):
            m["expire_ts"] = ts + m["ttl"]   # an end on another target: BAD_EXPIRY
        key = (m["symbol"], m["order_id"])
        if m["kind"] in (Kind.CANCEL, Kind.MODIFY) and key not in last and last:
            key = next(reversed(last))
            m["symbol"], m["order_id"] = key
        if m["kind"] == Kind.NEW:
            m["trader"] = last[key]["trader"] if key in last else m["trader"]
            last.pop(key, None)
            last[key] = m
        elif key in last:
            m["trader"] = last[key]["trader"]
            if m["kind"] == Kind.MODIFY and m["ttl"] % 2 == 0:
                m["price"], m["stop_price"] = last[key]["price"], last[key]["stop_price"]
        for f in ORDER_DTYPE.names:
            row[f] = m[f]
    return out


def phase_flows(min_size=10, max_size=50):
    """Random phase flows over PHASE_SYMBOLS (see `phase_messages`)."""
    return st.lists(phase_messages(), min_size=min_size, max_size=max_size).map(phase_orders)


@st.composite
def call_auctions(draw):
    """One call and its uncross on symbol A, then a little continuous trading: a few orders
    (limits of equal sizes around 100, market orders, icebergs, DAY/GTD orders expiring in the
    call, cancels and modifies), maybe a halt and a resumed call, maybe a new reference price
    inside or outside the auction range, then the end of the call (OPENING_AUCTION, CONTINUOUS
    or CLOSED), then a few continuous orders."""
    rows, oid, ts = [], 0, T0

    def step(row):
        nonlocal ts
        ts += draw(st.sampled_from([1, 1, 2, 5]))
        row["ts"] = ts
        rows.append(row)

    for _ in range(draw(st.integers(1, 12))):
        oid += 1
        side = draw(st.sampled_from([BUY, SELL]))
        qty = draw(st.sampled_from([1, 2, 2, 3, 5]))
        t = draw(st.integers(0, 9))
        trader = draw(st.integers(1, 3))
        if t < 2:
            step(market(oid, side, qty, trader=trader))
        else:
            display = draw(st.sampled_from([0, 0, 0, 1, 2])) if t < 8 else 0
            tif = Tif.GTC if t < 8 else draw(st.sampled_from([Tif.DAY, Tif.GTD]))
            step(new(oid, side, draw(st.integers(98, 102)), qty, trader=trader,
                     display_qty=min(display, qty), tif=tif))
            if tif == Tif.GTD:
                rows[-1]["expire_ts"] = rows[-1]["ts"] + draw(st.integers(1, 6))
        if draw(st.integers(0, 5)) == 0:
            target = draw(st.integers(1, oid))
            owner = int(next(r["trader"][0] for r in rows if r["order_id"][0] == target))
            if draw(st.booleans()):
                step(cancel(target, trader=owner))
            else:
                step(modify(target, draw(st.integers(98, 102)), draw(st.integers(1, 5)),
                            trader=owner))
    if draw(st.integers(0, 3)) == 0:   # a halt suspends the call, then the call resumes
        step(to_phase(Phase.HALTED))
        step(to_phase(draw(st.sampled_from([Phase.PRE_OPEN, Phase.REOPENING_AUCTION]))))
    step(to_phase(draw(st.sampled_from([Phase.OPENING_AUCTION, Phase.OPENING_AUCTION,
                                        Phase.CONTINUOUS, Phase.CLOSED])),
                  price=draw(st.sampled_from([0, 0, 97, 99, 100, 101, 103]))))
    for _ in range(draw(st.integers(0, 4))):
        oid += 1
        step(new(oid, draw(st.sampled_from([BUY, SELL])), draw(st.integers(98, 102)),
                 draw(st.integers(1, 4)), trader=draw(st.integers(1, 3))))
    return np.concatenate(rows)


@st.composite
def band_flows(draw):
    """Continuous trading on symbol B with a dynamic band of +-2 around the last trade: a first
    trade at 100, resting orders from 96 to 104 (so sweeps breach the band), aggressive limits,
    market orders, IOCs and stops, messages spaced so the re-opening auctions end by time, and
    now and then a PHASE message."""
    rows, oid, ts = [], 2, T0
    first = draw(st.integers(99, 101))
    rows.append(new(1, SELL, first, 1, symbol=1, trader=1, ts=ts))
    rows.append(new(2, BUY, first, 1, symbol=1, trader=2, ts=ts))
    for _ in range(draw(st.integers(3, 25))):
        oid += 1
        ts += draw(st.sampled_from([0, 1, 2, 3, 9]))
        t = draw(st.integers(0, 19))
        side = draw(st.sampled_from([BUY, SELL]))
        qty = draw(st.sampled_from([1, 2, 3, 5]))
        kw = dict(symbol=1, trader=draw(st.integers(1, 3)), ts=ts)
        if t < 9:
            rows.append(new(oid, side, draw(st.integers(96, 104)), qty,
                            display_qty=draw(st.sampled_from([0, 0, 1])), **kw))
        elif t < 12:
            rows.append(market(oid, side, qty, tif=draw(st.sampled_from([Tif.GTC, Tif.IOC])),
                               **kw))
        elif t < 14:
            rows.append(new(oid, side, draw(st.integers(96, 104)), qty,
                            tif=draw(st.sampled_from([Tif.IOC, Tif.FOK])), **kw))
        elif t < 17:
            rows.append(new(oid, side, draw(st.integers(96, 104)), qty,
                            order_type=draw(st.sampled_from([OrderType.STOP,
                                                             OrderType.STOP_LIMIT])),
                            stop_price=draw(st.integers(97, 103)), **kw))
        elif t < 18:
            rows.append(new(oid, side, draw(st.integers(96, 104)), qty, min_qty=1, **kw))
        else:
            rows.append(to_phase(draw(st.sampled_from([Phase.CONTINUOUS, Phase.HALTED,
                                                       Phase.REOPENING_AUCTION])),
                                 symbol=1, ts=ts))
    return np.concatenate(rows)


@st.composite
def stop_uncross_flows(draw):
    """Stops pending across an uncross on symbol A: open it (no auction volume), trade once
    near 100, enter stops and stop limits on both sides around it and a few resting orders,
    enter a call (pre-open, pre-close, or a halt then a re-opening call), cross the call book
    between 97 and 103, end the call (opening, continuous or closing auction) and trade a little
    more, so the uncross price triggers stops that are released (continuous) or stay (closed)."""
    rows, oid, ts = [], 0, T0

    def add(row):
        nonlocal ts
        ts += 1
        row["ts"] = ts
        rows.append(row)

    def order(side, price, qty, **kw):
        nonlocal oid
        oid += 1
        add(new(oid, side, price, qty, trader=draw(st.integers(1, 3)), **kw))

    add(to_phase(Phase.CONTINUOUS))
    first = draw(st.integers(99, 101))
    order(SELL, first, 1)
    order(BUY, first, 1)
    for _ in range(draw(st.integers(1, 6))):
        side = draw(st.sampled_from([BUY, SELL]))
        stop = draw(st.integers(first + 1, 103) if side == BUY else st.integers(97, first - 1))
        order(side, draw(st.integers(97, 103)), draw(st.integers(1, 3)),
              order_type=draw(st.sampled_from([OrderType.STOP, OrderType.STOP_LIMIT])),
              stop_price=stop, tif=draw(st.sampled_from([Tif.GTC, Tif.IOC, Tif.DAY])))
    for _ in range(draw(st.integers(0, 4))):
        order(SELL, draw(st.integers(first + 1, 104)), draw(st.integers(1, 3)))
        order(BUY, draw(st.integers(96, first - 1)), draw(st.integers(1, 3)))
    call = draw(st.sampled_from([Phase.PRE_OPEN, Phase.PRE_CLOSE, Phase.HALTED]))
    add(to_phase(call))
    if call == Phase.HALTED:
        add(to_phase(Phase.REOPENING_AUCTION))
    for _ in range(draw(st.integers(1, 6))):
        side = draw(st.sampled_from([BUY, SELL]))
        if draw(st.integers(0, 4)) == 0:
            oid += 1
            add(market(oid, side, draw(st.integers(1, 3)), trader=draw(st.integers(1, 3))))
        else:
            order(side, draw(st.integers(97, 103)), draw(st.integers(1, 4)),
                  display_qty=draw(st.sampled_from([0, 0, 1])))
    add(to_phase(draw(st.sampled_from([Phase.OPENING_AUCTION, Phase.CONTINUOUS,
                                       Phase.CLOSING_AUCTION])),
                 price=draw(st.sampled_from([0, 98, 100, 102]))))
    for _ in range(draw(st.integers(0, 3))):
        order(draw(st.sampled_from([BUY, SELL])), draw(st.integers(97, 103)),
              draw(st.integers(1, 3)))
    return np.concatenate(rows)
