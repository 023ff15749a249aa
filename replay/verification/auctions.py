"""verify's checks of the trading day: phases, call auctions, the indicative uncross, price bands.

This module holds ``PhaseChecker``, which checks a symbol's rows from its first phase activity
on; its book is ``replay.verification.auction_book``'s, the rules' uncross and allocation are
``replay.verification.uncross``'s, and where the hand-over happens (and the ``band`` rows
before it) is ``replay.verification.phases``'s.

Written from docs/semantics.md ("Trading phases, auctions and price bands"), sharing no code with
``exchange`` (only the schema codes) and none with ``tests/model.py``. Like the rest of the
verifier it never re-runs the engine: it follows what the stored rows say happened (orders,
fills, execution reports; L2 rows are the kernel's business) with its own book, and checks each
phase change, auction and band against the rules:

- ``phase``: every PHASE message's effect (its validation, the PHASE event's phase, reference
  price and reason, an UNCROSS exactly where the rules run one), engine-caused changes
  (PRICE_BAND only in CONTINUOUS; AUCTION_END exactly when a re-opening auction's end is due),
  every event's ``phase`` field, NEW/MODIFY accepted or rejected as the phase says, stops
  released only in CONTINUOUS.
- ``trade_in_call``: no continuous fill (aggressor BUY/SELL) unless the symbol is CONTINUOUS and
  no uncross is running; no auction fill (``AUCTION_SIDE``) outside an uncross.
- ``auction_price``: the UNCROSS event's price, volume and surplus are the rules' answer for the
  call book at the uncross (``uncross.uncross``, a brute force over every candidate price), and
  every auction fill is at that price.
- ``auction_allocation``: the auction fills are exactly the pairing of the two sides' priority
  queues (market orders first, then price, then time; only the marginal order of a side in
  part), they add up to the volume, and no market order is left resting after the uncross.
- ``indicative``: each INDICATIVE event is the rules' answer for the call book at its place,
  differs from the one published before, and after every message the published one is the
  current answer (none missing).
- ``band``: no continuous fill outside the dynamic band around the last trade price at the
  start of its message; no NEW/MODIFY accepted with a limit price outside the static band (and
  no OUTSIDE_STATIC_BAND reject inside it); a PRICE_BAND interruption only when the aggressor's
  next fill, against the best opposite order, would have printed outside the band.
- ``crossed_book``, ``resting_price``, ``price_limits``: the book is not crossed after a message
  in CONTINUOUS, a continuous fill is at the resting order's price and within the incoming
  order's limit (the kernel's rules, checked here where the kernel no longer runs). An aggressor
  that stops at a crossing order outside the dynamic band without an interruption is ``band``.

How it joins the kernel (``replay.verification.symbol``): a symbol is checked by the kernel up
to its first row of phase activity (``phases.first_phase_seq``); from that seq on
``PhaseChecker`` takes over, its book seeded from the kernel's (``auction_book.book_from_state``).
Runs without phase activity are checked by the kernel alone (plus ``phases.band_rows`` where the
symbol has bands).

- ``row_fields``, ``opposite_sides``, ``overfill``, ``events_fills`` of every fill (the kernel's
  rules on a fill's own rows, ``FILL_RULES``): its traders are its orders' traders, its buy order
  buys and its sell order sells, it fills no more than either order has open, and each order's
  PARTIAL/FILLED report says what the fills left of it.

Limits: after the hand-over the kernel's other rules (fifo, l2_totals, conservation, stops,
expiry, ...) are not checked for that symbol; an AUCTION_END that is due is checked only at the
symbol's own rows (verify reads one symbol at a time and does not see other symbols' messages);
self-trade prevention inside continuous matching after the hand-over is not re-checked.
Cost: Python per message of a symbol after its hand-over (tens of microseconds), and per
uncross a sort of the call book.
"""

from __future__ import annotations

from exsim.exchange.schema import (
    AUCTION_SIDE, CALL_MARKET_PRICE, CALL_PHASES, Event, Flag, Kind, OrderType, Phase, Reason,
    Tif,
)

from exsim.replay.verification.auction_book import _Order, _PhaseBook
from exsim.replay.verification.phases import PhaseOptions, _band
from exsim.replay.verification.uncross import allocate, uncross

__all__ = ["AUCTION_RULES", "PhaseChecker"]

AUCTION_RULES = ("phase", "trade_in_call", "auction_price", "auction_allocation", "indicative",
                 "band")
# the kernel's rules on a fill's own rows, checked here where the kernel no longer runs
FILL_RULES = ("row_fields", "opposite_sides", "overfill", "events_fills")

_CALLS = frozenset(int(p) for p in CALL_PHASES)
_PHASES = frozenset(int(p) for p in Phase)
_NEW, _MODIFY, _PHASE_KIND = int(Kind.NEW), int(Kind.MODIFY), int(Kind.PHASE)
_CONT, _CLOSED, _HALTED, _REOPEN = int(Phase.CONTINUOUS), int(Phase.CLOSED), int(Phase.HALTED), \
    int(Phase.REOPENING_AUCTION)
_OPENING, _CLOSING = int(Phase.OPENING_AUCTION), int(Phase.CLOSING_AUCTION)
_AUCTION_OF = {int(Phase.PRE_OPEN): _OPENING, int(Phase.PRE_CLOSE): _CLOSING, _REOPEN: _REOPEN}
_ENTERS = {_OPENING: _CONT, _CLOSING: _CLOSED}
_LIMIT_TYPES = (int(OrderType.LIMIT), int(OrderType.STOP_LIMIT))
_STOP_TYPES = (int(OrderType.STOP), int(OrderType.STOP_LIMIT))


class PhaseChecker(_PhaseBook):
    """Checks one symbol's rows from its first phase activity on (see the module docstring).

    ``feed`` takes the symbol's rows (seq order) range by range; ``violations`` collects
    (seq, rule, detail) and ``counts`` every violation per rule."""

    def __init__(self, opts: PhaseOptions, seed=(), last_px: int = 0, traded: bool = False,
                 max_violations: int = 1000):
        super().__init__(seed, opts.phase)
        self.opts = opts
        self.last_px, self.traded = last_px, traded
        self.ref = opts.reference_price
        self.auction = _AUCTION_OF.get(opts.phase)        # the pending auction (None: none)
        self.reopen_end = 0
        self.published = (0, 0, 0)
        self.violations: list = []
        self.counts = dict.fromkeys(AUCTION_RULES + ("crossed_book", "resting_price",
                                                     "price_limits") + FILL_RULES, 0)
        self.max_violations = max_violations

    # ------------------------------------------------------------ plumbing
    def _v(self, seq: int, rule: str, detail: str) -> None:
        self.counts[rule] += 1
        if len(self.violations) < self.max_violations:
            self.violations.append((int(seq), rule, detail))

    def _reference(self) -> int:
        if self.ref > 0:
            return self.ref
        return self.last_px if self.traded else 0

    def _answer(self) -> tuple[int, int, int]:
        return uncross(list(self.levels[0].items()), list(self.levels[1].items()),
                       self._reference())

    # ------------------------------------------------------------ the rows
    def feed(self, orders, fills, events) -> None:
        """Check the next rows of the symbol (all tables seq-ordered, seqs at or after the
        hand-over). Returns None; violations accumulate."""
        # why plain dicts: a numpy row's field read costs a microsecond, a dict's tens of ns
        orders, fills, events = (
            [dict(zip(t.dtype.names, r)) for r in t.tolist()] for t in (orders, fills, events))
        mi = fi = ei = 0
        no, nf, ne = len(orders), len(fills), len(events)
        while mi < no or fi < nf or ei < ne:
            seq = min(t[j]["seq"] for t, j, n in ((orders, mi, no), (fills, fi, nf),
                                                  (events, ei, ne)) if j < n)
            m = None
            if mi < no and orders[mi]["seq"] == seq:
                m = orders[mi]
                mi += 1
            f_hi = fi
            while f_hi < nf and fills[f_hi]["seq"] == seq:
                f_hi += 1
            e_hi = ei
            while e_hi < ne and events[e_hi]["seq"] == seq:
                e_hi += 1
            self._message(seq, m, fills[fi:f_hi], events[ei:e_hi])
            fi, ei = f_hi, e_hi

    def _message(self, seq: int, m, fills, events) -> None:
        ts = int(m["ts"]) if m is not None else (int(events[0]["ts"]) if events else 0)
        kind = int(m["kind"]) if m is not None else -1
        mid = int(m["order_id"]) if m is not None else None
        st = _Msg(self.last_px if self.traded else 0)
        own_rejected = False
        fj = 0
        pair = 0
        for k in range(len(events)):
            ev = events[k]
            et, rs, oid = int(ev["event"]), int(ev["reason"]), int(ev["order_id"])
            if et == int(Event.CANCELLED) and rs == int(Reason.EXPIRED):
                self._drop(oid)
            elif et == int(Event.REJECTED):
                if m is not None and oid == mid:
                    own_rejected = True
                    self._rejected(seq, ts, m, rs)
            elif et == int(Event.ACCEPTED):
                if m is not None and kind == _NEW and oid == mid:
                    self._settle(seq, st)
                    st.aggressor = self._accepted(seq, m)
            elif et == int(Event.MODIFIED):
                if m is not None and kind == _MODIFY and oid == mid:
                    self._settle(seq, st)
                    st.aggressor = self._modified(seq, m, None)
            elif et == int(Event.CANCELLED):
                o = self.book.get(oid)
                if st.uncross is not None and o is not None and o.market and \
                        rs == int(Reason.NO_LIQUIDITY):
                    st.uncross.cancelled.add(oid)
                if o is not None and o is st.aggressor and self.phase == _CONT and rs in (
                        int(Reason.NO_LIQUIDITY), int(Reason.IOC_UNFILLED)):
                    self._stopped_at_band(seq, o, st)
                self._drop(oid)
            elif et in (int(Event.PARTIAL), int(Event.FILLED)):
                if pair == 0 and fj < len(fills):
                    self._fill(seq, fills[fj], st)
                    fj += 1
                    pair = 2
                self._report(seq, ev, et, st)
                pair = max(pair - 1, 0)
            elif et == int(Event.TRIGGERED):
                self._settle(seq, st)
                st.aggressor = self._triggered(seq, oid)
            elif et == int(Event.UNCROSS):
                self._uncross_start(seq, ts, ev, m, st)
            elif et == int(Event.PHASE):
                self._phase_event(seq, ts, ev, m, st)
            elif et == int(Event.INDICATIVE):
                self._indicative(seq, ev)
            want = st.uncross.auction if et == int(Event.UNCROSS) and st.uncross is not None \
                else self.phase
            if et != int(Event.UNCROSS) and int(ev["phase"]) != want:
                self._v(seq, "phase", f"event {Event(et).name} carries phase {int(ev['phase'])}, "
                        f"the symbol is in {Phase(want).name}")
        for j in range(fj, len(fills)):      # fills without reports: still deals
            self._fill(seq, fills[j], st)
        self._end(seq, ts, m, kind, own_rejected, st)

    # ------------------------------------------------------------ messages
    def _rejected(self, seq, ts, m, rs) -> None:
        kind = int(m["kind"])
        if kind == _PHASE_KIND:
            want = self._phase_reject(m, ts)
            if rs != want and rs not in (int(Reason.BAD_KIND), int(Reason.UNKNOWN_SYMBOL)):
                self._v(seq, "phase", f"PHASE message rejected with reason {rs}; the rules say "
                        f"{want} (0: valid)")
            return
        if kind not in (_NEW, _MODIFY):
            return
        halted = {_HALTED: int(Reason.SYMBOL_HALTED), _CLOSED: int(Reason.SYMBOL_CLOSED)}
        want = halted.get(self.phase)
        if want is not None and rs != want and rs not in (int(Reason.BAD_KIND),
                                                          int(Reason.UNKNOWN_SYMBOL)):
            self._v(seq, "phase", f"order {int(m['order_id'])} rejected with reason {rs} while "
                    f"{Phase(self.phase).name}; the rules say {want}")
        if rs in halted.values() and rs != want:
            self._v(seq, "phase", f"order {int(m['order_id'])} rejected {Reason(rs).name} while "
                    f"{Phase(self.phase).name}")
        if rs == int(Reason.NOT_IN_CALL) and not self._refused_in_call(m):
            self._v(seq, "phase", f"order {int(m['order_id'])} rejected NOT_IN_CALL while "
                    f"{Phase(self.phase).name}")
        if rs == int(Reason.OUTSIDE_STATIC_BAND):
            lo, hi = self._static()
            if lo is None or lo <= int(m["price"]) <= hi:
                self._v(seq, "band", f"order {int(m['order_id'])} rejected OUTSIDE_STATIC_BAND at "
                        f"{int(m['price'])}, the static band is "
                        f"{'off' if lo is None else f'[{lo}, {hi}]'}")

    def _phase_reject(self, m, ts) -> int:
        target, price, exp = int(m["phase"]), int(m["price"]), int(m["expire_ts"])
        if target not in _PHASES:
            return int(Reason.BAD_PHASE)
        if price < 0:
            return int(Reason.BAD_PRICE)
        if price > 0 and not self.opts.min_price <= price <= self.opts.max_price:
            return int(Reason.PRICE_OUT_OF_BAND)
        if price > 0 and not self.opts.on_grid(price):
            return int(Reason.OFF_TICK)
        if exp != 0 and (target != _REOPEN or exp <= ts):
            return int(Reason.BAD_EXPIRY)
        return 0

    def _refused_in_call(self, m) -> bool:
        """Whether the phase's NOT_IN_CALL applies to NEW/MODIFY ``m``."""
        if self.phase not in _CALLS:
            return False
        if int(m["kind"]) == _NEW:
            return int(m["tif"]) in (int(Tif.IOC), int(Tif.FOK)) or \
                bool(int(m["flags"]) & int(Flag.POST_ONLY)) or int(m["min_qty"]) > 0
        o = self.book.get(int(m["order_id"]))
        return o is not None and o.market and o.resting

    def _static(self):
        if self.opts.static_band_bps > 0 and self.ref > 0:
            return _band(self.ref, self.opts.static_band_bps)
        return None, None

    def _check_static(self, seq, oid, price) -> None:
        lo, hi = self._static()
        if lo is not None and not lo <= price <= hi:
            self._v(seq, "band", f"order {oid} accepted at {price}, outside the static band "
                    f"[{lo}, {hi}] around {self.ref}")

    def _accepted(self, seq, m):
        oid, otype = int(m["order_id"]), int(m["order_type"])
        if self.phase in (_HALTED, _CLOSED):
            self._v(seq, "phase", f"NEW {oid} accepted while {Phase(self.phase).name}")
        elif self._refused_in_call(m):
            self._v(seq, "phase", f"NEW {oid} (tif {int(m['tif'])}, flags {int(m['flags'])}, "
                    f"min_qty {int(m['min_qty'])}) accepted in a call")
        if otype in _LIMIT_TYPES:
            self._check_static(seq, oid, int(m["price"]))
        market = otype in (int(OrderType.MARKET), int(OrderType.STOP))
        pending = otype in _STOP_TYPES
        o = _Order(oid, int(m["side"]), 0 if market else int(m["price"]), int(m["qty"]),
                   int(m["display_qty"]) if otype == int(OrderType.LIMIT) else 0, market,
                   int(m["tif"]), otype, pending, int(m["price"]), self._next_prio(),
                   int(m["trader"]))
        self.book[oid] = o
        if pending:
            return None
        if self.phase in _CALLS:       # nothing matches in a call: it rests at once
            self._rest(o)
            return None
        return o

    def _modified(self, seq, m, aggressor):
        oid = int(m["order_id"])
        o = self.book.get(oid)
        if self.phase in (_HALTED, _CLOSED):
            self._v(seq, "phase", f"MODIFY of {oid} accepted while {Phase(self.phase).name}")
        elif self._refused_in_call(m):
            self._v(seq, "phase", f"MODIFY of call market order {oid} accepted")
        if o is None:
            return aggressor
        q, price = int(m["qty"]), int(m["price"])
        if o.pending:
            if o.otype == int(OrderType.STOP_LIMIT):
                self._check_static(seq, oid, price)
                o.limit = price
            o.open = q
            return aggressor
        if not o.market:
            self._check_static(seq, oid, price)
        if not o.market and price != o.price:
            o.price, o.open, o.prio = price, q, self._next_prio()
            o.resting = False
            self._count(o)
            if self.phase in _CALLS:
                self._rest(o)
                return aggressor
            return o
        if q > o.open:
            o.prio = self._next_prio()
            o.open = q
            o.shown = min(o.display, q) if o.display > 0 else q
        else:
            reserve = o.open - o.shown
            cut = o.open - q
            o.shown -= cut - min(cut, reserve)
            o.open = q
        self._count(o)
        return aggressor

    def _triggered(self, seq, oid):
        o = self.book.get(oid)
        if self.phase != _CONT:
            self._v(seq, "phase", f"stop {oid} released while {Phase(self.phase).name}")
        if o is None:
            return None
        o.pending = False
        o.price = 0 if o.market else o.limit
        o.prio = self._next_prio()
        self._count(o)
        if self.phase in _CALLS:
            self._rest(o)
            return None
        return o

    # ------------------------------------------------------------ fills
    def _fill(self, seq, f, st) -> None:
        agg, price, q = int(f["aggressor_side"]), int(f["price"]), int(f["qty"])
        tid = int(f["trade_id"])
        u = st.uncross
        if agg == AUCTION_SIDE and u is None:
            self._v(seq, "trade_in_call", f"auction trade {tid} outside an uncross")
        if u is not None:     # every deal of an uncross counts for its allocation
            if agg == AUCTION_SIDE and price != u.price:
                self._v(seq, "auction_price", f"auction trade {tid} at {price}, the uncross "
                        f"price is {u.price}")
            got = (int(f["buy_order_id"]), int(f["sell_order_id"]), q)
            j = len(u.got)
            if j >= len(u.want) or u.want[j] != got:
                if not u.flagged:
                    want = u.want[j] if j < len(u.want) else "none"
                    self._v(seq, "auction_allocation", f"auction trade {tid} is (buy, sell, "
                            f"qty) {got}; priority gives {want}")
                u.flagged = True
            u.got.append(got)
        if agg in (0, 1):
            self._continuous_prices(seq, f, agg, price)
        if agg != AUCTION_SIDE:
            if u is not None or self.phase != _CONT:
                self._v(seq, "trade_in_call", f"continuous trade {tid} (aggressor side {agg}) "
                        f"while {Phase(self.phase).name}"
                        + (" during an uncross" if u is not None else ""))
            elif self.opts.dynamic_band_bps > 0 and st.band_ref > 0:
                lo, hi = _band(st.band_ref, self.opts.dynamic_band_bps)
                if not lo <= price <= hi:
                    self._v(seq, "band", f"trade {tid} printed at {price}, outside the dynamic "
                            f"band [{lo}, {hi}] around {st.band_ref}")
        self._fill_rows(seq, f, q, st)
        for oid in (int(f["buy_order_id"]), int(f["sell_order_id"])):
            o = self.book.get(oid)
            if o is None:
                continue
            o.open -= q
            if o.open <= 0:
                self._drop(oid)
                continue
            if o.resting and o.display > 0:
                o.shown -= q
                if o.shown <= 0:   # used up with reserve left: a new slice at the back
                    o.shown = min(o.display, o.open)
                    o.prio = self._next_prio()
            elif o.resting:
                o.shown = o.open
            self._count(o)
        self.last_px, self.traded = price, True

    def _fill_rows(self, seq, f, q, st) -> None:
        """A fill's own rows against the book before it is applied (the kernel's rules, checked
        here where the kernel no longer runs): ``row_fields`` (its traders are the orders'),
        ``opposite_sides`` (its buy order buys, its sell order sells), ``overfill`` (no more
        than either order has open); each order's open quantity after it goes to ``st.after``
        for its execution report (``_report``). Returns None."""
        tid = int(f["trade_id"])
        ids = (int(f["buy_order_id"]), int(f["sell_order_id"]))
        traders = (int(f["buy_trader"]), int(f["sell_trader"]))
        orders = [self.book.get(i) for i in ids]
        known = [o.trader if o is not None else -1 for o in orders]
        if all(t >= 0 for t in known) and tuple(known) != traders:
            self._v(seq, "row_fields", f"fill traders (buy {traders[0]}, sell {traders[1]}) are "
                    f"not the orders' traders ({known[0]}, {known[1]})")
        for side, (oid, o) in enumerate(zip(ids, orders)):
            if o is None:
                continue
            if o.side != side:
                self._v(seq, "opposite_sides", f"trade {tid} names order {oid} as its "
                        f"{'buy' if side == 0 else 'sell'} order; it is on the other side")
            if q > o.open:
                self._v(seq, "overfill", f"trade {tid} fills {q} of order {oid}, which has "
                        f"{o.open} open")
            st.after[oid] = max(o.open - q, 0)

    def _report(self, seq, ev, et, st) -> None:
        """``events_fills``: a PARTIAL/FILLED report of an order a fill of this message named
        says what the fills left of it (leaves quantity, and FILLED exactly at 0). On a
        mismatch the order is re-synchronised to the report, as the kernel does, so one defect
        is found at its own seq and not again at every later fill of the order. Returns None."""
        oid = int(ev["order_id"])
        want = st.after.get(oid)
        if want is None:
            return
        leaves = int(ev["leaves_qty"])
        if leaves == want and (et == int(Event.FILLED)) == (want == 0):
            return
        self._v(seq, "events_fills", f"report of order {oid}: {Event(et).name}, leaves "
                f"{leaves}; its fills leave {want}")
        st.after[oid] = leaves
        o = self.book.get(oid)
        if o is None:
            return
        o.open = leaves
        if leaves <= 0:
            self._drop(oid)
            return
        if o.resting:
            o.shown = o.open if o.display <= 0 else min(max(o.shown, 1), o.open)
        self._count(o)

    def _continuous_prices(self, seq, f, agg, price) -> None:
        """``resting_price`` and ``price_limits`` of a continuous fill (the kernel's rules,
        checked here where the kernel no longer runs)."""
        ids = (int(f["buy_order_id"]), int(f["sell_order_id"]))
        rest = self.book.get(ids[1 - agg])
        inc = self.book.get(ids[agg])
        if rest is not None and rest.resting and price != rest.price:
            self._v(seq, "resting_price", f"fill price {price} is not resting order "
                    f"{rest.oid}'s price {rest.price}")
        if inc is not None and not inc.market and not inc.pending and (
                (agg == 0 and price > inc.price) or (agg == 1 and price < inc.price)):
            self._v(seq, "price_limits", f"fill price {price} is outside the limit {inc.price} "
                    f"of order {inc.oid}")

    # ------------------------------------------------------------ uncross and phases
    def _uncross_due(self, ts) -> bool:
        return self.phase == _REOPEN and self.reopen_end != 0 and self.reopen_end <= ts

    def _uncross_start(self, seq, ts, ev, m, st) -> None:
        if st.uncross is not None:
            self._v(seq, "phase", "a second UNCROSS before the first one's PHASE event")
        if self._uncross_due(ts) and not st.auction_end_done:
            auction, cause = _REOPEN, "end"
        elif m is not None and int(m["kind"]) == _PHASE_KIND and not st.own_phase_done:
            auction, cause = self._uncross_auction(int(m["phase"])), "message"
            if auction is None:
                self._v(seq, "phase", f"UNCROSS at a PHASE message to "
                        f"{_name(int(m['phase']))}, which runs no uncross")
                auction = int(ev["phase"])
        else:
            self._v(seq, "phase", "UNCROSS with no PHASE message or auction end to cause it")
            auction, cause = int(ev["phase"]), "none"
        if int(ev["phase"]) != auction:
            self._v(seq, "phase", f"UNCROSS names auction {int(ev['phase'])}, the auction is "
                    f"{_name(auction)}")
        if cause == "message":
            self._apply_reference(m)
        p, v, s = self._answer()
        got = (int(ev["price"]),
               int(ev["filled_qty"]), int(ev["leaves_qty"]))
        if got != (p, v, s):
            self._v(seq, "auction_price", f"UNCROSS (price, volume, surplus) {got}; the rules "
                    f"give {(p, v, s)} for the call book")
        buys, sells = self._sides()
        want = allocate([(o.price, o.prio, o.oid, o.open) for o in buys],
                        [(o.price, o.prio, o.oid, o.open) for o in sells], p, v) if v > 0 else []
        markets = [o.oid for o in buys + sells if o.market]
        st.uncross = _Uncross(auction, cause, p, v, want, markets)

    def _uncross_auction(self, target):
        """The auction a PHASE message to ``target`` runs now (None: no uncross)."""
        if target in (_OPENING, _CLOSING):
            return target
        if target in (_CONT, _CLOSED) and self.auction is not None:
            return self.auction
        return None

    def _apply_reference(self, m) -> None:
        if int(m["price"]) > 0:
            self.ref = int(m["price"])

    def _uncross_end(self, seq, st) -> None:
        u = st.uncross
        st.uncross = None
        total = sum(q for _, _, q in u.got)
        if total != u.volume:
            self._v(seq, "auction_allocation", f"auction trades add up to {total}; the uncross "
                    f"volume is {u.volume}")
        elif len(u.got) != len(u.want) and not u.flagged:
            self._v(seq, "auction_allocation", f"{len(u.got)} auction trades; priority gives "
                    f"{len(u.want)}")
        for oid in u.markets:
            if oid in self.book and oid not in u.cancelled:
                self._v(seq, "auction_allocation", f"market order {oid} left resting after the "
                        f"uncross")
                self._drop(oid)
        if u.volume > 0:
            self.ref = u.price
            st.band_ref = u.price     # stops released after it match in a band around it
        self.auction = None
        st.uncrossed = True

    def _phase_event(self, seq, ts, ev, m, st) -> None:
        rs, new = int(ev["reason"]), int(ev["phase"])
        if rs == int(Reason.AUCTION_END):
            if st.uncross is None or st.uncross.cause != "end":
                self._v(seq, "phase", "AUCTION_END without the re-opening auction's uncross")
            if st.uncross is not None:
                self._uncross_end(seq, st)
            if not self._uncross_due(ts) and self.phase != _REOPEN:
                self._v(seq, "phase", f"AUCTION_END while {Phase(self.phase).name}")
            self._enter(seq, _CONT, new, ev, 0)
            st.auction_end_done = True
            st.band_ref = self.last_px if self.traded else 0
            return
        if rs == int(Reason.PRICE_BAND):
            self._price_band(seq, ts, st)
            self._enter(seq, _REOPEN, new, ev, ts + self.opts.interruption_ns)
            a = st.aggressor
            if a is not None and a.oid in self.book:
                self._rest(a)
            st.aggressor = None
            return
        if rs != 0:
            self._v(seq, "phase", f"PHASE event with reason {rs}")
        if m is None or int(m["kind"]) != _PHASE_KIND or st.own_phase_done:
            self._v(seq, "phase", "PHASE event with no PHASE message")
            if st.uncross is not None:
                self._uncross_end(seq, st)
            return
        st.own_phase_done = True
        target = int(m["phase"])
        due = self._uncross_auction(target)
        had = st.uncross is not None and st.uncross.cause == "message"
        if st.uncross is not None:
            self._uncross_end(seq, st)
        else:
            self._apply_reference(m)
        if due is not None and not had:
            self._v(seq, "phase", f"PHASE message to {_name(target)} ran no uncross (auction "
                    f"{_name(due)} pending)")
        self._enter(seq, _ENTERS.get(target, target), new, ev, int(m["expire_ts"]))

    def _enter(self, seq, phase, new, ev, end) -> None:
        if new >= 0 and new != phase:
            self._v(seq, "phase", f"PHASE event enters {_name(new)}; the rules say "
                    f"{_name(phase)}")
        if int(ev["price"]) != self.ref:
            self._v(seq, "phase", f"PHASE event carries reference price {int(ev['price'])}; it "
                    f"is {self.ref}")
        if phase in _CALLS:
            self.auction = _AUCTION_OF[phase]
            self.published = (0, 0, 0)
        if phase == _REOPEN:
            self.reopen_end = end
        elif phase != _HALTED:
            self.reopen_end = 0
        if phase not in _CALLS:
            self.published = (0, 0, 0)
        self.phase = phase
        for o in self.book.values():       # market orders entering a call take its price
            if o.resting and o.market and phase in _CALLS:
                o.price = CALL_MARKET_PRICE[o.side]
                self._count(o)

    def _price_band(self, seq, ts, st) -> None:
        a = st.aggressor
        if self.phase != _CONT or self.opts.dynamic_band_bps <= 0 or st.band_ref <= 0:
            self._v(seq, "band", f"PRICE_BAND interruption while {Phase(self.phase).name} with "
                    f"dynamic band {self.opts.dynamic_band_bps} bps around {st.band_ref}")
            return
        if a is None or st.uncross is not None:
            self._v(seq, "band", "PRICE_BAND interruption with no incoming order matching")
            return
        best = self._best(1 - a.side)
        lo, hi = _band(st.band_ref, self.opts.dynamic_band_bps)
        crosses = best is not None and (a.market or (a.side == 0 and best <= a.price)
                                        or (a.side == 1 and best >= a.price))
        if not crosses or lo <= best <= hi:
            self._v(seq, "band", f"PRICE_BAND interruption, but order {a.oid}'s next fill "
                    f"({'none' if not crosses else best}) is inside the band [{lo}, {hi}]")

    def _indicative(self, seq, ev) -> None:
        got = (int(ev["price"]),
               int(ev["filled_qty"]), int(ev["leaves_qty"]))
        if self.phase not in _CALLS:
            self._v(seq, "indicative", f"INDICATIVE while {Phase(self.phase).name}")
            return
        want = self._answer()
        if got != want:
            self._v(seq, "indicative", f"INDICATIVE (price, volume, surplus) {got}; the rules "
                    f"give {want} for the call book")
        elif got == self.published:
            self._v(seq, "indicative", f"INDICATIVE {got} repeats the one published before")
        self.published = got

    def _end(self, seq, ts, m, kind, own_rejected, st) -> None:
        if st.uncross is not None:
            self._v(seq, "phase", "UNCROSS without its PHASE event")
            self._uncross_end(seq, st)
        if self._uncross_due(ts):
            self._v(seq, "phase", f"the re-opening auction ended at {self.reopen_end}, no "
                    f"AUCTION_END uncross by ts {ts}")
            self.reopen_end = 0
        if kind == _PHASE_KIND and not own_rejected and not st.own_phase_done:
            want = self._phase_reject(m, ts)
            self._v(seq, "phase", "PHASE message with no PHASE event" if want == 0 else
                    f"invalid PHASE message (reason {want}) not rejected")
        a = st.aggressor
        self._finish_matching(a)
        if self.phase in _CALLS:
            want = self._answer()
            if want != self.published:
                self._v(seq, "indicative", f"no INDICATIVE for the call book's uncross {want} "
                        f"(published: {self.published})")
                self.published = want
        elif self.phase == _CONT:
            if a is not None and a.oid in self.book and self._stopped_at_band(seq, a, st):
                return
            bb, ba = self._best(0), self._best(1)
            if bb is not None and ba is not None and bb >= ba:
                self._v(seq, "crossed_book", f"book crossed after the message: best bid "
                        f"{bb} >= best ask {ba}")

    def _finish_matching(self, a) -> None:
        """Aggressor ``a`` (None: none) has matched all it will: what is left of it rests, or
        leaves the book if it may not rest (the kernel's order_type rule). Returns None."""
        if a is not None and a.oid in self.book and not a.resting:
            if a.market or a.tif in (int(Tif.IOC), int(Tif.FOK)):
                self._drop(a.oid)
            else:
                self._rest(a)

    def _settle(self, seq, st) -> None:
        """The message's next matcher (a released stop, or the message's own NEW or MODIFY
        after the stops an uncross released) starts: the current aggressor has finished, as
        every released order is matched in full and rests before the next one (docs/semantics.md
        "Stops"). Its rest joins the book, and in CONTINUOUS it must not have stopped at a
        crossing order outside the dynamic band (``band``). Returns None."""
        a, st.aggressor = st.aggressor, None
        self._finish_matching(a)
        if a is not None and self.phase == _CONT and a.oid in self.book:
            self._stopped_at_band(seq, a, st)

    def _stopped_at_band(self, seq, a, st) -> bool:
        """``band``: aggressor ``a`` stopped matching (it rests, or its rest is cancelled) in
        CONTINUOUS with a crossing opposite order outside the dynamic band and no
        interruption. Returns whether it did (the violation is recorded)."""
        if self.opts.dynamic_band_bps <= 0 or st.band_ref <= 0:
            return False
        best = self._best(1 - a.side)
        if best is None or not (a.market or (a.side == 0 and best <= a.price)
                                or (a.side == 1 and best >= a.price)):
            return False
        lo, hi = _band(st.band_ref, self.opts.dynamic_band_bps)
        if lo <= best <= hi:
            return False
        self._v(seq, "band", f"order {a.oid} stopped before {best}, outside the band "
                f"[{lo}, {hi}], without a PRICE_BAND interruption")
        return True

    def finish(self) -> None:
        """Nothing is pending after the symbol's last row (uncrosses close within their
        message). Returns None."""


class _Msg:
    """What one message's rows have shown so far."""

    __slots__ = ("aggressor", "uncross", "own_phase_done", "auction_end_done", "uncrossed",
                 "band_ref", "after")

    def __init__(self, band_ref: int):
        self.after = {}    # order id -> open quantity its latest fill of the message left
        self.aggressor = None
        self.uncross = None
        self.own_phase_done = self.auction_end_done = self.uncrossed = False
        self.band_ref = band_ref


class _Uncross:
    """An uncross under way: its auction, cause, the rules' price and volume, the fills
    priority gives, the fills seen, the market orders that must be cancelled after it."""

    __slots__ = ("auction", "cause", "price", "volume", "want", "got", "flagged", "markets",
                 "cancelled")

    def __init__(self, auction, cause, price, volume, want, markets):
        self.auction, self.cause, self.price, self.volume = auction, cause, price, volume
        self.want, self.got, self.flagged = want, [], False
        self.markets, self.cancelled = markets, set()


def _name(phase: int) -> str:
    return Phase(phase).name if phase in _PHASES else str(phase)
