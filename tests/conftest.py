"""Shared fixtures, message builders and hypothesis strategies for the engine and model tests.

Random flows mix valid and invalid messages over several symbols (one of them unknown), draw ids
from a small pool so that cancels, modifies and duplicates hit live orders, use a narrow price band
so that orders cross often, and a few traders so that self-trade prevention triggers.

Under ``pytest -n N`` (xdist) the controller first fills the numba cache (tests/kernel_warmup.py,
one subprocess per group, in parallel) so that no kernel is compiled twice at once by two workers
or by a worker and a subprocess test; EXSIM_NO_WARMUP=1 skips that.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

from exsim.exchange.schema import (
    MAX_PRICE, MAX_QTY, ORDER_DTYPE, Event, Flag, Kind, OrderType, Reason, Side, Tif,
)
from model import Model

from exsim.exchange import Engine


class _NoBareExsimPackages:
    """Refuse ``import exchange`` (store, replay, scenarios): the checkout's root is on sys.path
    while the tests run, so a bare import would load a second copy of exsim's modules whose
    classes and kernels differ from ``exsim.*``'s (an OutputBuffers that is not an
    OutputBuffers). exsim's packages are imported as ``exsim.<name>``."""

    NAMES = ("exchange", "store", "replay", "scenarios")

    def find_spec(self, name, path=None, target=None):
        if path is None and name in self.NAMES:
            raise ImportError(f"import {name}: exsim's packages are imported as exsim.{name}")
        return None


sys.meta_path.insert(0, _NoBareExsimPackages())


def pytest_sessionstart(session):
    """Fill the numba cache before the workers start: only in the xdist controller (its hook
    runs before xdist's, which starts the workers) and only for the whole suite (a run of chosen
    files compiles what it uses, as without xdist). Each group of tests/kernel_warmup.py runs in
    its own subprocess, all at once; their report lines are shown, and nothing there fails the
    run."""
    config = session.config
    if (hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)
            or config.args_source is not pytest.Config.ArgsSource.TESTPATHS
            or os.environ.get("EXSIM_NO_WARMUP", "") not in ("", "0")):
        return
    from kernel_warmup import GROUPS

    script = Path(__file__).with_name("kernel_warmup.py")
    procs = [subprocess.Popen([sys.executable, str(script), g], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for g in GROUPS]
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for p in procs:
        out, _ = p.communicate()
        for line in out.splitlines():
            if reporter is not None:
                reporter.write_line(line)


STP_MODES = ["none", "cancel_resting", "cancel_incoming", "cancel_both"]
# (name, min_price, max_price): B has a narrow band so PRICE_OUT_OF_BAND happens often.
SYMBOLS = [("A", 1, MAX_PRICE), ("B", 97, 103), ("C", 1, MAX_PRICE)]
UNKNOWN_SYMBOLS = [len(SYMBOLS), 2**32 - 1]


# ---- building books ------------------------------------------------------------------------------

def make_book(impl, stp="none", symbols=SYMBOLS, ownership=True):
    """An Engine or a Model ("engine" | "model") with the given symbols added in order.

    A symbol is (name, min_price, max_price) or (name, min_price, max_price, options), options
    being add_symbol's keyword options (tick_table, lot_size, ...). `ownership` is passed to the
    engine only when off (on is its default), so the call stays valid for every engine version.
    """
    if impl == "engine":
        book = Engine(stp=stp) if ownership else Engine(stp=stp, ownership=False)
    else:
        book = Model(stp=stp, ownership=ownership)
    for name, lo, hi, *options in symbols:
        book.add_symbol(name, tick_size=1, min_price=lo, max_price=hi, **(options[0] if options else {}))
    return book


@pytest.fixture(params=["model", "engine"])
def impl(request):
    """Runs a test against both implementations (the engine variant skips until it exists)."""
    return request.param


@pytest.fixture
def book(impl):
    """A fresh book with one symbol "X" (id 0, band 1..MAX_PRICE) and no STP."""
    return make_book(impl, symbols=[("X", 1, MAX_PRICE)])


@pytest.fixture
def engine():
    """A fresh Engine with one symbol "X" (id 0); skips if the engine module is missing."""
    return make_book("engine", symbols=[("X", 1, MAX_PRICE)])


# ---- messages ------------------------------------------------------------------------------------

def msg(kind=Kind.NEW, side=Side.BUY, price=100, qty=10, order_id=1, symbol=0, trader=1,
        order_type=OrderType.LIMIT, tif=Tif.GTC, flags=0, ts=0, stop_price=0, display_qty=0,
        min_qty=0, expire_ts=0, phase=0):
    """One ORDER_DTYPE row (as a 1-element array) with readable defaults (``phase``: the target
    of a PHASE message, 0 on every other kind)."""
    a = np.zeros(1, dtype=ORDER_DTYPE)
    a[0] = (ts, order_id, price, qty, symbol, trader, kind, order_type, tif, flags, side,
            stop_price, display_qty, min_qty, expire_ts, phase)
    return a


def buy(order_id, price, qty, **kw):
    return msg(side=Side.BUY, order_id=order_id, price=price, qty=qty, **kw)


def sell(order_id, price, qty, **kw):
    return msg(side=Side.SELL, order_id=order_id, price=price, qty=qty, **kw)


def cancel(order_id, **kw):
    return msg(kind=Kind.CANCEL, order_id=order_id, price=0, qty=0, **kw)


def modify(order_id, price, qty, **kw):
    return msg(kind=Kind.MODIFY, order_id=order_id, price=price, qty=qty, **kw)


def flow(*rows):
    """Concatenate message rows into one ORDER_DTYPE batch."""
    return np.concatenate(rows) if rows else np.zeros(0, dtype=ORDER_DTYPE)


def rows(table, *fields):
    """A table's rows as plain tuples of the named fields (for readable assertions)."""
    return [tuple(int(r[f]) for f in fields) for r in table]


def levels(side_array):
    """depth() output as [(price, qty, count), ...] whatever dtype the implementation uses."""
    return rows(side_array, "price", "qty", "count")


# ---- comparing outputs ---------------------------------------------------------------------------

def assert_table_equal(name, got, want):
    """Same dtype, same rows field by field; on failure say which row differs first.

    Bytes are compared by the tests that hash or concatenate outputs; here fields, so that a
    byte-level problem (such as padding) cannot hide a matching bug.
    """
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
    if len(got) != len(want) or not np.array_equal(got, want):
        n = min(len(got), len(want))
        first = next((i for i in range(n) if got[i] != want[i]), n)
        raise AssertionError(
            f"{name}: {len(got)} rows vs {len(want)}; first difference at row {first}:\n"
            f"  got  {got[first:first + 3].tolist()}\n  want {want[first:first + 3].tolist()}")


def assert_same_outputs(got, want):
    """Two (fills, l2, events) results are identical table by table."""
    for name, g, w in zip(("fills", "l2", "events"), got, want):
        assert_table_equal(name, g, w)


def assert_same_books(a, b, symbols=SYMBOLS):
    """Two implementations hold the same books: depth and L3 orders of every symbol."""
    for name, *_ in symbols:
        for side_a, side_b in zip(a.depth(name, levels=10**6), b.depth(name, levels=10**6)):
            assert levels(side_a) == levels(side_b), f"depth of {name}"
        assert_table_equal(f"orders({name})", a.orders(name), b.orders(name))


def concat(results):
    """Concatenate per-batch results into one (fills, l2, events) triple.

    Not np.concatenate: it copies field by field into uninitialised memory, so the padding bytes
    of aligned dtypes would be garbage; assigning into zeros keeps them zero.
    """
    out = []
    for i in range(3):
        parts = [r[i] for r in results]
        table, at = np.zeros(sum(map(len, parts)), parts[0].dtype), 0
        for p in parts:
            table[at:at + len(p)] = p
            at += len(p)
        out.append(table)
    return tuple(out)


def run(book, orders, cuts=()):
    """Process `orders` in batches split at `cuts`; returns the concatenated outputs."""
    return concat([tuple(book.process(b)) for b in split(orders, cuts)])


def split(orders, cuts):
    """Split a flow at the given cut positions (any order, duplicates allowed; empty batches kept)."""
    bounds = [0, *sorted(c for c in cuts if 0 <= c <= len(orders)), len(orders)]
    return [orders[lo:hi] for lo, hi in zip(bounds, bounds[1:])]


# ---- hypothesis strategies -----------------------------------------------------------------------

@st.composite
def messages(draw, dense=False):
    """One message, valid most of the time. Each draw's 0 is the plain case, so shrinking simplifies.

    `dense`: only valid NEW/CANCEL/MODIFY on symbol 0, so books get deep and modifies hit often.
    """
    k = draw(st.integers(0, 38 if dense else 39))
    kind = Kind.NEW if k < 24 else Kind.CANCEL if k < 31 else Kind.MODIFY if k < 39 else 7
    s = draw(st.integers(0, 0 if dense else 39))
    symbol = 0 if s < 20 else 1 if s < 30 else 2 if s < 38 else UNKNOWN_SYMBOLS[s - 38]
    side = draw(st.sampled_from([Side.BUY, Side.SELL]))
    t = draw(st.integers(0, 9))
    order_type = OrderType.MARKET if t >= 8 else OrderType.LIMIT
    tif = draw(st.sampled_from([Tif.GTC, Tif.GTC, Tif.GTC, Tif.IOC, Tif.FOK]))
    post = order_type == OrderType.LIMIT and tif == Tif.GTC and draw(st.integers(0, 5)) == 5
    flags = Flag.POST_ONLY if post else 0
    price = draw(st.integers(90, 110) if dense else st.integers(96, 104))
    qty = draw(st.integers(1, 20))
    order_id = draw(st.integers(0, 39 if dense else 9))  # a small pool: ids collide with live ones
    trader = draw(st.integers(1, 3))
    # Now and then break one field (or use an extreme but valid value).
    bad = draw(st.integers(0, 0 if dense else 39))
    if bad == 1:
        side = draw(st.integers(2, 255))
    elif bad == 2:
        order_type = draw(st.integers(4, 255))  # 2, 3 are the stops: venue_messages has them
    elif bad == 3:
        tif = draw(st.integers(5, 255))         # 3, 4 are DAY, GTD: venue_messages has them
    elif bad == 4:
        flags = draw(st.integers(1, 255))  # unknown bits, or POST_ONLY on any order
    elif bad == 5:
        qty = draw(st.integers(-(2**63), 0))
    elif bad == 6:
        qty = draw(st.sampled_from([MAX_QTY, MAX_QTY + 1, 2**63 - 1]))
    elif bad == 7:
        price = draw(st.sampled_from([0, -1, -(2**63), MAX_PRICE, MAX_PRICE + 1, 2**63 - 1]))
    elif bad == 8:
        order_id = draw(st.sampled_from([2**64 - 1, 2**63, 12345]))
    ts = draw(st.integers(0, 2**62))
    return (ts, order_id, price, qty, symbol, trader, kind, order_type, tif, flags, side)


def to_orders(msgs):
    """A list of message tuples as an ORDER_DTYPE array (short tuples: the fields after them are
    0); cancels and modifies carry the owner (see `carry_owners`), half the modifies the price."""
    out = np.zeros(len(msgs), dtype=ORDER_DTYPE)
    width = len(ORDER_DTYPE.names)
    if msgs:
        out[:] = [tuple(m) + (0,) * (width - len(m)) for m in msgs]
    return anchor_modifies(carry_owners(out))


def carry_owners(orders):
    """Give every message of one (symbol, order_id) the trader of the first NEW of that key, so
    that cancels and modifies always carry the owner (as the exsim loaders do) and the old flows
    run with ownership on exactly as they ran before ownership existed; traders stay random
    across keys, so self-trade prevention still triggers."""
    owner = {}
    for m in orders:
        key = (int(m["symbol"]), int(m["order_id"]))
        if m["kind"] == Kind.NEW:
            owner.setdefault(key, int(m["trader"]))
        if key in owner:
            m["trader"] = owner[key]
    return orders


def anchor_modifies(orders):
    """Give half the MODIFYs (those with an even ts) the price of the last NEW of their id, so
    same-price modifies (priority kept or lost) happen often, not 1 time in 9."""
    last = {}
    for m in orders:
        key = (int(m["symbol"]), int(m["order_id"]))
        if m["kind"] == Kind.NEW:
            last[key] = int(m["price"])
        elif m["kind"] == Kind.MODIFY and m["ts"] % 2 == 0 and key in last:
            m["price"] = last[key]
    return orders


def flows(min_size=10, max_size=150, dense=False):
    """Random order flows as ORDER_DTYPE arrays (see `messages` for `dense`)."""
    return st.lists(messages(dense), min_size=min_size, max_size=max_size).map(to_orders)


def cut_points(n, max_cuts=8):
    """Where to split a flow of n messages into batches."""
    return st.lists(st.integers(0, n), max_size=max_cuts)


def random_flow(seed, n, n_symbols=len(SYMBOLS) + 1):  # the last symbol id is unknown
    """A seeded numpy flow (no hypothesis) for large or cross-process tests; same mix as messages()."""
    rng = np.random.default_rng(seed)
    o = np.zeros(n, dtype=ORDER_DTYPE)
    o["ts"] = np.cumsum(rng.integers(1, 1000, n))
    o["kind"] = rng.choice([Kind.NEW, Kind.CANCEL, Kind.MODIFY, 7], n, p=[0.6, 0.2, 0.19, 0.01])
    o["symbol"] = rng.choice(n_symbols, n, p=[0.45, 0.25, 0.25, 0.05][:n_symbols])
    o["side"] = rng.integers(0, 2, n)
    o["order_type"] = rng.choice([OrderType.LIMIT, OrderType.MARKET], n, p=[0.9, 0.1])
    o["tif"] = rng.choice([Tif.GTC, Tif.IOC, Tif.FOK], n, p=[0.7, 0.15, 0.15])
    o["flags"] = rng.choice([0, Flag.POST_ONLY, 2], n, p=[0.85, 0.14, 0.01])
    o["price"] = rng.integers(94, 107, n)
    o["qty"] = rng.integers(-1, 21, n)
    o["order_id"] = rng.integers(0, 25, n)
    o["trader"] = rng.integers(1, 4, n)
    return anchor_modifies(carry_owners(o))


# ---- venue flows: the order types of issue 15 mixed with the old ones --------------------------

DAY_NS = 86_400 * 10**9
# A plain symbol; one with a tick table (any price below 100, even prices from 100 up), lots of 2
# and a minimum of 2; one with a narrow band whose session closes at 01:00 UTC.
SESSION_CLOSE = 3_600 * 10**9
VENUE_SYMBOLS = [
    ("A", 1, MAX_PRICE),
    ("T", 1, 10**6, dict(tick_table=[(1, 1), (100, 2)], lot_size=2, min_order_qty=2)),
    ("D", 94, 106, dict(session_close=SESSION_CLOSE)),
]
VENUE_UNKNOWN_SYMBOL = len(VENUE_SYMBOLS)
# flows start a little before a session close of symbol D, so DAY orders expire mid-flow
VENUE_T0 = 20_000 * DAY_NS + SESSION_CLOSE - 300


@st.composite
def venue_messages(draw):
    """One message of a venue flow as a dict of ORDER_DTYPE fields, plus `dt` (the ts step),
    `ttl` (a GTD's expiry relative to its ts) and `foreign` (a cancel/modify by a non-owner).

    Prices and stop prices sit near 100 so stops trigger (and cascade) often; icebergs show 1-4
    lots; ids come from a small pool so cancels and modifies hit live orders and pending stops.
    """
    k = draw(st.integers(0, 59))
    kind = Kind.NEW if k < 40 else Kind.CANCEL if k < 48 else Kind.MODIFY if k < 59 else 9
    s = draw(st.integers(0, 29))
    symbol = 0 if s < 14 else 1 if s < 21 else 2 if s < 29 else VENUE_UNKNOWN_SYMBOL
    t = draw(st.integers(0, 19))
    order_type = (OrderType.LIMIT if t < 11 else OrderType.MARKET if t < 13
                  else OrderType.STOP if t < 15 else OrderType.STOP_LIMIT)
    if order_type == OrderType.LIMIT:
        tif = draw(st.sampled_from([Tif.GTC, Tif.GTC, Tif.GTC, Tif.DAY, Tif.GTD, Tif.IOC, Tif.FOK]))
    elif order_type == OrderType.MARKET:
        tif = draw(st.sampled_from([Tif.IOC, Tif.GTC, Tif.FOK]))
    else:
        tif = draw(st.sampled_from([Tif.GTC, Tif.DAY, Tif.GTD, Tif.IOC]))
    lot = 2 if symbol == 1 else 1
    qty = lot * draw(st.sampled_from([1, 1, 2, 2, 3, 4, 6, 12]))  # equal sizes meet often
    m = dict(kind=kind, symbol=symbol, order_type=order_type, tif=tif, qty=qty,
             side=draw(st.sampled_from([Side.BUY, Side.SELL])),
             price=draw(st.integers(97, 103)), stop_price=draw(st.integers(97, 103)),
             order_id=draw(st.integers(0, 15)), trader=draw(st.integers(1, 3)),
             flags=0, display_qty=0, min_qty=0, expire_ts=0,
             dt=draw(st.sampled_from([0, 1, 1, 2, 5, 20])),
             ttl=draw(st.sampled_from([1, 2, 3, 5, 10, 20, 50, 300])),
             foreign=draw(st.integers(0, 9)) == 0)
    rests = order_type == OrderType.LIMIT and tif in (Tif.GTC, Tif.DAY, Tif.GTD)
    extra = draw(st.integers(0, 9))
    if rests and extra < 4:
        m["display_qty"] = lot * draw(st.integers(1, 2))      # small slices: many refills
    elif order_type in (OrderType.LIMIT, OrderType.MARKET) and tif != Tif.FOK and extra == 4:
        m["min_qty"] = lot * draw(st.integers(1, qty // lot))
    elif rests and extra == 5:
        m["flags"] = Flag.POST_ONLY
    # Now and then break one field (every new reject code is reachable).
    bad = draw(st.integers(0, 39))
    if bad == 1:
        m["qty"] = qty + 1 if symbol == 1 else draw(st.sampled_from([0, -1, MAX_QTY + 1]))
    elif bad == 2:
        m["display_qty"] = draw(st.sampled_from([-1, qty + 1, 1]))
    elif bad == 3:
        m["min_qty"] = draw(st.sampled_from([-1, qty + 1, 1]))
    elif bad == 4:
        m["ttl"] = draw(st.integers(-3, 0))                  # GTD expiring at or before its ts
    elif bad == 5:
        m["expire_ts"] = 1                                    # an expiry on a tif other than GTD
    elif bad == 6:
        m["stop_price"] = draw(st.sampled_from([0, -5, 93, 107, 101]))
    elif bad == 7:
        m["price"] = draw(st.sampled_from([0, 93, 107, 101]))
    elif bad == 8:
        m["tif"] = draw(st.sampled_from([Tif.FOK, Tif.DAY, 7]))
    elif bad == 9:
        m["order_type"] = 4
    return m


def venue_orders(msgs, t0=VENUE_T0):
    """Venue message dicts as an ORDER_DTYPE array: ts advance by each `dt` from `t0`, a GTD
    expires `ttl` after its ts, most cancels and modifies of an id never entered aim at the last
    NEW instead, every message of a (symbol, id) has one trader (its owner) except the cancels
    and modifies marked `foreign`, and half the modifies keep the price and stop price of the
    last NEW of their id."""
    out = np.zeros(len(msgs), dtype=ORDER_DTYPE)
    last, ts = {}, t0
    for row, m in zip(out, msgs):
        ts += m["dt"]
        m = {**m, "ts": ts}
        if m["tif"] == Tif.GTD and m["kind"] == Kind.NEW:
            m["expire_ts"] = ts + m["ttl"]
        key = (m["symbol"], m["order_id"])
        if m["kind"] in (Kind.CANCEL, Kind.MODIFY) and key not in last and last and m["ttl"] % 3:
            key = next(reversed(last))  # most cancels and modifies aim at an order entered before
            m["symbol"], m["order_id"] = key
        if m["kind"] == Kind.NEW:
            m["trader"] = last[key]["trader"] if key in last else m["trader"]  # one owner per key
            last.pop(key, None)
            last[key] = m
        elif key in last:
            m["trader"] = last[key]["trader"] + (1 if m["foreign"] else 0)
            if m["kind"] == Kind.MODIFY and m["ttl"] % 2:
                m["price"], m["stop_price"] = last[key]["price"], last[key]["stop_price"]
        for f in ORDER_DTYPE.names:
            row[f] = m.get(f, 0)
    return out


def venue_flows(min_size=20, max_size=80):
    """Random venue flows as ORDER_DTYPE arrays (see `venue_messages`)."""
    return st.lists(venue_messages(), min_size=min_size, max_size=max_size).map(venue_orders)


@st.composite
def sweep_flows(draw):
    """Icebergs refilling while swept: sells (many of them icebergs with 1-3 lot slices) rest at
    100 and 101 on symbol A, then small buys (limits, IOC and market, some of them stops near
    the trade price) sweep them, so refilled slices meet older orders at the same level."""
    msgs, oid, ts = [], 0, VENUE_T0
    for _ in range(draw(st.integers(2, 10))):
        oid += 1
        qty = draw(st.integers(1, 9))
        display = draw(st.sampled_from([0, 1, 1, 2, 3]))
        msgs.append(dict(kind=Kind.NEW, side=Side.SELL, order_type=OrderType.LIMIT, tif=Tif.GTC,
                         price=draw(st.sampled_from([100, 100, 101])), qty=qty,
                         display_qty=min(display, qty), trader=draw(st.integers(1, 3))))
    for _ in range(draw(st.integers(1, 12))):
        oid += 1
        t = draw(st.integers(0, 5))
        otype = (OrderType.LIMIT if t < 3 else OrderType.MARKET if t == 3 else OrderType.STOP)
        msgs.append(dict(kind=Kind.NEW, side=Side.BUY, order_type=otype,
                         tif=Tif.IOC if otype == OrderType.MARKET else
                         draw(st.sampled_from([Tif.GTC, Tif.IOC])),
                         price=draw(st.sampled_from([100, 101])), qty=draw(st.integers(1, 4)),
                         stop_price=draw(st.sampled_from([100, 101, 102])),
                         trader=draw(st.integers(1, 3))))
    out = np.zeros(len(msgs), dtype=ORDER_DTYPE)
    for k, (row, m) in enumerate(zip(out, msgs)):
        m.update(ts=ts + k, order_id=k + 1, symbol=0)
        for f, v in m.items():
            row[f] = v
    return out


# ---- independent bookkeeping for the property tests ----------------------------------------------

class _Entry:
    """What the outputs say about one order: quantities and its priority key (seq it last queued)."""

    def __init__(self, total, side, price, key):
        self.total, self.filled, self.leaves, self.cancelled = total, 0, total, 0
        self.side, self.price, self.key = side, price, key


class Ledger:
    """Rebuilds every order's life from fills and events alone and checks the book against it.

    Used on the engine and on the model alike. `feed(batch, result)` checks per message that fills
    and events agree and quantities are conserved; `check(book)` checks the book after a batch.
    """

    def __init__(self, symbols=SYMBOLS):
        self.symbols = [name for name, *_ in symbols]
        self.live = {}   # (symbol, order_id) -> _Entry, for resting orders
        self.l2 = {}     # (symbol, side, price) -> (qty, count) from the last L2 row
        self.seq = 0

    def feed(self, batch, result):
        """Check one batch's outputs message by message and update the ledger."""
        fills, l2, events = result
        assert len(np.unique(events["seq"])) == len(batch), "every message yields an event"
        for m in batch:
            self.seq += 1
            mine = [t[t["seq"] == self.seq] for t in (fills, l2, events)]
            self._message(m, *mine)
        for r in l2:
            self.l2[(int(r["symbol"]), int(r["side"]), int(r["price"]))] = (int(r["qty"]), int(r["count"]))
        assert all(np.all(np.diff(t["seq"]) >= 0) for t in result), "rows in seq order"

    def _message(self, m, fills, l2, events):
        sym, oid = int(m["symbol"]), int(m["order_id"])
        assert np.all(events["ts"] == m["ts"]) and np.all(fills["ts"] == m["ts"])
        if events[0]["event"] == Event.REJECTED:
            assert len(events) == 1 and len(fills) == 0 and len(l2) == 0
            e = events[0]
            assert (int(e["order_id"]), int(e["filled_qty"]), int(e["leaves_qty"])) == (oid, 0, 0)
            return
        sums = {}
        for f in fills:
            assert f["symbol"] == sym
            resting = f["sell_order_id"] if f["aggressor_side"] == Side.BUY else f["buy_order_id"]
            r = self.live[(sym, int(resting))]
            assert r.price == f["price"] and r.side != f["aggressor_side"], "fills at resting price"
            for side in ("buy_order_id", "sell_order_id"):
                sums[int(f[side])] = sums.get(int(f[side]), 0) + int(f["qty"])
        start = {}
        for e in events:
            key = (sym, int(e["order_id"]))
            ev, filled, leaves = int(e["event"]), int(e["filled_qty"]), int(e["leaves_qty"])
            if ev == Event.ACCEPTED:
                ent = _Entry(leaves, int(m["side"]), int(m["price"]), self.seq)
                assert key not in self.live and leaves == m["qty"]
                self.live[key] = ent  # incoming: "live" in the ledger until it ends
            ent = self.live[key]
            start.setdefault(key, (ent, ent.filled))
            if ev in (Event.PARTIAL, Event.FILLED):
                assert filled > ent.filled and filled + leaves == ent.filled + ent.leaves
                assert (leaves == 0) == (ev == Event.FILLED)
            elif ev == Event.CANCELLED:
                assert leaves == 0 and filled == ent.filled
                ent.cancelled += ent.leaves
            elif ev == Event.MODIFIED:
                assert filled == ent.filled and leaves == m["qty"]
                ent.total += leaves - ent.leaves
                if m["price"] != ent.price or leaves > ent.leaves:
                    ent.key = self.seq  # loses priority
                ent.price = int(m["price"])
            ent.filled, ent.leaves = filled, leaves
            assert ent.filled + ent.cancelled + ent.leaves == ent.total, "quantity conserved"
            if ev in (Event.FILLED, Event.CANCELLED):
                del self.live[key]
        for (s, o), (ent, filled0) in start.items():
            assert ent.filled - filled0 == sums.pop(o, 0), f"fills vs events of order {o}"
        assert not sums, f"fills of orders without events: {sums}"

    def check(self, book):
        """After a batch: not crossed, orders() = ledger (FIFO by key), L2 totals = resting sums."""
        for s, name in enumerate(self.symbols):
            live = book.orders(name)
            want = {o: e for (sym, o), e in self.live.items() if sym == s}
            assert sorted(int(x) for x in live["order_id"]) == sorted(want), f"live orders of {name}"
            totals = {}
            for r in live:
                e = want[int(r["order_id"])]
                assert (e.leaves, e.filled, e.side, e.price) == (r["qty"], r["filled"], r["side"], r["price"])
                t = totals.setdefault((s, int(r["side"]), int(r["price"])), [0, 0, []])
                t[0] += int(r["qty"]); t[1] += 1; t[2].append(e.key)
            for level, (qty, count, keys) in totals.items():
                assert keys == sorted(keys), f"FIFO at {level}"
                assert self.l2.get(level) == (qty, count), f"L2 total at {level}"
            stale = [k for k, v in self.l2.items() if k[0] == s and v[0] and k not in totals]
            assert not stale, f"L2 shows levels with no orders: {stale}"
            bids, asks = book.depth(name, levels=10**6)
            assert levels(bids) == sorted(((p, q, c) for (_, sd, p), (q, c, _) in totals.items()
                                           if sd == Side.BUY), reverse=True)
            assert levels(asks) == sorted((p, q, c) for (_, sd, p), (q, c, _) in totals.items()
                                          if sd == Side.SELL)
            if len(bids) and len(asks):
                assert bids[0]["price"] < asks[0]["price"], f"{name} crossed"


def shared_sample(relative: str):
    """Return the path of a sample in the shared data directory (../shared/data or
    $EXSIM_SHARED_DATA); skip the calling test, naming the sample, when it is not there (the
    samples live outside the repository)."""
    from exsim.exchange.errors import InputError
    from exsim.scenarios.data import shared_file

    try:
        path = shared_file(relative)
    except InputError as e:
        pytest.skip(f"shared sample {relative} not available: {e}")
    if not path.exists():
        pytest.skip(f"shared sample {relative} not available: {path} does not exist")
    return path


def resting_flow(*rows):
    """rows: (ts, order_id, side, price, qty) NEW GTC limit orders of trader 1, symbol 0: a market
    flow for backtest and what-if tests whose expected fills are worked out by hand."""
    out = np.zeros(len(rows), ORDER_DTYPE)
    for k, (ts, oid, side, price, qty) in enumerate(rows):
        out[k] = (ts, oid, price, qty, 0, 1, Kind.NEW, OrderType.LIMIT, Tif.GTC, 0, side, 0, 0, 0, 0, 0)
    return out


class VenueChecker:
    """Checks an implementation message by message on venue flows, from its outputs and its
    public books alone (``orders``, ``stops``, ``depth``), without trusting its bookkeeping.

    `step(book, message)` processes one message and checks: outputs carry its seq and ts; a
    reject is one row and changes nothing; quantity is conserved per order (accepted = filled +
    cancelled + open, open = displayed + reserve for a resting order, the whole qty for a pending
    stop) and the fills agree with the events; no book is crossed; no resting order shows more
    than its display size; no pending stop is left triggered by the last trade price; nothing
    fills after its expiry and no live order is past it; a refilled iceberg slice is behind every
    order that was at its level before the message and did not move; the last L2 row of a level
    equals its displayed total.
    """

    def __init__(self, symbols=VENUE_SYMBOLS):
        self.symbols = [name for name, *_ in symbols]
        self.open = {}   # (symbol, order_id) -> [accepted and modified total, filled, open]
        self.last = {}   # symbol -> last trade price
        self.l2 = {}     # (symbol, side, price) -> (qty, count) of the last L2 row
        self.seq = 0

    def snapshot(self, book):
        """{symbol: (orders rows, stops rows)} of every symbol."""
        return {s: (book.orders(n), book.stops(n)) for s, n in enumerate(self.symbols)}

    def step(self, book, m):
        """Process message `m` (a 1-row ORDER_DTYPE array) and check it; returns the result."""
        before = self.snapshot(book)
        res = book.process(m)
        self.seq += 1
        fills, l2, events = res.fills, res.l2, res.events
        ts = int(m[0]["ts"])
        for t in (fills, l2, events):
            assert np.all(t["seq"] == self.seq) and np.all(t["ts"] == ts), "seq/ts of the message"
        after = self.snapshot(book)
        self._expiries_and_fills(m[0], before, fills, events)
        self._ledger(fills, events)
        for r in l2:
            self.l2[(int(r["symbol"]), int(r["side"]), int(r["price"]))] = (int(r["qty"]), int(r["count"]))
        for s in range(len(self.symbols)):
            for table in after[s]:
                assert np.all((table["expire_ts"] == 0) | (table["expire_ts"] > ts)), \
                    "a live order is past its expiry"
            self._book(s, book, *after[s])
            self._refills_at_back(s, before[s][0], after[s][0], m[0])
        expired = int(np.sum(events["reason"] == Reason.EXPIRED))
        assert np.all(events["reason"][:expired] == Reason.EXPIRED), "expiries come first"
        if events[-1]["event"] == Event.REJECTED:
            assert len(events) == expired + 1 and len(fills) == 0 and len(l2) <= expired
            if not expired:
                assert all(before[s][i].tobytes() == after[s][i].tobytes()
                           for s in before for i in (0, 1)), "a reject changed a book"
        return res

    def _expiries_and_fills(self, m, before, fills, events):
        ts = int(m["ts"])
        rows_before = {(s, int(r["order_id"])): r for s, (o, st_) in before.items()
                       for table in (o, st_) for r in table}
        # a NEW may reuse the id of an order that expired just before it: its fills are its own
        reused = (int(m["symbol"]), int(m["order_id"])) if m["kind"] == Kind.NEW else None
        for f in fills:
            for oid in (int(f["buy_order_id"]), int(f["sell_order_id"])):
                r = rows_before.get((int(f["symbol"]), oid))
                if (int(f["symbol"]), oid) == reused:
                    continue
                if r is not None and r["expire_ts"]:
                    assert r["expire_ts"] > ts, f"order {oid} filled after its expiry"
        for e in events:
            if e["reason"] == Reason.EXPIRED:
                r = rows_before[(int(e["symbol"]), int(e["order_id"]))]
                assert 0 < r["expire_ts"] <= ts, "expired before its time"

    def _ledger(self, fills, events):
        sums = {}
        for f in fills:
            for side in ("buy_order_id", "sell_order_id"):
                key = (int(f["symbol"]), int(f[side]))
                sums[key] = sums.get(key, 0) + int(f["qty"])
            self.last[int(f["symbol"])] = int(f["price"])
        start, final = {}, {}  # filled of each order before the message and after its last event
        for e in events:
            key = (int(e["symbol"]), int(e["order_id"]))
            ev, filled, leaves = int(e["event"]), int(e["filled_qty"]), int(e["leaves_qty"])
            if ev == Event.REJECTED:
                assert filled == leaves == 0
                continue
            if ev == Event.ACCEPTED:
                assert key not in self.open, "accepted an id that is live"
                self.open[key] = [leaves, 0, leaves]
                if key in start:
                    # the id's earlier order ended in this message: only an expiry before it can
                    # end one (the message is this NEW), so that order traded nothing here
                    assert final[key] == start[key], f"fills vs events of {key} (id reused)"
                    del start[key]
            ent = self.open[key]
            start.setdefault(key, ent[1])
            if ev in (Event.PARTIAL, Event.FILLED):
                assert filled > ent[1] and filled + leaves == ent[1] + ent[2], "fill conserves"
                assert (leaves == 0) == (ev == Event.FILLED)
            elif ev == Event.MODIFIED:
                assert filled == ent[1]
                ent[0] += leaves - ent[2]
            elif ev == Event.TRIGGERED:
                assert (filled, leaves) == (ent[1], ent[2])
            elif ev == Event.CANCELLED:
                assert leaves == 0 and filled == ent[1]
                ent[0] -= ent[2]
            ent[1], ent[2] = filled, leaves
            final[key] = filled
            assert ent[1] + ent[2] == ent[0], "accepted = filled + cancelled + open"
            if ev in (Event.FILLED, Event.CANCELLED):
                del self.open[key]
        for key, filled0 in start.items():
            assert final[key] - filled0 == sums.pop(key, 0), f"fills vs events of {key}"
        assert not sums, f"fills of orders without events: {sums}"

    def _book(self, s, book, orders, stops):
        name = self.symbols[s]
        live = {o: e for (sym, o), e in self.open.items() if sym == s}
        got = {int(r["order_id"]): r for table in (orders, stops) for r in table}
        assert sorted(got) == sorted(live), f"live orders of {name}"
        for oid, r in got.items():
            assert int(r["qty"]) + int(r["hidden"]) == live[oid][2], f"open qty of {oid}"
            assert int(r["filled"]) == live[oid][1], f"filled of {oid}"
        for r in orders:
            assert r["qty"] > 0 and r["hidden"] >= 0 and r["stop_price"] == 0
            assert r["order_type"] == OrderType.LIMIT
            if r["display_qty"]:
                assert r["qty"] <= r["display_qty"], "shows more than its display size"
            else:
                assert r["hidden"] == 0
        last = self.last.get(s)
        for r in stops:
            assert r["hidden"] == 0 and r["filled"] == 0 and r["order_type"] in (2, 3)
            if last is not None:
                if r["side"] == Side.BUY:
                    assert r["stop_price"] > last, f"buy stop {r['order_id']} left triggered"
                else:
                    assert r["stop_price"] < last, f"sell stop {r['order_id']} left triggered"
        totals = {}
        for r in orders:
            t = totals.setdefault((s, int(r["side"]), int(r["price"])), [0, 0])
            t[0] += int(r["qty"])
            t[1] += 1
        for level, (qty, count) in totals.items():
            assert self.l2.get(level) == (qty, count), f"L2 total at {level}"
        stale = [k for k, v in self.l2.items() if k[0] == s and v[0] and k not in totals]
        assert not stale, f"L2 shows levels with no orders: {stale}"
        bids, asks = book.depth(name, levels=10**6)
        assert levels(bids) == sorted(((p, q, c) for (_, sd, p), (q, c) in totals.items()
                                       if sd == Side.BUY), reverse=True)
        assert levels(asks) == sorted((p, q, c) for (_, sd, p), (q, c) in totals.items()
                                      if sd == Side.SELL)
        if len(bids) and len(asks):
            assert bids[0]["price"] < asks[0]["price"], f"{name} crossed"

    @staticmethod
    def _refills_at_back(s, before, after, m):
        """A slice refilled in this message (reserve down, price and side kept) is behind every
        order that was at its level before and is unchanged (the message's own order aside)."""
        old = {int(r["order_id"]): r for r in before}
        mine = int(m["order_id"]) if int(m["symbol"]) == s else None
        by_level = {}
        for pos, r in enumerate(after):
            by_level.setdefault((int(r["side"]), int(r["price"])), []).append(r)
        for queue in by_level.values():
            kept, refilled = [], []
            for pos, r in enumerate(queue):
                oid, o = int(r["order_id"]), old.get(int(r["order_id"]))
                if o is None or oid == mine or (o["side"], o["price"]) != (r["side"], r["price"]):
                    continue
                if r["hidden"] < o["hidden"]:
                    refilled.append(pos)
                elif (r["qty"], r["hidden"]) == (o["qty"], o["hidden"]):
                    kept.append(pos)
            if kept and refilled:
                assert max(kept) < min(refilled), "a refilled slice is ahead of an older order"
