"""Composing the network gateway: a store Session on a data directory, handed to the gateway.

``exchange.gateway`` depends on nothing above ``exchange/``: it writes to any
``JournalSession`` it is given. This module is where ``exsim serve`` (and a Python caller that
wants a gateway on a data directory) chooses the journal: ``session_opener`` opens the
directory's ``store.Session``, or creates it with the symbols of a scenario;
``open_gateway`` and ``serve`` pass that opener to ``Gateway.open`` / the gateway's
``server.serve``.

Invariants:
- A directory holding a catalog is reopened (checkpoint + WAL tail, its own engine); anything
  else is created with the scenario's symbols on an engine with ``ownership=True`` (a gateway
  always enforces that an account touches only its own orders) and ``stp="none"``.
- The opener opens nothing until the gateway calls it, on the gateway's worker thread (a store
  Session serves only the thread that opened it), so options refused by ``Gateway.open`` leave
  the directory untouched.
"""

from __future__ import annotations

import asyncio
import os

from exsim.exchange.gateway import server
from exsim.exchange.gateway.accounts import Accounts
from exsim.exchange.gateway.core import Gateway
from exsim.exchange.gateway.journal import JournalOpener
from exsim.store.catalog import CATALOG_NAME
from exsim.store.session import Session

__all__ = ["session_opener", "open_gateway", "serve"]


def session_opener(data_dir, *, scenario: str = "default", durability: str = "fsync",
                   **session_options) -> JournalOpener:
    """Return a callable with no arguments that returns a ``store.Session`` on ``data_dir``:
    reopened if it holds a catalog, else created with the symbols (and engine options) of
    ``scenario`` (a preset name or a TOML file) under ``durability``.

    Building the opener touches no file and raises only TypeError (``data_dir`` not a path);
    calling it raises what ``Session.open`` / ``Session.create`` and ``load_scenario`` raise
    (StoreError, CorruptionError, UsageError, InputError).
    """
    data_dir = os.fspath(data_dir)

    def open_session() -> Session:
        if os.path.isfile(os.path.join(data_dir, CATALOG_NAME)):
            return Session.open(data_dir, durability=durability, **session_options)
        new = not os.path.exists(data_dir)
        session = _create(data_dir, scenario, durability, session_options)
        if new:   # why: a served directory holds the journal and every account's reports
            os.chmod(data_dir, 0o700)
        return session

    return open_session


def _create(data_dir: str, scenario: str, durability: str, session_options: dict) -> Session:
    """Return a new ``store.Session`` on ``data_dir`` with the symbols of ``scenario``."""
    # why imported here: the engine loads numba and a scenario its presets, and both are
    # needed only for a new directory
    from exsim.exchange import Engine
    from exsim.scenarios.scenario import load_scenario

    sc = load_scenario(scenario)
    engine = Engine(stp="none", ownership=True)   # why ownership: module docstring
    sc.add_symbols(engine)
    return Session.create(data_dir, engine, run_info={"scenario": f"gateway ({sc.name})"},
                          durability=durability, **session_options)


async def open_gateway(data_dir, accounts: Accounts, *, scenario: str = "default",
                       durability: str = "fsync", batch_ns: int = 1_000_000,
                       batch_max: int = 1024, limits=None, **session_options) -> Gateway:
    """Return a running ``Gateway`` on the store Session of ``data_dir`` (``session_opener``:
    reopened, or created with the symbols of ``scenario``); ``limits``: a
    ``exchange.gateway.guard.Limits`` (None: the defaults).

    Raises UsageError for bad options (before anything is opened), what ``session_opener``'s
    opener raises, and StoreError / CorruptionError as ``Gateway.open`` for gateway state that
    is damaged or disagrees with the journal.
    """
    return await Gateway.open(session_opener(data_dir, scenario=scenario, durability=durability,
                                             **session_options),
                              accounts, durability=durability, batch_ns=batch_ns,
                              batch_max=batch_max, limits=limits)


async def serve(data_dir, accounts_path: str, ports: dict, *, scenario: str = "default",
                durability: str = "fsync", batch_ns: int = 1_000_000, batch_max: int = 1024,
                stop: asyncio.Event | None = None, options: dict | None = None,
                allow_weak_hashes: bool = False, limits=None, tls=None,
                allow_plaintext: bool = False) -> None:
    """Run ``exsim serve`` on ``data_dir`` until ``stop`` is set (or SIGINT / SIGTERM): the
    gateway's ``server.serve`` on the store Session ``session_opener`` opens or creates.

    ports: {port name: "HOST:PORT"}; options: {port name: keyword options for its start()}.
    Returns None after a clean stop. Raises what ``exchange.gateway.server.serve`` raises
    (UsageError for an unknown port or bad address, InputError for a bad accounts file) and
    what opening the Session raises. ``allow_weak_hashes``, ``limits``, ``tls`` and
    ``allow_plaintext`` as
    ``exchange.gateway.server.serve``.
    """
    await server.serve(session_opener(data_dir, scenario=scenario, durability=durability),
                       accounts_path, ports, durability=durability, batch_ns=batch_ns,
                       batch_max=batch_max, stop=stop, options=options,
                       allow_weak_hashes=allow_weak_hashes, limits=limits, tls=tls,
                       allow_plaintext=allow_plaintext)
