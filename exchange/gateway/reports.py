"""Execution reports: what a client is told about its orders, derived from the engine's rows.

``derive`` turns one batch's journaled rows (the order messages and their fills and events)
into ``Report`` objects, using the gateway's per-order state (``OrderState``: who sent the
order, its client order id, cumulative quantity and notional). The live gateway calls it on the
engine's Result; recovery after a crash calls it on the same rows read back from the store, so
the reports of a batch are the same bytes whichever path made them.

Invariants:
- A report's quantities come from the engine's event row (``cum_qty`` = the event's
  ``filled_qty``, ``leaves_qty`` its ``leaves_qty``); ``last_qty`` is the difference from the
  previous cumulative quantity and ``last_px`` / ``trade_id`` come from the fill the event
  belongs to (the k-th PARTIAL/FILLED event of an order in a message is its k-th fill there).
- Symbol events (order id 0) and events of orders the gateway did not send make no report.
- ``to_json`` is deterministic (sorted keys, no spaces), so equal reports are equal bytes.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from dataclasses import dataclass, fields
from json.encoder import encode_basestring_ascii as _json_str

import numpy as np

from exsim.exchange.schema import Event, Kind, Reason

__all__ = ["Report", "OrderState", "Origin", "derive", "origin_reject", "renumbered_json",
           "EXEC_KINDS", "STATUSES"]

EXEC_KINDS = ("new", "rejected", "trade", "canceled", "replaced", "expired", "triggered",
              "cancel_rejected", "replace_rejected")
STATUSES = ("pending", "new", "partially_filled", "filled", "canceled", "expired", "rejected")


class _JsonRow:
    """One line of JSON per row of the gateway's state file: ``to_json`` (sorted keys, no
    spaces: equal rows, equal bytes) and ``from_json`` (exactly the class's fields)."""

    __slots__ = ()

    def to_json(self) -> str:
        """Return the row as one line of JSON."""
        return _to_json(self)

    @classmethod
    def from_json(cls, text: str):
        """Return the row ``to_json`` wrote. Raises ValueError for anything else (not JSON, not
        an object, or other fields than the class's)."""
        data = json.loads(text)
        if not isinstance(data, dict) or set(data) != {f.name for f in fields(cls)}:
            raise ValueError(f"not a {cls.__name__} row: the fields differ")
        return cls(**data)


@dataclass(frozen=True)
class Report(_JsonRow):
    """One execution report (fields: docs/gateway.md, "Execution reports")."""

    stream: str
    rseq: int
    seq: int
    ts: int
    exec: str
    status: str
    order_id: int
    client_order_id: str
    orig_client_order_id: str
    account: str
    symbol: str
    side: int
    order_type: int
    tif: int
    price: int
    stop_price: int
    qty: int
    last_px: int = 0
    last_qty: int = 0
    trade_id: int = 0
    cum_qty: int = 0
    leaves_qty: int = 0
    avg_px: float = 0.0
    reason: int = 0
    text: str = ""


@dataclass
class OrderState(_JsonRow):
    """What the gateway knows of one order it sent to the engine."""

    order_id: int
    account: str
    firm: str
    stream: str
    client_order_id: str
    symbol: str
    side: int
    order_type: int
    tif: int
    price: int
    stop_price: int
    qty: int             # total order quantity (cum + open), as a FIX client counts it
    cum_qty: int = 0
    notional: int = 0    # sum of price * qty over its fills (ticks * lots)
    leaves_qty: int = 0
    status: str = "pending"


    @property
    def avg_px(self) -> float:
        """Average fill price in ticks (0.0 before the first fill)."""
        return self.notional / self.cum_qty if self.cum_qty else 0.0


@dataclass(frozen=True)
class Origin(_JsonRow):
    """The request behind one engine message: which order it names and who asked."""

    kind: str                  # "new", "cancel", "replace"
    order_id: int              # the engine order id it names (0: none known)
    stream: str
    client_order_id: str
    orig_client_order_id: str = ""
    qty: int = 0               # replace: the new total quantity asked for
    price: int = 0
    stop_price: int = 0
    account: str = ""
    firm: str = ""
    symbol: str = ""


def _json_float(v) -> str:
    text = float.__repr__(v)   # raises TypeError for a value that is not a float
    if text in ("nan", "inf", "-inf"):
        raise TypeError("json writes NaN / Infinity")   # the slow path writes them as json does
    return text


_JSON_KINDS = {int: "_int", str: "_str", float: "_float"}


def _json_writer(cls):
    """Return a function of an instance's ``__dict__`` writing what ``json.dumps(d,
    sort_keys=True, separators=(",", ":"))`` writes when every field holds its annotated kind
    (int but not bool, str, finite float); it raises TypeError or KeyError otherwise.

    Why generated: one expression per class, with the keys' JSON fixed in advance, is about
    four times faster than the generic encoder, and every report is written once per stream.
    """
    parts = []
    for i, f in enumerate(sorted(fields(cls), key=lambda f: f.name)):
        kind = _JSON_KINDS[{"int": int, "str": str, "float": float}[f.type]]
        key = ("{" if i == 0 else ",") + _json_str(f.name) + ":"
        parts.append(f"{key!r} + {kind}(d[{f.name!r}])")
    code = f"lambda d: {' + '.join(parts)} + '}}'"
    return eval(code, {"_int": int.__repr__, "_str": _json_str, "_float": _json_float})


def _to_json(obj) -> str:
    """Return ``obj`` (a Report, OrderState or Origin) as json.dumps writes its ``__dict__``
    with sorted keys and no spaces: the generated writer for plain values, json.dumps for
    anything else (a bool, a non-finite float, a value of another kind: same bytes either
    way)."""
    d = obj.__dict__
    writer, n = _WRITERS[type(obj)]
    if len(d) == n and bool not in set(map(type, d.values())):
        try:
            return writer(d)
        except (TypeError, KeyError):
            pass
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


def renumbered_json(body: str, r: Report, stream: str, rseq: int) -> str:
    """Return the ``to_json`` of ``r`` moved to ``stream`` as its report ``rseq``, given
    ``body`` = ``r.to_json()``: the two values replaced in place, since sorted keys put each
    once between fixed neighbours (a str value's quotes are escaped, so the pattern cannot
    occur inside one). Falls back to writing the copy if a pattern is not found exactly once.
    """
    if type(r.rseq) is int and type(rseq) is int and type(r.stream) is str \
            and type(stream) is str:
        old_rseq = f',"rseq":{r.rseq},"seq":'
        old_stream = f',"stream":{_json_str(r.stream)},"symbol":'
        if body.count(old_rseq) == 1 and body.count(old_stream) == 1:
            return body.replace(old_rseq, f',"rseq":{rseq},"seq":').replace(
                old_stream, f',"stream":{_json_str(stream)},"symbol":')
    copy = object.__new__(Report)
    copy.__dict__.update(r.__dict__, stream=stream, rseq=rseq)
    return copy.to_json()


def _base(st: OrderState, seq: int, ts: int, exec_kind: str, *, cid: str | None = None,
          orig: str = "", last_px: int = 0, last_qty: int = 0, trade_id: int = 0,
          reason: int = 0, text: str = "") -> Report:
    # why ``cid``: a report answering a cancel/replace request carries that request's own id
    # why not Report(...): a frozen dataclass's __init__ sets each of its 25 fields through
    # object.__setattr__, and this runs for every report
    r = object.__new__(Report)
    r.__dict__.update(
        stream=st.stream, rseq=0, seq=seq, ts=ts, exec=exec_kind, status=st.status,
        order_id=st.order_id, client_order_id=st.client_order_id if cid is None else cid,
        orig_client_order_id=orig, account=st.account, symbol=st.symbol, side=st.side,
        order_type=st.order_type, tif=st.tif, price=st.price, stop_price=st.stop_price,
        qty=st.qty, last_px=last_px, last_qty=last_qty, trade_id=trade_id, cum_qty=st.cum_qty,
        leaves_qty=st.leaves_qty, avg_px=st.avg_px, reason=reason, text=text)
    return r


def _reason_text(reason: int) -> str:
    try:
        return Reason(reason).name
    except ValueError:
        return f"reason {reason}"


def origin_reject(origin: Origin, seq: int, ts: int, reason: int, text: str = "",
                  state: OrderState | None = None) -> Report:
    """Return the reject answering a request that names no order the gateway knows: a
    cancel/replace of a client order id the account never used (the engine saw order id 0 and
    rejected it, ``reason``), or any request the engine never journaled (seq 0, ``text`` says
    why; ``state``, the order a new order request created, gives its side, type, time in
    force, price and quantity). ``exec`` is rejected / cancel_rejected / replace_rejected by
    the request's kind."""
    exec_kind = "rejected" if origin.kind == "new" else f"{origin.kind}_rejected"
    side = order_type = tif = 0
    price, stop, qty = origin.price, origin.stop_price, origin.qty
    if state is not None:
        side, order_type, tif = state.side, state.order_type, state.tif
        price, stop, qty = state.price, state.stop_price, state.qty
    return Report(stream=origin.stream, rseq=0, seq=seq, ts=ts, exec=exec_kind,
                  status="rejected", order_id=0, client_order_id=origin.client_order_id,
                  orig_client_order_id=origin.orig_client_order_id, account=origin.account,
                  symbol=origin.symbol, side=side, order_type=order_type, tif=tif, price=price,
                  stop_price=stop, qty=qty, reason=reason, text=text or _reason_text(reason))


def derive(first_seq: int, orders: np.ndarray, fills: np.ndarray, events: np.ndarray,
           origins: dict, states: dict) -> list[Report]:
    """Return the reports of one batch, in event order (rseq 0: the caller numbers them).

    ``orders``: the batch's order rows, ORDER_DTYPE or any dtype holding its fields by name
    (the journal's stored rows; message i has seq ``first_seq + i``); ``fills``
    and ``events``: its output rows; ``origins``: {seq: Origin} of the messages the gateway
    sent; ``states``: {order_id: OrderState}, updated in place (cumulative quantity, status,
    client order id after a replace). Each report names the stream of the order; the caller
    copies it to the request's stream and the firm's drop copy.
    Raises nothing for rows it does not know (they make no report).
    """
    trades = defaultdict(deque)   # (seq, order_id) -> its fills at that seq, in order
    for f in fills:
        s = int(f["seq"])
        trades[(s, int(f["buy_order_id"]))].append(f)
        trades[(s, int(f["sell_order_id"]))].append(f)
    out: list[Report] = []
    for ev in events:
        oid = int(ev["order_id"])
        seq, ts, kind = int(ev["seq"]), int(ev["ts"]), int(ev["event"])
        origin = origins.get(seq)
        st = states.get(oid)
        if st is None and kind == Event.REJECTED and origin is not None and origin.order_id == 0 \
                and origin.kind != "new" and oid == 0:
            out.append(origin_reject(origin, seq, ts, int(ev["reason"])))
            continue
        if oid == 0 or st is None:
            continue
        msg_kind = int(orders[seq - first_seq]["kind"]) if 0 <= seq - first_seq < len(orders) else -1
        by_request = origin is not None and origin.order_id == oid
        cum, leaves, reason = int(ev["filled_qty"]), int(ev["leaves_qty"]), int(ev["reason"])
        if kind == Event.ACCEPTED:
            st.status, st.leaves_qty = "new", leaves
            out.append(_base(st, seq, ts, "new"))
        elif kind == Event.REJECTED:
            if by_request and msg_kind == Kind.CANCEL:
                out.append(_base(st, seq, ts, "cancel_rejected", orig=origin.orig_client_order_id,
                                 reason=reason, text=_reason_text(reason),
                                 cid=origin.client_order_id))
            elif by_request and msg_kind == Kind.MODIFY:
                out.append(_base(st, seq, ts, "replace_rejected",
                                 orig=origin.orig_client_order_id, reason=reason,
                                 text=_reason_text(reason), cid=origin.client_order_id))
            else:
                st.status, st.leaves_qty = "rejected", 0
                out.append(_base(st, seq, ts, "rejected", reason=reason, text=_reason_text(reason)))
        elif kind in (Event.PARTIAL, Event.FILLED):
            last_qty = cum - st.cum_qty
            q = trades.get((seq, oid))
            f = q.popleft() if q else None
            last_px = int(ev["price"]) if f is None else int(f["price"])
            st.cum_qty, st.leaves_qty = cum, leaves
            st.notional += last_px * last_qty
            st.status = "filled" if kind == Event.FILLED else "partially_filled"
            out.append(_base(st, seq, ts, "trade", last_px=last_px, last_qty=last_qty,
                             trade_id=0 if f is None else int(f["trade_id"])))
        elif kind == Event.CANCELLED:
            st.leaves_qty = 0
            st.status = "expired" if reason == Reason.EXPIRED else "canceled"
            exec_kind = "expired" if reason == Reason.EXPIRED else "canceled"
            if by_request and msg_kind == Kind.CANCEL:
                r = _base(st, seq, ts, exec_kind, orig=origin.orig_client_order_id, reason=reason,
                          text=_reason_text(reason), cid=origin.client_order_id)
            else:
                r = _base(st, seq, ts, exec_kind, reason=reason, text=_reason_text(reason))
            out.append(r)
        elif kind == Event.MODIFIED:
            orig = st.client_order_id
            if by_request:
                st.client_order_id = origin.client_order_id
                if origin.price:
                    st.price = origin.price
                if origin.stop_price:
                    st.stop_price = origin.stop_price
            st.leaves_qty = leaves
            st.qty = st.cum_qty + leaves
            st.status = "partially_filled" if st.cum_qty else "new"
            out.append(_base(st, seq, ts, "replaced", orig=orig if by_request else ""))
        elif kind == Event.TRIGGERED:
            st.leaves_qty = leaves
            out.append(_base(st, seq, ts, "triggered"))
    return out


_WRITERS = {cls: (_json_writer(cls), len(fields(cls))) for cls in (Report, OrderState, Origin)}
