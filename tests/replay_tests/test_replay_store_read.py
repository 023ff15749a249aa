"""The store's read path as replay uses it: read, read_columns, iter_columns, read_checkpoint.

Every form must return the same rows as filtering a full read by hand, across segments of
several symbols and an unsealed WAL tail.
"""

import numpy as np
import pytest

from exsim.exchange import Engine
from exsim.exchange.errors import StoreError, UsageError
from exsim.store import iter_columns, read, read_checkpoint, read_columns
from test_replay_common import rich_flow, store_run


@pytest.fixture(scope="module")
def crashed_run(tmp_path_factory):
    """A 3-symbol run whose last batches stayed in the WAL (sealed every 500 messages)."""
    d = tmp_path_factory.mktemp("read") / "run"
    store_run(d, rich_flow(2600, seed=31), close=False, seal_every=500)
    return d


def _by_hand(full, symbol, seq, ts):
    keep = np.ones(full.size, bool)
    if symbol is not None:
        keep &= full["symbol"] == symbol
    if seq is not None:
        keep &= (full["seq"] >= seq[0]) & (full["seq"] <= seq[1])
    if ts is not None:
        keep &= (full["ts"] >= ts[0]) & (full["ts"] <= ts[1])
    # why rebuilt field by field: boolean indexing copies fields, not padding bytes
    out = np.zeros(int(keep.sum()), full.dtype)
    for name in full.dtype.names:
        out[name] = full[name][keep]
    return out


@pytest.mark.parametrize("table", ["orders", "fills", "l2", "events"])
@pytest.mark.parametrize("symbol,seq,ts", [(None, None, None), (1, None, None),
                                           (None, (333, 2400), None), (2, (1, 1999), None),
                                           (0, None, (1_500, 2_200)), (None, (700, 2500), (0, 2_000))])
def test_every_read_form_returns_the_filtered_rows_in_seq_order(crashed_run, table, symbol, seq, ts):
    full = read(crashed_run, table)
    assert np.all(np.diff(full["seq"]) >= 0) and full.size > 0
    want = _by_hand(full, symbol, seq, ts)
    got = read(crashed_run, table, symbol=symbol, seq=seq, ts=ts)
    assert got.tobytes() == want.tobytes()          # padding zeroed: equal rows, equal bytes
    cols = read_columns(crashed_run, table, symbol=symbol, seq=seq, ts=ts)
    blocks = list(iter_columns(crashed_run, table, symbol=symbol, seq=seq, ts=ts))
    for name in full.dtype.names:
        assert np.array_equal(cols[name], want[name])
        joined = np.concatenate([b[name] for b in blocks]) if blocks else want[name][:0]
        assert np.array_equal(joined, want[name])


def test_read_columns_returns_only_the_columns_asked_for(crashed_run):
    cols = read_columns(crashed_run, "fills", symbol="BBB", columns=["qty", "price"])
    assert list(cols) == ["price", "qty"]      # table order, like read
    assert np.array_equal(cols["qty"], read(crashed_run, "fills", symbol="BBB")["qty"])


def test_bad_column_or_range_is_a_usage_error_before_any_block(crashed_run):
    with pytest.raises(UsageError, match="no column"):
        iter_columns(crashed_run, "fills", columns=["nope"])
    with pytest.raises(UsageError, match="inclusive"):
        read_columns(crashed_run, "fills", seq=5)


def test_read_checkpoint_returns_the_newest_at_or_before_a_seq(tmp_path):
    store_run(tmp_path, rich_flow(1500, seed=32), checkpoint_every=400)
    seq, blob = read_checkpoint(tmp_path, seq=1000)
    assert 0 < seq <= 1000 and Engine.restore(blob).seq == seq
    last, _ = read_checkpoint(tmp_path)
    assert last >= seq and read_checkpoint(tmp_path, seq=seq)[0] == seq
    with pytest.raises(UsageError, match="no checkpoint"):
        read_checkpoint(tmp_path, seq=-1)
    with pytest.raises(StoreError):
        read_checkpoint(tmp_path / "nope")
