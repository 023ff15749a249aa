"""What a new user meets (issue 18 item 4), loader side: a Binance capture's market-by-price
flow never steps back in time (so a stored run of it can be backtested), and a LOBSTER file whose
Time goes back is refused at load, naming the file and line."""

from pathlib import Path

import numpy as np
import pytest

from exsim.exchange.errors import InputError
from exsim.scenarios.loaders.lobster import load_lobster

DATA = Path("/work/shared/data")
BINANCE = DATA / "binance_spot_btcusdt_20240808_hftbacktest" / "btcusdt_20240808.gz"


@pytest.mark.skipif(not BINANCE.exists(), reason="shared Binance sample not present")
def test_binance_flow_ts_never_decreases_and_the_snapshot_is_not_moved():
    from exsim.scenarios import load_binance

    d = load_binance(BINANCE)
    ts = d.orders["ts"]
    assert np.all(np.diff(ts) >= 0)
    # the diffs buffered while the snapshot was fetched take the snapshot's receive time
    snap_ts = int(d.l2["ts"][0])
    assert ts[0] == snap_ts and ts[2000] == snap_ts and d.l2["ts"][2000] < snap_ts


def test_lobster_time_going_back_names_file_and_line(tmp_path):
    m, b = tmp_path / "m.csv", tmp_path / "b.csv"
    m.write_text("34200.2,1,11,10,1000000,1\n34200.1,3,11,10,1000000,1\n")
    b.write_text("1010000,5,1000000,10\n1010000,5,-9999999999,0\n")
    with pytest.raises(InputError, match=r"m.csv, line 2: column 'Time' goes back"):
        load_lobster(m, b)
