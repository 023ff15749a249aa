"""Short reprs for notebooks (issue 18): VerifyReport, RerunReport and BookView in one line and a
small HTML table whatever their size (``replay.reprs``)."""

from __future__ import annotations

import numpy as np

from exsim.exchange.schema import DEPTH_DTYPE, FILL_DTYPE

from exsim.replay.determinism import Divergence, RerunReport
from exsim.replay.rebuild import BookView
from exsim.replay.reprs import (MAX_ROWS, book_view_html, book_view_repr, rerun_report_html,
                          rerun_report_repr, verify_report_html, verify_report_repr)
from exsim.replay.verification.report import VerifyReport, Violation


def _book(n=10_000):
    bids, asks = np.zeros(n, DEPTH_DTYPE), np.zeros(n, DEPTH_DTYPE)
    bids["price"], asks["price"] = np.arange(1000, 1000 - n, -1), np.arange(1001, 1001 + n)
    bids["qty"], asks["qty"], bids["count"], asks["count"] = 5, 7, 1, 2
    return BookView(seq=42, ts=9, bids=bids, asks=asks, symbol="JPM<x>")


def test_a_big_failed_verify_report_is_one_line_and_a_short_table():
    vs = [Violation(i, "price_time_priority", f"detail {i}") for i in range(1000)]
    rep = VerifyReport(False, vs, {"orders": 2_000_000, "fills": 9, "symbols": 2,
                                   "violations": {"price_time_priority": 1500, "other": 0}})
    text = verify_report_repr(rep)
    assert "\n" not in text and len(text) < 200
    assert "FAILED, 1,500 violation(s)" in text and "2,000,000 orders" in text and "seq 0" in text
    page = verify_report_html(rep)
    assert page.count("detail ") == MAX_ROWS and "995 more" in page and "other" not in page
    assert verify_report_repr(VerifyReport(True, [], {})).startswith("<VerifyReport ok")


def test_a_rerun_report_names_its_first_divergence():
    row = np.zeros(1, FILL_DTYPE)[0]
    rep = RerunReport(False, {"fills": 10, "l2": 20}, Divergence("fills", 17, row, None), 1.5,
                      "rows", "digests missing")
    assert rerun_report_repr(rep) == ("<RerunReport DIVERGED at seq 17 in fills: 30 rows "
                                      "compared (rows), 1.5 s>")
    page = rerun_report_html(rep)
    assert "digests missing" in page and "seq 17" in page and "None" in page


def test_a_deep_book_is_one_line_and_its_best_levels_escaped():
    book = _book()
    text = book_view_repr(book)
    assert text == ("<BookView JPM<x> at seq 42 (ts 9): bid 1000 x 5, ask 1001 x 7, "
                    "10,000/10,000 levels>")
    page = book_view_html(book)
    assert page.count("<tr>") == MAX_ROWS + 1 and "JPM&lt;x&gt;" in page and len(page) < 2000
    empty = BookView(0, None, np.zeros(0, DEPTH_DTYPE), np.zeros(0, DEPTH_DTYPE))
    assert "bid -, ask -" in book_view_repr(empty)
