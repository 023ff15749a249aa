"""Output buffers grow only where the kernel lacks room, and keep the rows written so far
(``exchange.state.grow_output``). What a user relies on: a batch's fills, L2 rows and events
are the same bytes whatever buffers it started with (fresh, tiny, roomy, on threads), and a
buffer that had room is not replaced."""

from __future__ import annotations

import numpy as np
import pytest

from exsim.exchange import Engine, OutputBuffers
from exsim.exchange import processing as engine_module
from exsim.exchange.schema import EVENT_DTYPE
from exsim.exchange.state import CACHE_LINE, grow_output
from exsim.scenarios.generators.uniform import uniform_flow
from exsim.scenarios.generators.venue_mix import venue_mix


SYMBOLS = 3


def _venue(n=6_000):
    # stops, icebergs and GTD orders: a stop cascade's bound asks for far more rows than a
    # plain message, so the outputs grow mid-batch
    return venue_mix(uniform_flow(n=n, n_symbols=SYMBOLS, seed=5), seed=5)


def _run(flow, out_of, threads=1, batch=2_000):
    eng = Engine() if threads == 1 else Engine(threads=threads)
    for s in range(SYMBOLS):
        eng.add_symbol(f"S{s}")
    got = []
    for lo in range(0, len(flow), batch):
        res = eng.process(flow[lo: lo + batch], out=out_of())
        got.append(tuple(a.tobytes() for a in res))
    return got, eng.checkpoint()


def test_a_grown_output_keeps_the_rows_written_and_zeroes_the_rest():
    events = np.zeros(8, EVENT_DTYPE)
    events["order_id"] = np.arange(1, 9)
    grown = grow_output(events, 5, 11)
    assert len(grown) == 16 and grown.ctypes.data % CACHE_LINE == 0
    assert grown[:5].tobytes() == events[:5].tobytes()
    assert not grown[5:].tobytes().strip(b"\0")      # rows past the used ones are not copied
    assert grow_output(events, 5, 40).size == 40      # at least what was asked


def test_an_output_with_room_is_returned_as_it_is():
    events = np.zeros(8, EVENT_DTYPE)
    assert grow_output(events, 3, 8) is events


@pytest.mark.parametrize("threads", [1, 2])
def test_outputs_are_the_same_bytes_whatever_buffers_a_batch_starts_with(threads):
    flow = _venue()
    roomy = _run(flow, lambda: OutputBuffers(1 << 16), threads)
    assert _run(flow, lambda: OutputBuffers(1), threads) == roomy
    assert _run(flow, lambda: None, threads) == roomy
    shared = OutputBuffers(1)
    assert _run(flow, lambda: shared, threads) == roomy


def test_growth_replaces_only_the_outputs_that_lack_room(monkeypatch):
    flow = _venue()
    eng = Engine()
    for s in range(SYMBOLS):
        eng.add_symbol(f"S{s}")
    calls = []
    real = engine_module._grow_output

    def watched(arr, used, at_least):
        new = real(arr, used, at_least)
        calls.append((len(arr) >= at_least, new is arr))
        return new
    monkeypatch.setattr(engine_module, "_grow_output", watched)
    out = OutputBuffers(1)
    out.fills = np.zeros(1 << 16, out.fills.dtype)     # room for every fill of the flow
    fills = out.fills
    for lo in range(0, len(flow), 2_000):
        eng.process(flow[lo: lo + 2_000], out=out)
    assert calls and all(had_room == kept for had_room, kept in calls)
    assert out.fills is fills
