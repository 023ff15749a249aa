"""The exsim exception family. Message content never raises inside the engine (it gets a reject
code); these are for misuse of the Python API, bad files and broken stores.

    ExsimError
    ├── UsageError          bad arguments to a public function (unknown symbol name, bad option)
    ├── InputError          a malformed or truncated input file (names file, line, expectation)
    ├── StoreError          the data directory cannot be used
    │   ├── CorruptionError a checksum or structure check failed (names file and byte offset)
    │   └── WriteError      a write or fsync failed (disk full, file size limit ...)
    └── VerificationError   replay found a violation (raised only where asked to)
"""

from __future__ import annotations

__all__ = [
    "ExsimError", "UsageError", "InputError", "StoreError", "CorruptionError", "WriteError",
    "VerificationError",
]


class ExsimError(Exception):
    """Base of every error exsim raises on purpose."""


class UsageError(ExsimError, ValueError):
    """A public function was called with arguments it cannot accept."""


class InputError(ExsimError, ValueError):
    """An input file is malformed or truncated; the message names file, line and what was expected."""


class StoreError(ExsimError):
    """The data directory cannot be opened, read or written as asked."""


class CorruptionError(StoreError):
    """A checksum or structural check failed; the message names the file and byte offset."""

    def __init__(self, message: str, path: str = "", offset: int = -1):
        super().__init__(message)
        self.path = path
        self.offset = offset


class WriteError(StoreError):
    """A write or fsync failed; everything acknowledged before it is intact."""


class VerificationError(ExsimError):
    """Replay verification found at least one violation."""
