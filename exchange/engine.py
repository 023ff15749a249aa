"""``Engine``: the public matching engine (``exchange.protocol``'s engine), threads included.

``Engine`` is ``exchange.single.SingleEngine`` (the engine on one set of book state arrays; its
module lists the parts it is made of) plus the ``threads`` option: ``Engine(threads=N)``,
``Engine.from_config(cfg, threads=N)`` and ``Engine.restore(blob, threads=N)`` return an
``exchange.shards.ShardedEngine`` for N > 1. Catalogs record engines by this class's name
(``exchange.engine:Engine``, see ``store.engine_classes``), so it stays here.

Module layering (each imports only those before it): ``arguments`` -> the parts of
``SingleEngine`` -> ``single`` -> ``shards`` (built on ``SingleEngine``) -> ``engine``.

Invariants:
- ``Engine(threads=1)`` is an ``Engine`` whose every call is ``SingleEngine``'s: the threads
  dispatch costs nothing on the per-call path.
- ``threads`` is how the engine runs, not state: ``config()`` and checkpoints do not hold it,
  and every output, checkpoint and ``state_hash`` is byte-identical whatever it is.
- ``restore(b).checkpoint() == b`` for every blob of the current version ``restore`` accepts
  (``exchange.checkpointing``), for any thread count.
"""

from __future__ import annotations

from functools import partial

from .configuration import build_from_config
from .protocol import OutputBuffers, Result
from .shards import ShardedEngine, threads_arg
from .single import SingleEngine

__all__ = ["Engine", "Result", "OutputBuffers"]


class Engine(SingleEngine):
    """A multi-symbol price-time-priority matching engine.

    ``stp`` is the self-trade prevention mode: "none", "cancel_resting", "cancel_incoming" or
    "cancel_both" (or an ``Stp``). ``ownership``: refuse a CANCEL or MODIFY from any trader but
    the order's (NOT_OWNER). ``threads`` > 1 returns an ``exchange.shards.ShardedEngine``
    instead: the symbols split among that many shards, a batch matched on that many threads,
    every output and checkpoint byte-identical to this class's (docs/architecture.md,
    "Threads"); it is how the engine runs, not state, so ``config()`` and checkpoints do not
    hold it. Raises UsageError for an unknown mode, a non-bool ownership or ``threads`` not an
    integer in [1, 64].
    """

    def __new__(cls, *args, threads: int = 1, **kwargs):
        # threads > 1 builds the sharded engine instead (same interface and outputs); the exact
        # int 1 is tested first so the common construction does no argument parsing
        if type(threads) is int and threads == 1:
            return object.__new__(cls)
        if threads_arg(threads) == 1:
            return object.__new__(cls)
        return ShardedEngine(*args, threads=threads, **kwargs)

    def __init__(self, stp: str | int = "none", *, ownership: bool = True, capacity: int = 1024,
                 threads: int = 1):
        # ``threads`` was settled by __new__: an Engine instance is the threads=1 engine
        super().__init__(stp, ownership=ownership, capacity=capacity)

    @classmethod
    def from_config(cls, cfg: dict, *, threads: int = 1) -> "Engine | ShardedEngine":
        """Return a fresh engine (no orders) with the options and symbols of ``cfg`` (what
        ``config()`` returns, or one written before some options existed: a missing symbol
        option takes its default and a missing "ownership" is False, as before the option
        existed); a ``ShardedEngine`` for ``threads`` > 1.

        Raises UsageError naming the key for anything else: a non-dict, an unknown or missing
        key, an id out of order, or a value ``add_symbol`` or ``Engine()`` refuses (``threads``
        as ``Engine()`` takes it)."""
        return build_from_config(partial(cls, threads=threads), cfg)

    @classmethod
    def restore(cls, blob: bytes, *, threads: int = 1) -> "Engine | ShardedEngine":
        """Return a new engine in exactly the state ``blob`` (from ``checkpoint``) describes;
        ``threads`` > 1: the same state in a ``ShardedEngine`` (as ``Engine()`` takes it).

        Everything is checked before state is built (``SingleEngine.restore`` lists the
        checks), so ``restore(b).checkpoint() == b`` for every blob of the current version it
        accepts. Raises UsageError for ``threads`` not an integer in [1, 64] or a ``blob`` that
        is not bytes-like; CorruptionError ("checkpoint: ...", with the row index or header
        field, and the byte offset) for anything else wrong.
        """
        if not (type(threads) is int and threads == 1) and threads_arg(threads) > 1:
            return ShardedEngine.restore(blob, threads=threads)
        return super().restore(blob)
