"""A run's configuration in the catalog is checked against its first checkpoint, value by value.

The catalog of tests/golden/run_v1 was written before row checksums, so an edit there is read
unchecked by the catalog itself; the first checkpoint (under its own CRC32C) records what the
engine ran with. Every configuration value verify, rerun, book and stats read from the catalog
(the first run's engine_options, the symbols table's names, tick sizes and info) must agree with
it, or the command fails naming catalog.sqlite and the value (verify/rerun exit 1, book/stats 2).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3

import pytest

from exsim.exchange.errors import CorruptionError
from tests.cli_tests.cli_fixtures import run

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden", "run_v1")


def _old_dir(tmp_path) -> str:
    d = tmp_path / "old"
    shutil.copytree(GOLDEN, d)
    return str(d)


def _sql(d: str, statement: str, args=()) -> None:
    con = sqlite3.connect(os.path.join(d, "catalog.sqlite"))
    con.execute(statement, args)
    con.commit()
    con.close()


def _edit_options(d: str, edit) -> None:
    """Apply ``edit`` to the first run's engine_options (a dict) and store it back."""
    con = sqlite3.connect(os.path.join(d, "catalog.sqlite"))
    cfg = json.loads(con.execute("SELECT engine_options FROM runs WHERE id = 1").fetchone()[0])
    edit(cfg)
    con.execute("UPDATE runs SET engine_options = ? WHERE id = 1", [json.dumps(cfg)])
    con.commit()
    con.close()


def _edit_info(d: str, sid: int, edit) -> None:
    con = sqlite3.connect(os.path.join(d, "catalog.sqlite"))
    info = json.loads(con.execute("SELECT info FROM symbols WHERE id = ?", [sid]).fetchone()[0])
    edit(info)
    con.execute("UPDATE symbols SET info = ? WHERE id = ?", [json.dumps(info), sid])
    con.commit()
    con.close()


EDITS = {
    "lot_size": (lambda d: _edit_options(d, lambda c: c["symbols"][0].update(lot_size=5)),
                 r"runs row id=1: engine_options: symbols\[0\]\.lot_size is 5 where the first "
                 r"checkpoint has 1"),
    "ownership": (lambda d: _edit_options(d, lambda c: c.update(ownership=True)),
                  "engine_options: ownership is True where the first checkpoint has False"),
    "min_order_qty": (lambda d: _edit_options(d, lambda c: c["symbols"][1].update(min_order_qty=3)),
                      r"symbols\[1\]\.min_order_qty is 3"),
    "tick_table": (lambda d: _edit_options(d, lambda c: c["symbols"][0].update(
        tick_table=[[1, 1], [100, 5]])), r"symbols\[0\]\.tick_table is \[\[1, 1\], \[100, 5\]\]"),
    "band": (lambda d: _edit_options(d, lambda c: c["symbols"][0].update(max_price=10_000)),
             r"symbols\[0\]\.max_price is 10000"),
    "phase": (lambda d: _edit_options(d, lambda c: c["symbols"][0].update(phase="halted")),
              r"symbols\[0\]\.phase is 'halted' where the first checkpoint has 'continuous'"),
    "unknown key": (lambda d: _edit_options(d, lambda c: c.update(speed=2)),
                    "engine_options: has key 'speed'"),
    "symbols tick_size": (lambda d: _sql(d, "UPDATE symbols SET tick_size = 0.05 WHERE id = 0"),
                          "symbols row id=0: tick_size is 0.05 where the first checkpoint has 0.01"),
    "symbols info": (lambda d: _edit_info(d, 1, lambda i: i.update(lot_size=10)),
                     r"symbols row id=1: info: symbol 1\.lot_size is 10"),
    "symbols name": (lambda d: _sql(d, "UPDATE symbols SET name = 'JPX' WHERE id = 0"),
                     "symbols row id=0: name is 'JPX' where the first checkpoint has 'JPM'"),
    "symbols row gone": (lambda d: _sql(d, "DELETE FROM symbols WHERE id = 1"),
                         r"table symbols: holds symbol ids \[0\] where the first checkpoint has 2"),
    "runs row gone": (lambda d: _sql(d, "DELETE FROM runs"), "table runs: has no row"),
}


@pytest.mark.parametrize("kind", list(EDITS))
def test_an_edited_configuration_value_is_a_corruption_error_naming_it(tmp_path, kind):
    from exsim.replay.rundir import run_info

    d = _old_dir(tmp_path)
    edit, message = EDITS[kind]
    edit(d)
    with pytest.raises(CorruptionError, match=f"catalog.sqlite: .*{message}.*first checkpoint, "
                                              "seq 0.*the catalog is damaged"):
        run_info(d)


def test_the_golden_directory_reads_and_its_config_is_the_checkpoints(tmp_path):
    from exsim.exchange import Engine
    from exsim.store import read_checkpoint
    from exsim.replay.rundir import run_info

    info = run_info(GOLDEN)
    assert info.config == Engine.restore(read_checkpoint(GOLDEN, 0)[1]).config()
    assert info.config["symbols"][0]["lot_size"] == 1


def test_an_option_the_catalog_leaves_out_is_its_default_not_a_difference():
    """Older writers wrote configs without the options added since; they still agree."""
    from exsim.replay.rundir import config_difference, run_info

    truth = run_info(GOLDEN).config
    old = {"stp": "none", "symbols": [{k: s[k] for k in ("name", "id", "tick_size")}
                                      for s in truth["symbols"]]}
    assert config_difference(old, truth) is None
    old["symbols"][1]["taker_bps"] = 2.5
    assert config_difference(old, truth) == ("symbols[1].taker_bps is 2.5 where the first "
                                             "checkpoint has 0.0")


@pytest.mark.parametrize("command,status", [
    (["verify"], 1), (["rerun"], 1), (["book", "JPM", "--seq", "100"], 2), (["stats", "JPM"], 2),
])
def test_every_reading_command_refuses_an_edited_lot_size_naming_the_catalog(tmp_path, command,
                                                                             status):
    d = _old_dir(tmp_path)
    EDITS["lot_size"][0](d)
    code, out, err = run([command[0], d, *command[1:], "--quiet"])
    text = out + err
    assert code == status, text
    assert "Traceback" not in text
    line = next(x for x in text.splitlines() if "catalog.sqlite" in x)
    assert "lot_size is 5" in line and os.path.join(d, "catalog.sqlite") in line
    if status == 2:
        assert err.startswith("exsim: error: ") and not out


def test_verify_and_rerun_agree_on_the_untouched_golden_directory(tmp_path):
    d = _old_dir(tmp_path)
    assert run(["verify", d, "--quiet"])[0] == 0
    assert run(["rerun", d, "--quiet"])[0] == 0
