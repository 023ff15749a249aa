"""exsim replay: rebuild any stored book, verify deals against orders, prove determinism.

>>> from replay import book_at, verify, rerun, stats     # doctest: +SKIP
>>> view = book_at("data/run1", "JPM", seq=1_000)          # doctest: +SKIP

- ``book_at``  the L2 (or L3) book of a symbol after any message (replay/book_at.py)
- ``verify``   independent checks of every fill against the orders and reports (replay/verify.py)
- ``rerun``    the journaled orders through a fresh Engine, outputs compared byte for byte
- ``stats``    mid, spread, microprice, imbalance and VWAP series (replay/analytics.py)
"""

from .analytics import STATS_DTYPE, stats
from .book_at import BookView, book_at
from .rerun import Divergence, RerunReport, rerun
from .verify import Violation, VerifyReport, verify, verify_arrays

__all__ = ["book_at", "BookView", "rerun", "RerunReport", "Divergence", "verify", "verify_arrays",
           "VerifyReport", "Violation", "stats", "STATS_DTYPE"]
