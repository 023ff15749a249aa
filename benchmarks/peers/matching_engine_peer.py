"""PyPI ``matching-engine`` (pure Python, msgspec commands, sortedcontainers book, optional
checksummed WAL with group commit). It requires Python >= 3.12 (its modules use the ``type``
statement); under an older interpreter the harness runs it in a separate interpreter given by
``--peer-python`` (a Python >= 3.12 with numpy and matching-engine installed), through
``_matching_engine_worker.py``, which times only the engine's loop inside that process.

Mapping: every order is account 1 with self-trade prevention NONE (its default is CANCEL_TAKER);
commands are built before timing. "+ WAL": each command is appended to its Journal (CRC32 framed
records) before it is processed, with one write + fsync per 65,536 commands (group commit, the
same batch size at which exsim's benchmarks fsync). It cannot express modify (cancel/replace
only) nor exsim's post-only on IOC.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from exsim.exchange.schema import Kind, OrderType, Side, Tif

from . import Outcome, Peer, Workload, top_tuple

_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_matching_engine_worker.py")
SYNC_EVERY = 65_536


def _in_process() -> bool:
    if sys.version_info < (3, 12):
        return False
    try:
        import matching_engine  # noqa: F401
    except ImportError:
        return False
    return True


class MatchingEngine(Peer):
    kind = "match"
    package = "matching-engine"

    def __init__(self, wal: bool, python: str | None = None):
        self.wal = wal
        self.python = python
        self.name = "matching-engine + WAL (fsync per 65,536)" if wal else "matching-engine"
        self._version = None

    def unavailable(self):
        if _in_process():
            return None
        if not self.python:
            return (f"needs Python >= 3.12 (this is {sys.version_info.major}.{sys.version_info.minor}); "
                    "pass --peer-python")
        try:
            self._version = subprocess.run([self.python, _WORKER, "--version"], check=True,
                                           capture_output=True, text=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError) as e:
            return f"--peer-python cannot run it ({e})"
        return None

    def version(self) -> str:
        if _in_process():
            import matching_engine

            return matching_engine.__version__
        return self._version or "not installed"

    def cannot(self, wl: Workload):
        if wl.kind != "match":
            return "match only"
        for s in wl.segments:
            if (s["kind"] == Kind.MODIFY).any():
                return "no modify"
            new = s["kind"] == Kind.NEW
            if ((s["tif"][new] != Tif.GTC).any() or (s["order_type"][new] != OrderType.LIMIT).any()
                    or (s["flags"][new] != 0).any()):
                return "adapter maps GTC limits and cancels only"
        return None

    def prepare(self, wl: Workload):
        cols = [np.stack([s["kind"].astype(np.int64), (s["side"] != Side.BUY).astype(np.int64),
                          s["order_id"].astype(np.int64), s["price"], s["qty"]], axis=1)
                for s in wl.segments]
        if _in_process():
            from . import _matching_engine_worker as w

            return [w.build(c) for c in cols]
        fd, path = tempfile.mkstemp(suffix=".npz")
        os.close(fd)
        np.savez(path, **{f"seg{i}": c for i, c in enumerate(cols)})
        return path

    def run(self, prepared) -> Outcome:
        with tempfile.TemporaryDirectory() as wal_dir:
            if _in_process():
                from . import _matching_engine_worker as w

                r = w.run(prepared, wal_dir if self.wal else None, SYNC_EVERY)
            else:
                cmd = [self.python, _WORKER, prepared, "--sync-every", str(SYNC_EVERY)]
                if self.wal:
                    cmd += ["--wal", wal_dir]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
        return Outcome(r["seconds"], fills=r["fills"], volume=r["volume"], live=r["live"],
                       top=top_tuple(*r["top"]))

    def release(self, prepared) -> None:
        if isinstance(prepared, str) and os.path.exists(prepared):
            os.unlink(prepared)
