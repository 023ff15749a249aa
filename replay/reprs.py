"""Short reprs for notebooks: one line (``__repr__``) and a small HTML table (``_repr_html_``) for
``VerifyReport``, ``RerunReport`` and ``BookView``, so evaluating one in a cell never prints its
arrays or every violation.

Invariants: a repr is one line whatever the size of the object (counts, not contents); the HTML
names at most ``MAX_ROWS`` violations or levels per side and escapes every value. The functions
read attributes only (duck typing), so they import neither the verifier nor the rebuild module.
"""

from __future__ import annotations

import html

__all__ = ["MAX_ROWS", "verify_report_repr", "verify_report_html", "rerun_report_repr",
           "rerun_report_html", "book_view_repr", "book_view_html"]

MAX_ROWS = 5


def _table(rows, head=None) -> str:
    """An HTML table of ``rows`` (each a sequence of cells), every cell escaped."""
    def tr(cells, tag="td"):
        return "<tr>" + "".join(f"<{tag}>{html.escape(str(c))}</{tag}>" for c in cells) + "</tr>"
    return ("<table>" + (tr(head, "th") if head else "") + "".join(tr(r) for r in rows)
            + "</table>")


def _violations(report) -> int:
    counts = report.summary.get("violations", {})
    return int(sum(counts.values())) if isinstance(counts, dict) else len(report.violations)


def verify_report_repr(report) -> str:
    """Return one line: ok or failed, the messages checked and the violation count."""
    s = report.summary
    head = "ok" if report.ok else f"FAILED, {_violations(report):,} violation(s)"
    first = ""
    if report.violations:
        v = report.violations[0]
        first = f"; first: seq {v.seq} {v.rule}"
    return (f"<VerifyReport {head}: {int(s.get('orders', 0)):,} orders, "
            f"{int(s.get('fills', 0)):,} fills, {int(s.get('symbols', 0)):,} symbol(s){first}>")


def verify_report_html(report) -> str:
    """Return the headline, the violations per rule that occurred and the first ``MAX_ROWS``
    violations as HTML."""
    counts = report.summary.get("violations", {}) or {}
    per_rule = [(rule, f"{n:,}") for rule, n in counts.items() if n]
    shown = [(v.seq, v.rule, v.detail) for v in report.violations[:MAX_ROWS]]
    more = len(report.violations) - len(shown)
    return ("<div><b>" + html.escape(verify_report_repr(report)[1:-1]) + "</b>"
            + (_table(per_rule, ["rule", "violations"]) if per_rule else "")
            + (_table(shown, ["seq", "rule", "detail"]) if shown else "")
            + (f"<p>... {more:,} more</p>" if more > 0 else "") + "</div>")


def rerun_report_repr(report) -> str:
    """Return one line: ok or where it first diverged, rows compared, mode, seconds."""
    rows = sum(int(v) for v in report.counts.values() if isinstance(v, (int, float)))
    d = report.first_divergence
    head = "ok" if report.ok else (f"DIVERGED at seq {d.seq} in {d.table}" if d else "FAILED")
    return (f"<RerunReport {head}: {rows:,} rows compared ({report.mode}), "
            f"{report.seconds:.3g} s>")


def rerun_report_html(report) -> str:
    """Return the headline, the rows compared per table and the first divergence as HTML."""
    d = report.first_divergence
    div = "" if d is None else _table([("stored", d.stored_row), ("rerun", d.rerun_row)],
                                      ["", f"{d.table} at seq {d.seq}"])
    fallback = f"<p>row comparison: {html.escape(report.fallback)}</p>" if report.fallback else ""
    return ("<div><b>" + html.escape(rerun_report_repr(report)[1:-1]) + "</b>"
            + _table(list(report.counts.items()), ["table", "rows"]) + fallback + div + "</div>")


def _best(levels) -> str:
    return "-" if levels is None or not len(levels) else \
        f"{int(levels[0]['price'])} x {int(levels[0]['qty'])}"


def book_view_repr(book) -> str:
    """Return one line: symbol, seq/ts, best bid and ask (price x qty), levels per side."""
    extra = ""
    if book.orders is not None:
        extra += f", {len(book.orders):,} orders"
    if book.stops is not None:
        extra += f", {len(book.stops):,} stops"
    return (f"<BookView {book.symbol or '?'} at seq {book.seq} (ts {book.ts}): "
            f"bid {_best(book.bids)}, ask {_best(book.asks)}, {len(book.bids):,}/"
            f"{len(book.asks):,} levels{extra}>")


def book_view_html(book) -> str:
    """Return the headline and the best ``MAX_ROWS`` levels of each side as HTML."""
    n = max(min(len(book.bids), MAX_ROWS), min(len(book.asks), MAX_ROWS))

    def cell(levels, i, k):
        return int(levels[i][k]) if i < len(levels) else ""
    rows = [(cell(book.bids, i, "count"), cell(book.bids, i, "qty"), cell(book.bids, i, "price"),
             cell(book.asks, i, "price"), cell(book.asks, i, "qty"), cell(book.asks, i, "count"))
            for i in range(n)]
    return ("<div><b>" + html.escape(book_view_repr(book)[1:-1]) + "</b>"
            + _table(rows, ["orders", "bid qty", "bid", "ask", "ask qty", "orders"]) + "</div>")
