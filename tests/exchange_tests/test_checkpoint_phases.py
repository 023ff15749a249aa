"""Checkpoints of the trading-phase state (docs/semantics.md, Trading phases; exchange/checkpoint.py):
a symbol's phase, pending auction, reference price, re-opening end and last indicative round-trip
through the header's ``phases``, a call book (crossed, MARKET orders at their call price) through
the rows, an engine that never used phases writes the bytes it wrote before, and a hostile header
or row is a CorruptionError naming what is wrong. These build the checkpoints by hand, so they
need no engine that matches in phases (tests/exchange_tests/test_checkpoint_phases_midcall.py
does: a restore in the middle of a call, then the rest of the day)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange import checkpoint as ckpt
from exsim.exchange.errors import CorruptionError
from exsim.exchange.schema import CALL_MARKET_PRICE, CHECKPOINT_DTYPE, OrderType, Phase, Side

BUY, SELL = int(Side.BUY), int(Side.SELL)


def _row(order_id, side, price, qty, symbol=0, order_type=OrderType.LIMIT):
    r = np.zeros(1, CHECKPOINT_DTYPE)[0]
    r["order_id"], r["side"], r["price"], r["qty"], r["symbol"] = order_id, side, price, qty, symbol
    r["order_type"], r["trader"] = int(order_type), 7
    return r


def _call_rows() -> np.ndarray:
    """Symbol 0's call book in priority order: crossed (bid 105 over ask 100), a MARKET on each
    side at its call price heading its side; symbol 1's plain book."""
    return np.array([
        _row(1, BUY, CALL_MARKET_PRICE[BUY], 30, order_type=OrderType.MARKET),
        _row(2, BUY, 105, 50), _row(3, BUY, 105, 20), _row(4, BUY, 99, 10),
        _row(5, SELL, CALL_MARKET_PRICE[SELL], 25, order_type=OrderType.MARKET),
        _row(6, SELL, 100, 40), _row(7, SELL, 104, 60),
        _row(8, BUY, 50, 5, symbol=1), _row(9, SELL, 51, 5, symbol=1),
    ], CHECKPOINT_DTYPE)


def _engine() -> Engine:
    eng = Engine()
    eng.add_symbol("AUC", max_price=1_000_000)
    eng.add_symbol("PLAIN")
    return eng


# symbol 0 in the pre-open call (its opening auction pending, an indicative published),
# symbol 1 continuous with a reference price
PHASES = [(int(Phase.PRE_OPEN), int(Phase.OPENING_AUCTION), 102, 0, 104, 70, -5),
          (int(Phase.CONTINUOUS), 0, 50, 0, 0, 0, 0)]


def _blob(phases=PHASES, rows=None, edit=None) -> bytes:
    eng = _engine()
    header = ckpt.make_header(eng.config(), 12, 3, 10, [0, 0], phases)
    if edit is not None:
        edit(header)
    return ckpt.encode(header, _call_rows() if rows is None else rows)


def test_a_call_state_restores_and_writes_its_own_bytes_again():
    blob = _blob()
    eng = Engine.restore(blob)
    assert eng.checkpoint() == blob
    assert eng.checkpoint_equals(blob)
    head = json.loads(ckpt.parse(blob).header)
    assert head["phases"][0] == {"phase": "pre_open", "auction": "opening_auction",
                                 "reference_price": 102, "auction_end": 0, "ind_price": 104,
                                 "ind_qty": 70, "ind_surplus": -5}
    assert head["phases"][1]["auction"] == "none"
    bids, asks = eng.depth("AUC", levels=10)
    assert bids["price"].tolist() == [CALL_MARKET_PRICE[BUY], 105, 99]   # crossed, markets first
    assert asks["price"].tolist() == [CALL_MARKET_PRICE[SELL], 100, 104]
    assert bids["qty"].tolist() == [30, 70, 10]
    assert eng.orders("AUC")["order_type"].tolist() == [1, 0, 0, 0, 1, 0, 0]


def test_the_restored_phase_state_is_in_the_symbol_rows():
    eng = Engine.restore(_blob())
    got = [tuple(int(r[k]) for k in ckpt.PHASE_STATE) for r in eng._symbols]
    assert got == PHASES


def test_a_different_phase_state_is_unequal_and_another_checkpoint():
    blob = _blob()
    other = list(PHASES)
    other[0] = other[0][:6] + (-4,)          # only the indicative surplus differs
    assert not Engine.restore(_blob(other)).checkpoint_equals(blob)
    assert Engine.restore(_blob(other)).checkpoint() != blob


def test_an_engine_that_never_used_phases_writes_no_phase_state():
    eng = _engine()
    eng.submit("AUC", "buy", qty=5, price=100, order_id=1, ts=1)
    eng.submit("PLAIN", "sell", qty=5, price=60, order_id=2, ts=2)
    blob = eng.checkpoint()
    head = json.loads(ckpt.parse(blob).header)
    assert "phases" not in head and ckpt.parse(blob).phases is None
    assert not any(k in sym for sym in head["config"]["symbols"] for k in ckpt.PHASE_OPTIONS)
    assert Engine.restore(blob).checkpoint() == blob


def test_the_start_state_is_what_a_symbol_without_options_has():
    assert ckpt.start_state({}) == (int(Phase.CONTINUOUS), 0, 0, 0, 0, 0, 0)
    assert ckpt.start_state({"phase": "pre_open", "reference_price": 7}) == \
        (int(Phase.PRE_OPEN), int(Phase.OPENING_AUCTION), 7, 0, 0, 0, 0)
    eng = _engine()
    assert ckpt.phase_state(eng._symbols, eng._options) is None


def test_an_all_default_phases_list_is_not_canonical():
    defaults = [(0, 0, 0, 0, 0, 0, 0), (0, 0, 0, 0, 0, 0, 0)]
    rows = _call_rows()[7:]                       # symbol 1's book only: not crossed
    with pytest.raises(CorruptionError, match="canonical"):
        Engine.restore(_blob(defaults, rows=rows))


def _set(path, value):
    def edit(header):
        node = header
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return edit


@pytest.mark.parametrize("path,value,match", [
    (("phases", 0, "phase"), "opening_auction", r"phases\[0\].*phase must be one of"),
    (("phases", 0, "phase"), 2, r"phases\[0\].*phase must be one of"),
    (("phases", 0, "auction"), "pre_open", r"phases\[0\].*auction"),
    (("phases", 0, "ind_qty"), -1, r"phases\[0\].*ind_qty"),
    (("phases", 0, "auction_end"), -5, r"phases\[0\].*auction_end"),
    (("phases", 0, "reference_price"), 2_000_000, r"phases\[0\].*reference_price"),
    (("phases", 1, "ind_price"), -3, r"phases\[1\].*ind_price"),
    (("phases", 0, "ind_surplus"), 1.5, r"phases\[0\].*ind_surplus"),
    (("phases",), [], r"phases must be a list of 2"),
    (("phases", 1), {"phase": "continuous"}, r"phases\[1\].*lacks field"),
])
def test_a_hostile_phase_state_is_corruption_naming_the_field(path, value, match):
    with pytest.raises(CorruptionError, match=match):
        Engine.restore(_blob(edit=_set(path, value)))


def test_a_crossed_book_or_a_resting_market_outside_a_call_is_corruption():
    continuous = [(0, 0, 102, 0, 0, 0, 0), PHASES[1]]
    with pytest.raises(CorruptionError, match="MARKET in a call"):
        Engine.restore(_blob(continuous))
    limits = _call_rows()[[1, 2, 3, 5, 6, 7, 8]]   # the limits only: still crossed
    with pytest.raises(CorruptionError, match="crossed"):
        Engine.restore(_blob(continuous, rows=limits))
    halted = [(int(Phase.HALTED), int(Phase.OPENING_AUCTION), 102, 0, 0, 0, 0), PHASES[1]]
    assert Engine.restore(_blob(halted)).checkpoint() == _blob(halted)   # halted in a call


def test_a_market_away_from_its_call_price_is_corruption_naming_the_row():
    rows = _call_rows()
    rows[4]["price"] = 1                           # a SELL MARKET, still the best ask
    with pytest.raises(CorruptionError, match=r"row 4: price 1 of a MARKET resting in a call"):
        Engine.restore(_blob(rows=rows))
