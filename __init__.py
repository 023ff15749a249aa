"""exsim: a deterministic exchange simulator, as one import namespace.

The repository's top-level folders are the package's rooms: ``exchange/`` is installed as
``exsim.exchange`` (the matching engine), ``store/`` as ``exsim.store`` (journal, segments,
catalog), ``replay/`` as ``exsim.replay`` (book_at, verify, rerun, backtests, the CLI) and
``scenarios/`` as ``exsim.scenarios`` (generators, loaders). ``tests/``, ``benchmarks/`` and
``docs/`` are not installed.

This module is the short public surface; every name is imported on first use (PEP 562), so
``import exsim`` loads neither numba nor the store:

>>> import exsim
>>> eng = exsim.Engine()
>>> _ = eng.add_symbol("JPM")
>>> _ = eng.submit("JPM", "sell", price=101, qty=5, trader=1)
>>> int(eng.submit("JPM", "buy", price=102, qty=3, trader=2).fills["price"][0])
101
"""

from __future__ import annotations

import importlib
import os
import sys

# public name -> the module that defines it (the one table to extend; __all__ follows it)
_EXPORTS = {
    # the engine and its schema
    "Engine": "exsim.exchange", "Result": "exsim.exchange", "ORDER_DTYPE": "exsim.exchange",
    "FILL_DTYPE": "exsim.exchange", "L2_DTYPE": "exsim.exchange", "EVENT_DTYPE": "exsim.exchange",
    "Side": "exsim.exchange", "Kind": "exsim.exchange", "OrderType": "exsim.exchange",
    "Tif": "exsim.exchange", "Flag": "exsim.exchange", "Event": "exsim.exchange",
    "Reason": "exsim.exchange", "Stp": "exsim.exchange", "Phase": "exsim.exchange",
    "ExsimError": "exsim.exchange", "UsageError": "exsim.exchange",
    "InputError": "exsim.exchange", "StoreError": "exsim.exchange",
    "CorruptionError": "exsim.exchange", "VerificationError": "exsim.exchange",
    # the store
    "Session": "exsim.store", "Reader": "exsim.store", "read": "exsim.store",
    "read_columns": "exsim.store", "read_checkpoint": "exsim.store", "compact": "exsim.store",
    # replay and backtests
    "book_at": "exsim.replay", "verify": "exsim.replay", "rerun": "exsim.replay",
    "stats": "exsim.replay", "backtest": "exsim.replay", "sweep": "exsim.replay",
    "whatif": "exsim.replay", "Strategy": "exsim.replay", "QuoteStrategy": "exsim.replay",
    "L2Flow": "exsim.replay", "ConstantLatency": "exsim.replay",
    # order flow
    "load_scenario": "exsim.scenarios", "open_flow": "exsim.scenarios",
    "load_lobster": "exsim.scenarios", "load_binance": "exsim.scenarios",
    "load_dbn": "exsim.scenarios", "load_quantcup": "exsim.scenarios",
    # compiling ahead of use
    "warmup": "exsim.replay.warmup",
}

__all__ = list(_EXPORTS)

ENV_CACHE_DIR = "EXSIM_CACHE_DIR"


def _configure_numba_cache(package_dir: str, environ=os.environ) -> str | None:
    """Choose numba's cache folder for exsim's kernels; return the folder set, or None when
    numba's default (``__pycache__`` beside the sources) is kept.

    Kept when ``NUMBA_CACHE_DIR`` is already set (the user's choice) or ``package_dir`` is
    writable (a checkout, an editable or a user install). Otherwise (a system install, a
    read-only container layer, where numba would compile again in every process)
    ``NUMBA_CACHE_DIR`` is set to ``$EXSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/exsim/numba``,
    else ``~/.cache/exsim/numba``. Runs at ``import exsim``, before any exsim module imports
    numba (numba reads the variable once, when it is imported). Never raises.
    """
    try:
        if environ.get("NUMBA_CACHE_DIR") or os.access(package_dir, os.W_OK):
            return None
        folder = environ.get(ENV_CACHE_DIR) or os.path.join(
            environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
            "exsim", "numba")
        environ["NUMBA_CACHE_DIR"] = folder
        numba_config = sys.modules.get("numba.core.config")
        if numba_config is not None:   # numba was imported first: its config read the old value
            numba_config.CACHE_DIR = folder
        return folder
    except Exception:   # why broad: choosing a cache folder must never break an import
        return None


_configure_numba_cache(os.path.dirname(os.path.abspath(__file__)))


def __getattr__(name: str):
    """Return the public object ``name``, importing its module on first use; raise
    AttributeError for any other name."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'exsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value   # later lookups skip this hook
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
