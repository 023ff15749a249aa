"""Loading a strategy by name: ``module:Class`` plus ``key=value`` constructor arguments.

The one place the command line's ``--strategy``/``--param`` and ``sweep``'s string specs become a
``Strategy`` instance, so both accept exactly the same spellings.

Invariant: anything that cannot be loaded (an unimportable module, a missing class, arguments the
class rejects, an object that is not a Strategy) raises UsageError naming the spec, never a
traceback from deep inside the import.
"""

from __future__ import annotations

import importlib
import inspect
import json

from exchange.errors import UsageError

__all__ = ["load_strategy", "MOVED_MODULES"]

# strategy modules that scripts and notebooks name by the path they had before the layout of
# rooms (scenarios never imports replay, so the examples live in replay.backtesting.strategies)
MOVED_MODULES = {
    "scenarios.strategies": "replay.backtesting.strategies",
    "scenarios.strategies.market_maker": "replay.backtesting.strategies.market_maker",
    "scenarios.strategies.momentum": "replay.backtesting.strategies.momentum",
}


def load_strategy(spec: str, params: list[str]):
    """Return an instance of the ``module:Class`` strategy ``spec`` built with ``params``.

    ``params`` are ``key=value`` strings; values are parsed as JSON when they can be (numbers,
    true/false, lists), else kept as strings. Raises UsageError naming what could not be loaded.
    """
    from replay.backtesting.strategy import Strategy

    module_name, _, class_name = spec.partition(":")
    if not module_name or not class_name:
        raise UsageError(f"--strategy must be MODULE:CLASS; got {spec!r}")
    module_name = MOVED_MODULES.get(module_name, module_name)
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
    _check_param_types(spec, cls, kwargs)
    try:
        strategy = cls(**kwargs)
    except TypeError as e:
        raise UsageError(f"--strategy {spec}: {e}") from None
    if not isinstance(strategy, Strategy):
        raise UsageError(f"--strategy {spec}: {class_name} is not a replay.Strategy")
    return strategy


def _check_param_types(spec: str, cls, kwargs: dict) -> None:
    """Raise UsageError for a ``--param`` whose value is not of the type of that argument's
    default (an int, float or bool default): the strategy would otherwise fail later, deep in
    a comparison, with a message that names neither the option nor the argument."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return
    for key, value in kwargs.items():
        p = params.get(key)
        if p is None or p.default is inspect.Parameter.empty or p.default is None:
            continue
        want = type(p.default)
        if want is bool:
            ok = isinstance(value, bool)
        elif want is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif want is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            continue
        if not ok:
            raise UsageError(f"--param {key}={value}: {spec}'s {key} takes "
                             f"{'a' if want is not int else 'an'} {want.__name__} "
                             f"(default {p.default!r})")
