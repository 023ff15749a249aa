"""Adapters that run one benchmark workload through one system (exsim or a peer a Python user
could pick instead), behind one small interface so the harness (benchmarks/compare.py) treats
them alike.

Invariants:
- ``prepare`` does everything that is not the system's own work (converting numpy rows to the
  peer's call arguments or objects, building files) and is never timed;
- ``run`` times only the system's work and returns an ``Outcome`` with what the system itself
  reported (fills, traded volume, live orders, final top of book), or None where its API does not
  expose that figure: the harness never fills a peer's gap from exsim's output;
- a peer that cannot be installed or cannot express a workload says why (``unavailable``,
  ``cannot``) instead of running a different workload.

Workload kinds: ``match`` (ORDER_DTYPE segments, each on a fresh book; the peer matches them) and
``l2`` (L2_DTYPE rows of one book, replayed as level totals; checked on the final top of book).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Workload", "Outcome", "Peer", "all_peers"]


@dataclass
class Workload:
    """One pre-generated flow. ``segments`` are replayed one after the other, each on a fresh book
    (match: ORDER_DTYPE rows of one book, symbol 0; l2: L2_DTYPE rows, seq ascending)."""

    name: str
    kind: str                      # "match" or "l2"
    segments: list[np.ndarray]
    description: str = ""

    @property
    def messages(self) -> int:
        return int(sum(len(s) for s in self.segments))


@dataclass
class Outcome:
    """What one run reported. None: the system does not expose that figure."""

    seconds: float
    fills: int | None = None            # number of fills (one per resting order touched)
    volume: int | None = None           # total traded quantity
    live: int | None = None             # resting orders at the end (all segments)
    top: tuple | None = None            # final book of the last segment: (bid, bid qty, ask, ask qty)
    extra: dict = field(default_factory=dict)


class Peer(ABC):
    """One system. Subclasses set ``name``, ``kind`` and ``package`` (PyPI name, for the version)."""

    name = "?"
    kind = "match"
    package: str | None = None

    def version(self) -> str:
        if self.package is None:
            return "-"
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version(self.package)
        except PackageNotFoundError:
            return "not installed"

    def unavailable(self) -> str | None:
        """Why this system cannot run here at all, or None."""
        return None

    def cannot(self, wl: Workload) -> str | None:
        """Why this system cannot express ``wl``, or None."""
        return None if wl.kind == self.kind else f"{self.kind} only"

    def prepare(self, wl: Workload):
        return wl

    @abstractmethod
    def run(self, prepared) -> Outcome:
        """Run the prepared workload once (the timed call); return what it produced."""

    def check(self, prepared) -> Outcome:
        """An untimed run that collects what the agreement check needs (default: ``run``)."""
        return self.run(prepared)


def top_tuple(bid, bid_qty, ask, ask_qty) -> tuple:
    """Normalise a top of book: a missing side is (None, 0)."""
    return (None if bid is None else int(bid), int(bid_qty) if bid is not None else 0,
            None if ask is None else int(ask), int(ask_qty) if ask is not None else 0)


def all_peers(peer_python: str | None = None) -> list[Peer]:
    """Every system the comparison knows, exsim first."""
    from .exsim_peer import ExsimL2, ExsimMatch
    from .hftbacktest_peer import HftbacktestL2
    from .lob_peer import LimitOrderBook
    from .matching_engine_peer import MatchingEngine
    from .model_peer import ReferenceModel
    from .order_book_peer import OrderBookL2

    return [ExsimMatch(), ExsimL2(), ReferenceModel(), LimitOrderBook(),
            MatchingEngine(wal=False, python=peer_python), MatchingEngine(wal=True, python=peer_python),
            OrderBookL2(), HftbacktestL2()]
