"""Every loaded feed runs byte-identically with ownership on and off: the loaders write the owner's trader on
CANCEL and MODIFY rows, so no cancel of the feed is refused as another trader's."""

from __future__ import annotations

import os

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange.errors import InputError
from exsim.exchange.schema import Reason



def _sample(relative):
    from exsim.scenarios.data import shared_file

    try:
        return shared_file(relative)
    except InputError:
        pytest.skip(f"shared sample {relative} is not here")


def _outputs_with_and_without_ownership(orders, symbols):
    """Return the (fills, l2, events) bytes of ``orders`` with ownership on and with it off;
    fail if ownership on refused any cancel or modify (NOT_OWNER)."""
    outs = []
    for own in (True, False):
        eng = Engine(ownership=own)
        for name, tick in symbols:
            eng.add_symbol(name, tick_size=tick)
        res = eng.process(orders)
        outs.append((res.fills.tobytes(), res.l2.tobytes(), res.events.tobytes()))
        if own:
            assert not (res.events["reason"] == Reason.NOT_OWNER).any()
    return outs


def test_the_quantcup_feed_is_byte_identical_with_ownership_on_and_off():
    from exsim.scenarios.data import QUANTCUP_FEED
    from exsim.scenarios.loaders.quantcup import load_quantcup

    on, off = _outputs_with_and_without_ownership(load_quantcup(_sample(QUANTCUP_FEED)),
                                                  [("QC", 1.0)])
    assert on == off


@pytest.mark.parametrize("name", ["LOBSTER_AMZN", "LOBSTER_AAPL"])
def test_the_lobster_samples_are_byte_identical_with_ownership_on_and_off(name):
    import exsim.scenarios.data as data
    from exsim.scenarios.loaders.lobster import load_lobster

    d = _sample(getattr(data, name))
    files = sorted(os.listdir(d))
    msg = [f for f in files if "_message_" in f][0]
    book = [f for f in files if "_orderbook_" in f][0]
    orders = load_lobster(os.path.join(d, msg), os.path.join(d, book)).orders
    on, off = _outputs_with_and_without_ownership(orders, [("X", 0.01)])
    assert on == off


def test_the_binance_sample_is_byte_identical_with_ownership_on_and_off():
    from exsim.scenarios.data import BINANCE_BTCUSDT
    from exsim.scenarios.loaders.binance import load_binance

    on, off = _outputs_with_and_without_ownership(load_binance(_sample(BINANCE_BTCUSDT)).orders,
                                                  [("BTCUSDT", 0.01)])
    assert on == off


def test_a_dbn_file_is_byte_identical_with_ownership_on_and_off(tmp_path):
    pytest.importorskip("databento_dbn")
    from exsim.scenarios.generators.uniform import uniform_flow
    from exsim.scenarios.loaders.dbn import load_dbn
    from exsim.scenarios.loaders.dbn_write import write_mbo

    path = tmp_path / "f.dbn"
    write_mbo(path, uniform_flow(n=3000, seed=5, n_symbols=1), [("AAA", 10_000_000, 1)])
    on, off = _outputs_with_and_without_ownership(load_dbn(path).orders, [("AAA", 0.01)])
    assert on == off


def test_a_generic_file_without_traders_on_cancels_is_identical_with_ownership_on_and_off(tmp_path):
    from exsim.scenarios.loaders.generic import load_generic

    p = tmp_path / "f.csv"
    p.write_text("ts,symbol,kind,side,order_id,price,qty,trader\n"
                 "1,A,NEW,BUY,1,100,5,42\n2,A,MODIFY,,1,101,5,\n3,A,NEW,SELL,2,101,2,43\n"
                 "4,A,CANCEL,,1,,,\n")
    orders = load_generic(p).orders
    assert np.array_equal(orders["trader"], [42, 42, 43, 42])
    on, off = _outputs_with_and_without_ownership(orders, [("A", 1)])
    assert on == off
