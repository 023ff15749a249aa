"""The CLI against damaged and hostile data directories: one error line, exit 2, no traceback;
stored names printed escaped."""

from __future__ import annotations

import os
import shutil
import sqlite3

import pytest

from cli_fixtures import run, write_scenario

COMMANDS = {
    "ls": ["ls", "{d}"],
    "verify": ["verify", "{d}"],
    "book": ["book", "{d}", "AAA", "--seq", "500"],
    "rerun": ["rerun", "{d}"],
    "export": ["export", "{d}", "fills", "--format", "csv", "--out", "{d}.csv"],
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A data directory simulated once from the small scenario (sealed segments, checkpoints)."""
    base = tmp_path_factory.mktemp("hostile")
    out = base / "run"
    code, _, stderr = run(["simulate", write_scenario(base), "--out", out, "--batch", 500,
                           "--fsync", "none"])
    assert code == 0, stderr
    return out


def _sql(d, statement, fix_crc=None):
    """Run ``statement`` on the catalog of ``d``; with ``fix_crc`` (a table), recompute that
    table's row checksums after it (a consistent row with a bad value, as a buggy writer makes)."""
    from exsim.store.catalog import _ROW_COLUMNS, _row_crc
    con = sqlite3.connect(os.path.join(d, "catalog.sqlite"))
    con.execute(statement)
    if fix_crc:
        cols = ", ".join(c for c, _ in _ROW_COLUMNS[fix_crc])
        for row in con.execute(f"SELECT rowid, {cols} FROM {fix_crc}").fetchall():
            con.execute(f"UPDATE {fix_crc} SET row_crc = ? WHERE rowid = ?",
                        [_row_crc(fix_crc, row[1:]), row[0]])
    con.commit()
    con.close()


def _overwrite(d, how):
    path = os.path.join(d, "catalog.sqlite")
    data = open(path, "rb").read()
    open(path, "wb").write(how(data))


DAMAGE = {
    "truncated": lambda d: _overwrite(d, lambda b: b[:len(b) // 3]),
    "garbage": lambda d: _overwrite(d, lambda b: bytes((i * 37 + 11) % 256 for i in range(len(b)))),
    "bad json in symbols.info": lambda d: _sql(d, "UPDATE symbols SET info = '{oops' WHERE id = 0", "symbols"),
    "bad json in runs.engine_options": lambda d: _sql(d, "UPDATE runs SET engine_options = 'nan,'", "runs"),
    "null seq_hi": lambda d: _sql(d, "UPDATE segments SET seq_hi = NULL WHERE id = 2"),
    "dropped table": lambda d: _sql(d, "DROP TABLE checkpoints"),
    "flipped bound": lambda d: _sql(d, "UPDATE segments SET seq_hi = seq_hi - 100 WHERE id = 1"),
    "sealed_through upward": lambda d: _sql(d, "UPDATE meta SET value = '999999' WHERE key = 'sealed_through'"),
}


@pytest.fixture
def damaged(run_dir, tmp_path, request):
    d = tmp_path / "d"
    shutil.copytree(run_dir, d, ignore=shutil.ignore_patterns("catalog.sqlite-*"))
    DAMAGE[request.param](d)
    return d


@pytest.mark.parametrize("damaged", list(DAMAGE), indirect=True)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_damaged_catalog_is_one_error_line_naming_it_and_exit_2(damaged, command):
    argv = [a.format(d=damaged) for a in COMMANDS[command]]
    code, out, err = run(argv)
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("exsim: error: ") and "Traceback" not in err
    assert "catalog.sqlite" in err


HOSTILE = "A\x1b[2J\nB"


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory):
    """A data directory whose symbol and scenario names hold terminal escapes and newlines."""
    from exsim.store import Session
    from store_fixtures import FakeEngine, make_orders
    d = tmp_path_factory.mktemp("names") / "d"
    eng = FakeEngine()
    eng.add_symbol(HOSTILE)
    eng.add_symbol("\u202eevil")   # a bidi override: reverses what follows on screen
    s = Session.create(str(d), eng, run_info={"scenario": "x\r\x07y", "seed": 1})
    s.process(make_orders(50, n_symbols=2))
    s.close()
    return d


def test_ls_prints_stored_names_with_control_characters_escaped(hostile_dir):
    code, out, err = run(["ls", hostile_dir])
    assert code == 0, err
    assert not any(c in out for c in "\x1b\r\x07\u202e")
    assert r"A\x1b[2J\nB" in out and r"\u202eevil" in out and r"x\r\x07y" in out


def test_an_error_quoting_stored_names_stays_one_escaped_line(hostile_dir):
    code, out, err = run(["book", hostile_dir, "NOPE\x1b]0;title\x07", "--seq", "1"])
    assert code == 2 and err.count("\n") == 1
    assert "\x1b" not in err and r"A\x1b[2J\nB" in err and r"\x1b]0;title\x07" in err
