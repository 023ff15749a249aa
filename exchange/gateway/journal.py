"""What the gateway needs of the journal it writes to: ``JournalSession``, and how it gets one.

The gateway core (``core.Gateway``) neither opens nor creates a store: the code that composes
the server (``exsim.replay.serving`` for ``exsim serve``) hands ``Gateway.open`` a
``JournalOpener``, a callable with no arguments that returns an open ``JournalSession``.
``store.Session`` satisfies ``JournalSession`` structurally; nothing here names it.

Why an opener and not an open session: a store Session's SQLite catalog serves only the thread
that opened it, and the gateway runs every journal call on its one worker thread, so the
journal must be opened on that thread. ``Gateway.open`` calls the opener there, once.

Invariants of every implementation (what the gateway's crash recovery relies on):
- ``process(orders)`` gives message i of the batch seq ``engine.seq + 1 + i`` (``engine.seq``
  as it was before the call), and returns the engine's ``Result`` only once the batch is durable
  under the journal's policy: an acknowledged batch survives a crash.
- ``read(table, seq=(lo, hi))`` returns the journaled rows of ``table`` ("orders", "fills",
  "l2", "events") with lo <= seq <= hi, in seq order, also after a reopen; order rows hold
  every field of ``ORDER_DTYPE`` by name (a stored form may add fields, e.g. ``seq``).
- ``engine`` is the engine the journal drives, already restored to the last journaled seq
  when the opener returns; the gateway reads it but never calls its ``process`` directly.
- ``data_dir`` is the directory the journal lives in; the gateway keeps its own state in
  ``data_dir/gateway/`` beside it and touches nothing else there.
- Every call on a session comes from the thread that called the opener; ``close`` is called
  once, last.

This module imports only numpy and ``exchange.protocol``: ``exchange/`` depends on nothing
above it (store, replay, scenarios).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol, runtime_checkable

import numpy as np

from exsim.exchange.protocol import Result

if TYPE_CHECKING:
    from exsim.exchange import Engine

__all__ = ["JournalSession", "JournalOpener"]


@runtime_checkable
class JournalSession(Protocol):
    """The members the gateway uses on the journal it writes to (module docstring).

    ``isinstance(x, JournalSession)`` checks that the members exist, not their signatures."""

    @property
    def data_dir(self) -> str:
        """The directory the journal lives in (the gateway's state goes to its ``gateway/``)."""
        ...

    @property
    def engine(self) -> "Engine":
        """The engine the journal drives, at the last journaled seq."""
        ...

    def process(self, orders: np.ndarray) -> Result:
        """Run a batch of ORDER_DTYPE messages through ``engine`` and journal it; return its
        Result once the batch is durable. Raises WriteError (or StoreError) if the batch cannot
        be journaled; the session then refuses further batches."""
        ...

    def read(self, table: str, *, seq: tuple[int, int] | None = None) -> np.ndarray:
        """Return the journaled rows of ``table`` with seq in ``seq`` (inclusive; None: all).
        Raises UsageError for an unknown table, CorruptionError for damaged stored rows."""
        ...

    def close(self) -> None:
        """Make everything journaled durable and release the journal; return None. Raises
        StoreError / WriteError if that fails (what is acknowledged stays recoverable)."""
        ...


# Called once, on the gateway's worker thread; returns an open JournalSession and raises what
# opening or creating the journal raises.
JournalOpener = Callable[[], JournalSession]
