"""DBN from the command line (issue 40, item 3): ``exsim simulate --flow dbn`` says what it
skipped and why (with the ``--midday`` hint) instead of ``messages 0`` and exit 0, takes
``--definitions FILE`` and ``--tick``, and runs a non-trivial DBN file: the LOBSTER AMZN sample's
first messages written as MBO by ``scenarios/loaders/dbn_write.py`` and checked against the
official ``databento-dbn`` decoder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cli_fixtures import run

dbn = pytest.importorskip("databento_dbn")

from exsim.exchange.engine import Engine  # noqa: E402
from exsim.scenarios.loaders.dbn import load_dbn  # noqa: E402
from exsim.scenarios.loaders.dbn_write import write_dbn, write_mbo  # noqa: E402
from exsim.scenarios.loaders.lobster import load_lobster  # noqa: E402

SHARED = Path("/work/shared/data")
LOB = SHARED / "lobster_AMZN_2012-06-21_level1"
MSG = LOB / "AMZN_2012-06-21_34200000_57600000_message_1.csv"
BOOK = LOB / "AMZN_2012-06-21_34200000_57600000_orderbook_1.csv"
ES = SHARED / "databento_dbn_tests" / "test_data.mbo.v3.dbn.zst"
ES_DEFS = SHARED / "databento_dbn_tests" / "test_data.definition.v3.dbn.zst"
N = 8_000          # LOBSTER messages written (of 57,515): seconds, not minutes
CENT = 10 ** 7     # one cent in DBN's 1e-9 units


def _decode(path: Path):
    """databento-dbn's own decode: (metadata, records)."""
    raw = path.read_bytes()
    zstd = raw[:4] == b"\x28\xb5\x2f\xfd"
    dec = dbn.DBNDecoder(compression=dbn.Compression.ZSTD if zstd else dbn.Compression.NONE)
    dec.write(raw)
    out = dec.decode()
    return out[0], out[1:]


@pytest.fixture(scope="module")
def amzn_dbn(tmp_path_factory):
    if not MSG.exists():
        pytest.skip("shared LOBSTER sample not present")
    d = tmp_path_factory.mktemp("amzn_dbn")
    orders = load_lobster(MSG, BOOK).orders[:N]
    path = d / "AMZN.mbo.dbn.zst"
    expected = write_mbo(path, orders, [("AMZN", CENT, 100)])
    return orders, expected, path


def test_the_written_sample_is_what_the_official_decoder_reads(amzn_dbn):
    _, expected, path = amzn_dbn
    meta, records = _decode(path)
    mbo = [r for r in records if type(r).__name__ == "MBOMsg"]
    loaded = load_dbn(path)
    assert len(mbo) == loaded.counts["mbo"] > 5_000
    assert {str(r.action) for r in mbo} >= {"A", "C", "T", "F", "R"}, {str(r.action) for r in mbo}
    assert loaded.orders.tobytes() == expected.tobytes()
    assert loaded.counts["unknown_order"] == 0 and all(s.synced for s in loaded.symbols)


def test_simulate_runs_the_sample_and_its_book_is_the_lobster_book(amzn_dbn, tmp_path):
    orders, expected, path = amzn_dbn
    code, out, err = run(["simulate", "--flow", "dbn", path, "--out", tmp_path / "r", "--fsync",
                          "none", "-q"])
    assert code == 0, err
    assert f"messages {len(expected):,}" in out and "skipped" not in err and "1e-9" not in err
    eng = Engine()
    eng.add_symbol("AMZN", tick_size=0.01)
    eng.process(orders)
    bids, asks = eng.depth("AMZN", levels=1)
    code, out, _ = run(["book", tmp_path / "r", "AMZN", "--seq", len(expected), "--depth", "1"])
    row = [line for line in out.splitlines() if "|" in line and "bid" not in line][0]
    assert row.split()[2] == str(int(bids["price"][0])) and row.split()[4] == str(int(asks["price"][0]))


def test_a_file_starting_mid_session_says_what_it_skipped(amzn_dbn, tmp_path):
    _, _, path = amzn_dbn
    meta, records = _decode(path)
    # drop the definition, the clear and the first 3,000 records: a file that starts mid-session
    cut = [r for r in records[2 + 3_000:]]
    mid = tmp_path / "mid.mbo.dbn"
    write_dbn(mid, cut, schema=dbn.Schema.MBO, symbols={"AMZN": 1000}, start=int(meta.start))
    code, out, err = run(["simulate", "--flow", "dbn", mid, "--out", tmp_path / "m", "--fsync",
                          "none", "-q", "--tick", "0.01"])
    assert code == 0, err
    assert "dbn: skipped" in err and "orders resting before the file began" in err
    assert "--midday refuse" in err and "messages kept" in err
    code, _, err = run(["simulate", "--flow", "dbn", mid, "--out", tmp_path / "m2", "--tick", "0.01",
                        "--midday", "refuse"])
    assert code == 2 and "--midday drop" in err


@pytest.mark.skipif(not ES.exists(), reason="shared DBN test files not present")
def test_a_file_whose_every_record_was_dropped_is_not_a_quiet_success(tmp_path):
    code, out, err = run(["simulate", "--flow", "dbn", ES, "--out", tmp_path / "es"])
    assert code == 1 and "messages 0" in out
    assert "skipped 2 of 2 MBO records" in err and "--midday refuse" in err
    assert "prices are in DBN's unit of 1e-9" in err and "--tick" in err
    assert "nothing was simulated" in err


@pytest.mark.skipif(not ES.exists(), reason="shared DBN test files not present")
def test_definitions_and_tick_options(tmp_path):
    code, out, err = run(["simulate", "--flow", "dbn", ES, "--definitions", ES_DEFS, "--tick", "0.25",
                          "--out", tmp_path / "es"])
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[3:] if line.strip()}
    assert rows.get("MSFT") == "0.25" and rows.get("ESH1") == "0.25", out   # MSFT: named by the definitions file
    assert "1e-9" not in err
    code, _, err = run(["simulate", "--flow", "dbn", ES, "--definitions", tmp_path / "none.dbn",
                        "--out", tmp_path / "x"])
    assert code == 2 and "none.dbn" in err
    code, _, err = run(["simulate", "--flow", "quantcup", ES, "--tick", "0.25", "--out", tmp_path / "y"])
    assert code == 2 and "--flow dbn" in err
