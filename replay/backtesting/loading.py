"""Loading a strategy by name: ``module:Class`` or ``path/to/file.py:Class`` plus ``key=value``
constructor arguments.

A spec whose part before the colon ends in ``.py`` (or holds a path separator) names a file: it
is loaded from that path (relative to the working directory), so a strategy written anywhere
(``exsim new-strategy``) runs without putting its folder on ``PYTHONPATH``. Anything else is a
module name, imported as usual.

The one place the command line's ``--strategy``/``--param`` and ``sweep``'s string specs become a
``Strategy`` instance, so both accept exactly the same spellings.

Invariant: anything that cannot be loaded (an unimportable module, a missing class, arguments the
class rejects, an object that is not a Strategy) raises UsageError naming the spec, never a
traceback from deep inside the import.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import sys

from exsim.exchange.errors import UsageError

__all__ = ["load_strategy", "MOVED_MODULES", "current_module_name", "is_file_spec", "absolute_spec"]

# strategy modules that scripts and notebooks name by the path they had before the layout of
# rooms (scenarios never imports replay, so the examples live in replay.backtesting.strategies)
MOVED_MODULES = {
    "scenarios.strategies": "exsim.replay.backtesting.strategies",
    "scenarios.strategies.market_maker": "exsim.replay.backtesting.strategies.market_maker",
    "scenarios.strategies.momentum": "exsim.replay.backtesting.strategies.momentum",
}
# exsim's packages as scripts, configs and stored run records name them from before they moved
# under the ``exsim`` namespace ("replay.backtesting.strategies:InventoryMarketMaker")
LEGACY_PACKAGES = ("exchange", "store", "replay", "scenarios")


def current_module_name(name: str) -> str:
    """Return the module name under which exsim's own module ``name`` is imported today.

    A name from before the ``exsim`` namespace (``replay.backtesting.strategies``) or the layout
    of rooms (``scenarios.strategies``) maps to its ``exsim.`` module when exsim has one; any
    other name (a user's own module, even one called ``store``) is returned unchanged. Never
    raises.
    """
    name = MOVED_MODULES.get(name, name)
    if name.partition(".")[0] in LEGACY_PACKAGES:
        candidate = f"exsim.{name}"
        try:
            if importlib.util.find_spec(candidate) is not None:
                return candidate
        except (ImportError, ValueError):
            pass
    return name


def load_strategy(spec: str, params: list[str]):
    """Return an instance of the ``module:Class`` or ``file.py:Class`` strategy ``spec`` built
    with ``params``.

    ``params`` are ``key=value`` strings; values are parsed as JSON when they can be (numbers,
    true/false, lists), else kept as strings. Raises UsageError naming what could not be loaded
    (a missing file, a file or module that fails to import, a missing class, bad arguments).
    """
    from exsim.replay.backtesting.strategy import Strategy

    module_name, _, class_name = spec.rpartition(":") if is_file_spec(spec) else spec.partition(":")
    if not module_name or not class_name:
        raise UsageError(f"--strategy must be MODULE:CLASS or FILE.py:CLASS; got {spec!r}")
    if is_file_spec(spec):
        module = _load_file(spec, module_name)
    else:
        module_name = current_module_name(module_name)
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            hint = ""
            if os.path.isfile(module_name.replace(".", os.sep) + ".py"):
                hint = (f" (to load the file {module_name.replace('.', os.sep)}.py give its "
                        f"path: --strategy {module_name.replace('.', os.sep)}.py:{class_name})")
            raise UsageError(f"--strategy {spec}: cannot import {module_name!r}: {e}{hint}") from None
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


def is_file_spec(spec: str) -> bool:
    """Whether strategy ``spec`` names a file (``path.py:Class``) rather than a module."""
    path = spec.rpartition(":")[0] if ":" in spec else spec
    return path.endswith(".py") or os.sep in path or "/" in path


def absolute_spec(spec: str) -> str:
    """Return ``spec`` with a file's path made absolute (a module spec unchanged). why: a sweep's
    worker processes may not share the working directory the path was relative to."""
    if not is_file_spec(spec):
        return spec
    path, _, cls = spec.rpartition(":")
    return f"{os.path.abspath(path)}:{cls}"


def _load_file(spec: str, path: str):
    """Import the Python file ``path`` as a module of its own and return it.

    The module is named after the file's absolute path (so two files called strategy.py do not
    collide) and registered in sys.modules (dataclasses and pickling look their class's module
    up there). Raises UsageError naming ``spec`` if the file is missing or fails to import."""
    if not os.path.isfile(path):
        what = "is a directory" if os.path.isdir(path) else "does not exist"
        raise UsageError(f"--strategy {spec}: the file {path} {what}")
    full = os.path.abspath(path)
    stem = "".join(c if c.isalnum() else "_" for c in os.path.splitext(os.path.basename(full))[0])
    name = f"exsim_strategy_{stem}_{hashlib.sha1(full.encode()).hexdigest()[:8]}"
    loader_spec = importlib.util.spec_from_file_location(name, full)
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    try:
        loader_spec.loader.exec_module(module)
    except Exception as e:   # why broad: a user's file can raise anything while it imports
        sys.modules.pop(name, None)
        raise UsageError(f"--strategy {spec}: importing {path} failed: "
                         f"{type(e).__name__}: {e}") from None
    return module


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
