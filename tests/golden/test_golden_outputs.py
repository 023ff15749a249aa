"""Behaviour kept: today's code reproduces every digest in tests/golden/outputs.json.

The digests were taken through the public API (tests/golden/capture.py) on the preset scenarios,
the real samples in ../shared/data, and ``tests/golden/run_v1``, a data directory written by the
store of 2026-12-01 with an unsealed WAL tail. A move of code that keeps behaviour keeps them all;
a deliberate change of behaviour regenerates the file in its own commit
(``python -m tests.golden.capture --write``).
"""

from __future__ import annotations

import json

import pytest

from tests.golden import capture

EXPECTED = json.load(open(capture.OUTPUTS))


@pytest.fixture(scope="module")
def got():
    return capture.capture()


def test_every_job_of_the_golden_file_still_runs(got):
    # jobs on a real sample that is absent here are skipped, never the generated ones
    missing = sorted(k for k in EXPECTED if k not in got)
    assert all(k.split(":")[1] in ("quantcup", "lobster") or "lobster" in k or "binance" in k
               for k in missing), missing


@pytest.mark.parametrize("group", ["engine", "store", "old_dir", "backtest", "whatif", "sweep"])
def test_outputs_are_byte_identical_to_the_golden_digests(got, group):
    want = {k: v for k, v in EXPECTED.items() if k.split(":")[0] == group and k in got}
    assert want, f"no golden digests for {group}"
    moved = sorted(k for k, v in want.items() if got[k] != v)
    assert not moved, f"outputs changed for {moved}"
