"""Engine classes a data directory may be restored with, by the name its catalog records.

Invariants:
- A name read from a catalog is only ever looked up in ``ENGINE_CLASSES``; nothing a data
  directory names is imported. A value is a class, or a "module:attr" path written here in
  code (trusted, imported on first use: importing exchange.engine loads numba).
- ``register_engine_class`` and lookups are safe from several threads.
"""

from __future__ import annotations

import threading

from exsim.exchange.errors import StoreError, UsageError

__all__ = ["ENGINE_CLASSES", "register_engine_class", "registered_engine_class", "class_name"]

# The engine classes ``Session.open`` may restore by the name a catalog records. A value is the
# class, or a "module:attr" path written here in code (trusted, imported on first use: importing
# exchange.engine loads numba). A name read from a catalog is only ever looked up here.
ENGINE_CLASSES: dict[str, object] = {
    "exchange.engine:Engine": "exsim.exchange.engine:Engine",
    "exsim.exchange.engine:Engine": "exsim.exchange.engine:Engine",
}
# The name catalogs record for exsim's own engine. It is the class's path from before the
# ``exsim`` namespace, kept so that a directory written by any exsim version opens in any other
# and catalogs stay byte-identical across the move.
STORED_NAMES = {"exsim.exchange.engine:Engine": "exchange.engine:Engine"}
_registry_lock = threading.Lock()


def class_name(cls) -> str:
    """Return the name ``Session.create`` records for an engine class: "module:QualName", or
    for exsim's own engine the name every catalog has recorded for it (``STORED_NAMES``)."""
    name = f"{cls.__module__}:{cls.__qualname__}"
    return STORED_NAMES.get(name, name)


def register_engine_class(cls, name: str | None = None) -> str:
    """Let ``Session.open`` restore directories whose catalog names ``name`` with ``cls``.

    ``name`` defaults to ``"module:QualName"`` of ``cls`` (what ``Session.create`` records).
    Returns the name. Raises UsageError if ``cls`` has no ``restore``.
    """
    if not callable(getattr(cls, "restore", None)):
        raise UsageError(f"register_engine_class: {cls!r} has no restore(blob) classmethod")
    name = name or class_name(cls)
    with _registry_lock:
        ENGINE_CLASSES[name] = cls
    return name


def registered_engine_class(name, catalog_path: str):
    """Return the class ``ENGINE_CLASSES`` holds for the catalog's engine class name.

    Raises StoreError naming the catalog if the name is not registered (nothing is imported).
    """
    entry = ENGINE_CLASSES.get(name) if isinstance(name, str) else None
    if entry is None:
        shown = repr(name)[:200]
        raise StoreError(f"{catalog_path}: the catalog names engine class {shown}, which is not a "
                         f"registered engine class ({', '.join(sorted(ENGINE_CLASSES))}); opening "
                         "a data directory never imports code it names: pass engine_class= to "
                         "Session.open, or register the class with "
                         "exsim.store.session.register_engine_class")
    if isinstance(entry, str):   # a trusted path written in code above, not read from data
        import importlib

        mod, _, attr = entry.partition(":")
        cls = importlib.import_module(mod)
        for part in attr.split("."):
            cls = getattr(cls, part)
        with _registry_lock:
            ENGINE_CLASSES[name] = cls
        entry = cls
    return entry
