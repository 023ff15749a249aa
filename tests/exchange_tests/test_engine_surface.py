"""The engine's public surface for the rest of exsim: ``Engine.state`` / ``Engine.grow``
(exchange.state), ``EngineProtocol`` (exchange.protocol) and the one checkpoint parser
(exchange.checkpoint). What the backtest kernels and the store rely on is checked here apart
from the behaviour tests, so a change to it fails by name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from conftest import make_book, random_flow, split  # noqa: E402

from exsim.exchange import Engine, EngineProtocol, OutputBuffers  # noqa: E402
from exsim.exchange.schema import Kind, Side  # noqa: E402
from exsim.exchange import checkpoint as ckpt  # noqa: E402
from exsim.exchange import state as S  # noqa: E402
from exsim.exchange.errors import CorruptionError, UsageError  # noqa: E402


def test_state_is_the_engines_arrays_in_process_batch_order():
    eng = make_book("engine")
    st = eng.state
    assert isinstance(st, S.EngineState) and len(st) == 12
    assert st._fields == ("arena", "arena_ext", "levels", "index", "books", "ladder_keys",
                          "ladder_levels", "meta", "symbols", "ticks", "stops", "expiry")
    eng.process(random_flow(seed=3, n=500))
    assert int(eng.state.meta[S.M_SEQ]) == eng.seq == 500
    # the arrays are the engine's own: a kernel called with *state sees the engine's book
    fills, l2, events = OutputBuffers(1).fills, OutputBuffers(1).l2, OutputBuffers(1).events
    cnt = np.zeros(3, np.int64)
    status, _ = S.process_batch(np.zeros(0, random_flow(seed=3, n=1).dtype), 0, *eng.state,
                                fills, l2, events, cnt, 16)
    assert status == S.OK and eng.seq == 500


@pytest.mark.parametrize("status,field", [(S.NEED_ORDERS, "arena"), (S.NEED_LEVELS, "levels"),
                                          (S.NEED_INDEX, "index"), (S.NEED_EXPIRY, "expiry")])
def test_grow_enlarges_what_the_status_names_and_keeps_outputs(status, field):
    orders = random_flow(seed=5, n=2000)
    plain, grown = make_book("engine"), make_book("engine")
    a = plain.process(orders[:1000])
    b = grown.process(orders[:1000])
    before = len(getattr(grown.state, field))
    new = grown.grow(status)
    assert isinstance(new, S.EngineState) and len(getattr(new, field)) > before
    assert len(new.arena_ext) == len(new.arena)   # the cold fields share the slot index
    assert new.meta is grown.state.meta
    assert grown.checkpoint() == plain.checkpoint()
    for x, y in zip(plain.process(orders[1000:]), grown.process(orders[1000:])):
        assert x.tobytes() == y.tobytes()
    assert [t.tobytes() for t in a] == [t.tobytes() for t in b]


def test_grow_ladder_and_refusals():
    eng = make_book("engine")
    eng.process(random_flow(seed=8, n=300))
    before = eng.checkpoint()
    eng.grow(S.NEED_LADDER)   # grows the ladder of the book meta names (book 0 here)
    assert eng.checkpoint() == before
    with pytest.raises(UsageError, match="NEED_ORDERS"):
        eng.grow(S.NEED_OUTPUT)
    with pytest.raises(UsageError):
        eng.grow(S.OK)
    assert S.GROW_STATUSES == {S.NEED_ORDERS, S.NEED_LEVELS, S.NEED_INDEX, S.NEED_LADDER,
                               S.NEED_EXPIRY}
    assert S.OK == 0 and S.NEED_OUTPUT not in S.GROW_STATUSES


def test_a_ladder_outgrowing_its_first_levels_grows_once_to_128():
    """A book starts with room for 8 price levels a side; the first growth takes it to 128
    (each growth is a kernel exit, so 100 levels cost one, not four), later ones double."""
    eng = Engine()
    eng.add_symbol("X")

    def bids(first, count):
        return np.concatenate([Engine._message_fields(Kind.NEW, 0, first + i, 1000 + first + i,
                                                      1, first + i, side=Side.BUY)
                               for i in range(count)])

    eng.process(bids(1, 8))
    assert int(eng.state.books[0]["cap"]) == 8
    eng.process(bids(9, 1))
    assert int(eng.state.books[0]["cap"]) == 128
    eng.process(bids(10, 120))
    assert int(eng.state.books[0]["cap"]) == 256
    assert len(eng.depth("X", 200)[0]) == 129


def test_the_order_arena_grows_fourfold_and_keeps_every_order():
    """An arena that runs out of slots grows to four times its rows (half the growths and a
    third of the copying of doubling); the orders in it and what they do next are unchanged."""
    eng, roomy = Engine(capacity=16), Engine(capacity=1 << 12)
    for e in (eng, roomy):
        e.add_symbol("X")

    def bids(first, count):
        return np.concatenate([Engine._message_fields(Kind.NEW, 0, first + i, 1000 + i % 50,
                                                      1, first + i, side=Side.BUY)
                               for i in range(count)])

    assert [a.tobytes() for a in eng.process(bids(1, 16))] == \
        [a.tobytes() for a in roomy.process(bids(1, 16))]
    assert len(eng.state.arena) == 16
    eng.process(bids(17, 1))
    roomy.process(bids(17, 1))
    assert len(eng.state.arena) == 64 and len(eng.state.arena_ext) == 64
    eng.process(bids(18, 60))
    roomy.process(bids(18, 60))
    assert len(eng.state.arena) == 256
    assert eng.checkpoint() == roomy.checkpoint()
    sell = Engine._message_fields(Kind.NEW, 0, 10_000, 990, 77 * 3, 10_000, side=Side.SELL)
    assert [a.tobytes() for a in eng.process(sell)] == [a.tobytes() for a in roomy.process(sell)]


def test_a_large_arena_doubles_instead(monkeypatch):
    import exsim.exchange.state_growth as E
    monkeypatch.setattr(E, "_ARENA_FOURFOLD_BELOW", 64)
    eng = Engine(capacity=16)
    eng.add_symbol("X")
    sizes = []
    for _ in range(3):
        eng.grow(S.NEED_ORDERS)
        sizes.append(len(eng.state.arena))
    assert sizes == [64, 128, 256]


def test_backtest_statuses_do_not_reuse_the_engines_codes():
    from exsim.replay.backtesting import kernels as C
    mine = {C.NEED_STRAT, C.HIT, C.NEED_LOG, C.NEED_DRAWS, C.NEED_LIVE, C.WAKE, C.TIMER, C.NOTE}
    engine = {S.OK, S.NEED_OUTPUT} | S.GROW_STATUSES
    assert len(mine) == 8 and not mine & engine


def test_engine_and_the_store_fake_implement_the_protocol():
    from store_fixtures import FakeEngine
    for eng in (Engine(), FakeEngine()):
        assert isinstance(eng, EngineProtocol)
        eng.add_symbol("A")
        assert eng.symbol_id("A") == 0
        blob = eng.checkpoint()
        assert eng.checkpoint_equals(blob) and not eng.checkpoint_equals(blob + b"x")
        back = type(eng).restore(blob)
        assert back.seq == eng.seq and back.state_hash() == eng.state_hash()
        assert back.config() == eng.config()


def test_out_buffers_are_the_one_way_to_reuse_and_outputs_match():
    orders = random_flow(seed=9, n=4000)
    fresh, given = make_book("engine"), make_book("engine")
    out = OutputBuffers(100)
    for batch in split(orders, range(0, 4000, 700)):
        want, got = fresh.process(batch), given.process(batch, out=out)
        assert [t.tobytes() for t in got] == [t.tobytes() for t in want]
        assert got.fills.base is out.fills or got.fills.base is out.fills.base


def test_checkpoint_has_one_parser_and_equals_agrees_with_it():
    eng = make_book("engine")
    eng.process(random_flow(seed=4, n=1500))
    blob = eng.checkpoint()
    ck = ckpt.parse(blob)
    assert ck.counters[0] == eng.seq and ck.stp == eng.stp
    assert [s[0] for s in ck.symbols] == list(eng.symbols)
    assert len(ck.rows) == eng.live_orders
    assert json.loads(ck.header)["config"] == eng.config()
    assert ckpt.encode(json.loads(ck.header), ck.rows) == blob
    head, rows, at = ckpt.frame(memoryview(blob))
    assert head == ck.header and at == ck.rows_at and rows.tobytes() == ck.rows.tobytes()
    assert eng.checkpoint_equals(memoryview(blob)) and eng.checkpoint_equals(bytearray(blob))
    for bad in (blob[:-1] + bytes([blob[-1] ^ 1]), blob[:20], b"", b"EXSIMCKP" + blob[8:40]):
        assert not eng.checkpoint_equals(bad)
        with pytest.raises(CorruptionError, match="^checkpoint: "):
            ckpt.parse(bad)
    assert not eng.checkpoint_equals(12345)
