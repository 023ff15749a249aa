"""Row digests: streaming equals one shot, any changed byte or row changes the digest,
by_symbol keeps each symbol's rows in order."""

import numpy as np
import pytest
import xxhash

from exsim.exchange.errors import UsageError
from exsim.exchange.schema import EVENT_DTYPE, FILL_DTYPE, L2_DTYPE
from exsim.store.digest import PREFIX, RowDigest, by_symbol, digest_rows, is_digest


def _fills(n, seed=0, symbols=1):
    rng = np.random.default_rng(seed)
    f = np.zeros(n, FILL_DTYPE)
    f["seq"] = np.arange(1, n + 1)
    f["qty"] = rng.integers(1, 100, n)
    f["price"] = rng.integers(90, 110, n)
    f["symbol"] = rng.integers(0, symbols, n)
    return f


def test_digest_is_xxh3_128_of_the_packed_row_bytes():
    f = _fills(50)
    want = PREFIX + xxhash.xxh3_128(f.tobytes()).hexdigest()
    assert digest_rows("fills", f) == want and is_digest(want)
    assert FILL_DTYPE.itemsize == sum(FILL_DTYPE.fields[n][0].itemsize for n in FILL_DTYPE.names)


def test_streaming_in_any_slices_equals_one_shot():
    f = _fills(1000, seed=1)
    whole = digest_rows("fills", f)
    for cuts in ([0, 1000], [0, 1, 999, 1000], [0, 333, 333, 700, 1000]):
        d = RowDigest("fills")
        for lo, hi in zip(cuts, cuts[1:]):
            d.update(f[lo:hi])
        assert d.hexdigest() == whole and d.rows == 1000
    assert digest_rows("fills", [f[:10], f[10:]]) == whole


@pytest.mark.parametrize("dtype,table", [(FILL_DTYPE, "fills"), (L2_DTYPE, "l2"),
                                         (EVENT_DTYPE, "events")])
def test_a_changed_field_byte_or_a_missing_row_changes_the_digest(dtype, table):
    rows = np.zeros(20, dtype)
    rows["seq"] = np.arange(20)
    base = digest_rows(table, rows)
    for name in dtype.names:
        bad = rows.copy()
        bad[7][name] = 1 if bad[7][name] == 0 else 0
        assert digest_rows(table, bad) != base, name
    assert digest_rows(table, rows[:-1]) != base
    assert digest_rows(table, rows[::2]) != base        # strided input is hashed as its rows


def test_wrong_dtype_or_table_is_a_usage_error():
    with pytest.raises(UsageError, match="dtype"):
        RowDigest("fills").update(np.zeros(3, L2_DTYPE))
    with pytest.raises(UsageError, match="orders"):
        RowDigest("orders")
    assert not is_digest("") and not is_digest("crc32c:1234") and not is_digest(None)


def test_by_symbol_keeps_seq_order_and_does_not_copy_one_symbol():
    one = _fills(100)
    [(sym, part)] = by_symbol(one)
    assert sym == 0 and np.shares_memory(part, one)
    many = _fills(500, seed=2, symbols=4)
    parts = by_symbol(many)
    assert [s for s, _ in parts] == sorted(set(many["symbol"].tolist()))
    for s, part in parts:
        assert np.array_equal(part, many[many["symbol"] == s])
    assert by_symbol(many[:0]) == []
