"""Loading a strategy by name: ``module:Class`` plus ``key=value`` constructor arguments.

The one place the command line's ``--strategy``/``--param`` and ``sweep``'s string specs become a
``Strategy`` instance, so both accept exactly the same spellings.

Invariant: anything that cannot be loaded (an unimportable module, a missing class, arguments the
class rejects, an object that is not a Strategy) raises UsageError naming the spec, never a
traceback from deep inside the import.
"""

from __future__ import annotations

import importlib
import json

from exchange.errors import UsageError

__all__ = ["load_strategy"]


def load_strategy(spec: str, params: list[str]):
    """Return an instance of the ``module:Class`` strategy ``spec`` built with ``params``.

    ``params`` are ``key=value`` strings; values are parsed as JSON when they can be (numbers,
    true/false, lists), else kept as strings. Raises UsageError naming what could not be loaded.
    """
    from replay.backtesting.strategy import Strategy

    module_name, _, class_name = spec.partition(":")
    if not module_name or not class_name:
        raise UsageError(f"--strategy must be MODULE:CLASS; got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UsageError(f"--strategy {spec}: cannot import {module_name!r}: {e}") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise UsageError(f"--strategy {spec}: module {module_name!r} has no {class_name!r}")
    kwargs = {}
    for item in params:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param must be KEY=VALUE; got {item!r}")
        try:
            kwargs[key] = json.loads(raw)
        except json.JSONDecodeError:
            kwargs[key] = raw
    try:
        strategy = cls(**kwargs)
    except TypeError as e:
        raise UsageError(f"--strategy {spec}: {e}") from None
    if not isinstance(strategy, Strategy):
        raise UsageError(f"--strategy {spec}: {class_name} is not a replay.Strategy")
    return strategy
