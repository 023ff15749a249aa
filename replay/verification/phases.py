"""Where a symbol's phase activity begins, its phase options, and the band checks before it.

verify checks a symbol with the kernel (``replay.verification.kernel``) up to its first row of
phase activity and with ``PhaseChecker`` (``replay.verification.auctions``) from then on. This
module holds what decides that hand-over and what the kernel side needs of the phase rules:

- ``PhaseOptions`` / ``phase_options``: what the phase checks need of a symbol's engine options
  (docs/semantics.md "Trading phases, auctions and price bands"); absent keys are the defaults,
  as for configs written before phases existed.
- ``first_phase_seq``: the seq of a symbol's first row that only a symbol with phases has (a
  PHASE message, a PHASE/INDICATIVE/UNCROSS event, a phase reason or an auction fill), or its
  first seq when it starts outside CONTINUOUS; ``static_band_rejects`` whether rows hold an
  OUTSIDE_STATIC_BAND reject.
- ``band_rows``: the ``band`` rule over rows where the symbol never left CONTINUOUS (before its
  hand-over), vectorised: the kernel does not check bands.

Written from docs/semantics.md, sharing no code with ``exchange`` (only the schema codes).
Invariant: a symbol without phase activity never reaches ``PhaseChecker``; the kernel checks it
alone (plus ``band_rows`` where the symbol has bands). ``_first_marked`` (the one compiled scan)
reads only its arguments, so its numba cache needs no dependency guard.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from exsim.exchange.schema import AUCTION_SIDE, MAX_PRICE, Event, Kind, OrderType, Phase, Reason

__all__ = ["PhaseOptions", "phase_options", "first_phase_seq", "static_band_rejects",
           "band_rows"]

_PHASES = frozenset(int(p) for p in Phase)
_NEW, _PHASE_KIND = int(Kind.NEW), int(Kind.PHASE)
_CONT = int(Phase.CONTINUOUS)
_SYMBOL_EVENTS = (int(Event.PHASE), int(Event.INDICATIVE), int(Event.UNCROSS))
_PHASE_REASONS = (int(Reason.PRICE_BAND), int(Reason.AUCTION_END), int(Reason.SYMBOL_CLOSED),
                  int(Reason.SYMBOL_HALTED), int(Reason.NOT_IN_CALL), int(Reason.BAD_PHASE))
_LIMIT_TYPES = (int(OrderType.LIMIT), int(OrderType.STOP_LIMIT))


# ------------------------------------------------------------------ options
@dataclass(frozen=True)
class PhaseOptions:
    """What the phase checks need of a symbol's engine options (docs/semantics.md)."""

    reference_price: int = 0
    static_band_bps: int = 0
    dynamic_band_bps: int = 0
    interruption_ns: int = 120_000_000_000
    phase: int = _CONT
    min_price: int = 1
    max_price: int = MAX_PRICE
    tick_table: tuple = ((1, 1),)

    def on_grid(self, p: int) -> bool:
        """Whether price ``p`` is on the symbol's tick table (docs/semantics.md "Symbols")."""
        tick = 1
        for start, t in self.tick_table:
            if start > p:
                break
            tick = t
        return p % tick == 0

    @property
    def banded(self) -> bool:
        """Whether the symbol has a static or a dynamic band."""
        return self.static_band_bps > 0 or self.dynamic_band_bps > 0


def _phase_code(value, error, where: str) -> int:
    if isinstance(value, str):
        try:
            return int(Phase[value.upper()])
        except KeyError:
            raise error(f"{where}: phase must name a Phase; got {value!r}") from None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) \
            and int(value) in _PHASES:
        return int(value)
    raise error(f"{where}: phase must name a Phase; got {value!r}")


def phase_options(entry: dict, error, where: str) -> PhaseOptions:
    """The phase options of one symbol entry of an engine config (absent keys: the defaults,
    as for configs written before phases existed). Returns a PhaseOptions; raises ``error``
    (UsageError or CorruptionError) naming ``where`` for a malformed value."""
    out = {}
    for key, default in (("reference_price", 0), ("static_band_bps", 0),
                         ("dynamic_band_bps", 0), ("interruption_ns", 120_000_000_000),
                         ("min_price", 1), ("max_price", MAX_PRICE)):
        v = entry.get(key, default)
        if v is None:
            v = default
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) < 0:
            raise error(f"{where}: {key} must be a non-negative integer; got {v!r}")
        out[key] = int(v)
    out["phase"] = _phase_code(entry.get("phase", "continuous") or "continuous", error, where)
    try:
        out["tick_table"] = tuple((int(a), int(b)) for a, b in entry.get("tick_table") or [(1, 1)])
    except (TypeError, ValueError):
        raise error(f"{where}: tick_table must be rows (from_price, tick)") from None
    return PhaseOptions(**out)


def _band(x: int, bps: int) -> tuple[int, int]:
    w = x * bps // 10_000
    return x - w, x + w


# ------------------------------------------------------------------ where phases begin
def _marks(codes) -> np.ndarray:
    """A 256-entry table of the uint8 ``codes`` to look for (True where a code is one)."""
    table = np.zeros(256, np.bool_)
    table[list(codes)] = True
    return table


_PHASE_KIND_MARKS = _marks((_PHASE_KIND,))
_PHASE_EVENT_MARKS = _marks(_SYMBOL_EVENTS)
_PHASE_REASON_MARKS = _marks(_PHASE_REASONS)
_AUCTION_SIDE_MARKS = _marks((AUCTION_SIDE,))
_STATIC_BAND_MARKS = _marks((int(Reason.OUTSIDE_STATIC_BAND),))


@njit(cache=True, nogil=True)
def _first_marked(a, a_marks, b, b_marks) -> int:
    """Index of the first row whose code in ``a`` or in ``b`` (uint8 columns, possibly strided
    views of one table's rows) is marked in its table, or -1.

    Why a loop and not ``np.isin``: the scan stops at the first hit, and on a run without
    phases it reads each code once where isin copied the strided column and compared it once
    per code looked for (measured: 76 ms of a 2 M-message verify's main thread)."""
    for i in range(a.shape[0]):
        if a_marks[a[i]] or b_marks[b[i]]:
            return i
    return -1


def _first_seq(rows, a: str, a_marks, b: str | None = None, b_marks=None) -> int | None:
    """The seq of the first of ``rows`` whose field ``a`` (or ``b``) holds a marked code."""
    if not rows.size:
        return None
    b, b_marks = (a, a_marks) if b is None else (b, b_marks)
    at = _first_marked(rows[a], a_marks, rows[b], b_marks)
    return int(rows["seq"][at]) if at >= 0 else None


def first_phase_seq(orders, fills, events, opts: PhaseOptions) -> int | None:
    """The seq of the first row of these (one symbol's, seq-ordered) rows that only a symbol
    with phases has: a PHASE message, a PHASE/INDICATIVE/UNCROSS event, a phase reason
    (PRICE_BAND, AUCTION_END, SYMBOL_CLOSED/HALTED, NOT_IN_CALL, BAD_PHASE) or an auction fill;
    the first seq of the rows when the symbol starts outside CONTINUOUS; None when there is none."""
    if opts.phase != _CONT:
        seqs = [int(t["seq"][0]) for t in (orders, fills, events) if t.size]
        return min(seqs) if seqs else None
    found = [s for s in (_first_seq(orders, "kind", _PHASE_KIND_MARKS),
                         _first_seq(events, "event", _PHASE_EVENT_MARKS,
                                    "reason", _PHASE_REASON_MARKS),
                         _first_seq(fills, "aggressor_side", _AUCTION_SIDE_MARKS))
             if s is not None]
    return min(found) if found else None


def static_band_rejects(events) -> bool:
    """Whether any of these event rows is a reject with reason OUTSIDE_STATIC_BAND."""
    return _first_seq(events, "reason", _STATIC_BAND_MARKS) is not None


def band_rows(orders, fills, events, opts: PhaseOptions, last_px: int) -> list:
    """``band`` over rows where the symbol never left CONTINUOUS (before its first phase
    activity): every fill inside the dynamic band around the last trade price before its
    message (``last_px`` the one before these rows, 0 none), every accepted NEW limit price
    inside the static band. Returns violations as (seq, rule, detail), vectorised (no Python
    per row)."""
    out = []
    if opts.dynamic_band_bps > 0 and fills.size:
        px = fills["price"].astype(np.int64)
        seq = fills["seq"]
        first = np.searchsorted(seq, seq, side="left")        # first fill of each fill's message
        ref = np.where(first > 0, px[np.maximum(first - 1, 0)], last_px)
        w = ref * opts.dynamic_band_bps // 10_000
        bad = np.flatnonzero((ref > 0) & ((px < ref - w) | (px > ref + w)))
        for j in bad[:100]:
            out.append((int(seq[j]), "band", f"trade {int(fills['trade_id'][j])} printed at "
                        f"{int(px[j])}, outside the dynamic band "
                        f"[{int(ref[j] - w[j])}, {int(ref[j] + w[j])}] around {int(ref[j])}"))
    rej = events["seq"][(events["event"] == int(Event.REJECTED))
                        & (events["reason"] == int(Reason.OUTSIDE_STATIC_BAND))] \
        if events.size else events["seq"][:0]
    if rej.size and orders.size:
        on = opts.static_band_bps > 0 and opts.reference_price > 0
        lo, hi = _band(opts.reference_price, opts.static_band_bps) if on else (0, -1)
        hit = np.isin(orders["seq"], rej) & (orders["price"] >= lo) & (orders["price"] <= hi)
        for j in np.flatnonzero(hit | (np.isin(orders["seq"], rej) & (not on)))[:100]:
            out.append((int(orders["seq"][j]), "band",
                        f"order {int(orders['order_id'][j])} rejected OUTSIDE_STATIC_BAND at "
                        f"{int(orders['price'][j])}, the static band is "
                        f"{f'[{lo}, {hi}]' if on else 'off'}"))
    if opts.static_band_bps > 0 and opts.reference_price > 0 and orders.size and events.size:
        lo, hi = _band(opts.reference_price, opts.static_band_bps)
        acc = events["seq"][events["event"] == int(Event.ACCEPTED)]
        new = (orders["kind"] == _NEW) & np.isin(orders["order_type"], _LIMIT_TYPES) \
            & np.isin(orders["seq"], acc)
        bad = np.flatnonzero(new & ((orders["price"] < lo) | (orders["price"] > hi)))
        for j in bad[:100]:
            out.append((int(orders["seq"][j]), "band",
                        f"order {int(orders['order_id'][j])} accepted at "
                        f"{int(orders['price'][j])}, outside the static band [{lo}, {hi}]"))
    return out
