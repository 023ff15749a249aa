"""verify's room: independent checks of every deal of a stored run against the orders behind it.

The public names are ``exsim.replay.verify``, ``verify_arrays``, ``VerifyReport`` and
``Violation`` (``replay/__init__.py`` loads them from here on first use); this package's own
``__init__`` imports nothing, so importing one module does not load numba kernels it does not need.

Modules, each importing only those above it in this list (the dependency graph is a DAG, imports
inside functions included):

- ``book``          the verifier's own order book: slot arena, id hash, FIFO levels, ladders
- ``rules``         rule and detail codes, and ``_viol`` (the one way to record a violation)
- ``orders``        stops, icebergs, expiry, tick tables and lots: the kernel's order helpers
- ``walk``          one order's walk through the book: its fills and the reports they cause
- ``kernel``        the message loop that checks a symbol's rows against that book
- ``plain``         the same loop for plain continuous messages only (compiled without the rest)
- ``seed``          a book built from a checkpoint, and the canonical form that compares states
- ``phases``        phase options, where a symbol's phase activity begins, ``band`` before it
- ``uncross``       the rules' uncross and auction allocation for a call book
- ``auction_book``  the phase checker's book, seeded from the kernel's state
- ``auctions``      ``PhaseChecker``: phases, auctions, bands from the hand-over on
- ``report``        ``Violation`` and ``VerifyReport``
- ``options``       a run's engine config as per-symbol options, written into kernel states
- ``symbol``        one symbol's checks: the plain kernel, the kernel, then the phase checker
- ``split``         seq blocks between checkpoints checked on threads, folded as one walk
- ``run``           ``verify`` and ``verify_arrays``: the run-wide checks and the report

Invariant: nothing here imports the engine's matching code (``exchange``) beyond the schema
codes, the errors and the numba cache guard; the verifier is a second implementation written
from docs/semantics.md.
"""
