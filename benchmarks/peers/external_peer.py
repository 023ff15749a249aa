"""A matching engine in another process (C, C++, Rust, Java ...), compared on the same flows.

The harness writes each segment of a ``match`` workload to a file in exsim's generic order-flow
format (CSV, docs/data-formats.md; ``scenarios.loaders.generic.write_generic``, what
``exsim export RUN orders --format flow`` writes) and runs ``command + [segment files...]``:

- each file is one fresh book; its rows are ``ts,symbol,kind,side,type,tif,order_id,price,qty,
  trader,flags`` (integer ticks and lots; words NEW/CANCEL/MODIFY, BUY/SELL, LIMIT/MARKET,
  GTC/IOC/FOK), in the order the engine takes them;
- the command prints, as its last stdout line, one JSON object: ``seconds`` (its own matching
  time over all files, timed inside it: reading and parsing the files are not matching),
  ``fills`` (one per resting order touched), ``volume`` (traded quantity), ``live`` (resting
  orders left, all files) and ``top`` ([bid, bid_qty, ask, ask_qty] of the last file's book;
  null for an empty side's price). A figure it cannot give is null or absent; volume is needed.
- a non-zero exit status or a last line that is not that JSON makes the run fail with its stderr.

The command comes from the class attribute ``command`` (subclass it) or, by default, from the
environment variable EXSIM_PEER_COMMAND (split as a shell would): ``EXSIM_PEER_COMMAND=./my_engine
python -m benchmarks.compare --peer benchmarks.peers.external_peer:ExternalEngine``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

from . import Outcome, Peer, Workload, top_tuple

__all__ = ["ExternalEngine", "ExampleEngine", "ENV_COMMAND"]

ENV_COMMAND = "EXSIM_PEER_COMMAND"


class ExternalEngine(Peer):
    """A peer behind a command line (module docstring). ``name`` defaults to the command."""

    kind = "match"
    command: list[str] | None = None

    def __init__(self, command: list[str] | None = None, name: str | None = None):
        if command is not None:
            self.command = list(command)
        elif self.command is None and os.environ.get(ENV_COMMAND):
            self.command = shlex.split(os.environ[ENV_COMMAND])
        self.name = name or (f"external: {' '.join(self.command)}" if self.command else "external")

    def unavailable(self) -> str | None:
        if not self.command:
            return f"no command: set {ENV_COMMAND} or subclass ExternalEngine with a command"
        if shutil.which(self.command[0]) is None and not os.path.isfile(self.command[0]):
            return f"{self.command[0]}: not found"
        return None

    def prepare(self, wl: Workload):
        from exsim.scenarios.loaders.generic import write_generic

        folder = tempfile.mkdtemp(prefix="exsim-peer-")
        files = []
        for k, seg in enumerate(wl.segments):
            path = os.path.join(folder, f"segment{k}.csv")
            write_generic(path, seg, [("S0", 1)])
            files.append(path)
        return folder, files

    def release(self, prepared) -> None:
        """Remove the segment files ``prepare`` wrote."""
        shutil.rmtree(prepared[0], ignore_errors=True)

    def run(self, prepared) -> Outcome:
        _, files = prepared
        p = subprocess.run([*self.command, *files], capture_output=True, text=True, timeout=3600)
        lines = p.stdout.strip().splitlines()
        if p.returncode != 0 or not lines:
            raise RuntimeError(f"{' '.join(self.command)} exited {p.returncode}: {p.stderr[-2000:]}")
        try:
            got = json.loads(lines[-1])
            seconds = float(got["seconds"])
        except (ValueError, KeyError, TypeError) as e:
            raise RuntimeError(f"{' '.join(self.command)}: its last line is not the result JSON "
                               f"({e}): {lines[-1][:200]!r}") from None
        top = got.get("top")
        return Outcome(seconds, fills=got.get("fills"), volume=got.get("volume"), live=got.get("live"),
                       top=None if top is None else top_tuple(*top))


class ExampleEngine(ExternalEngine):
    """``example_external_engine.py`` (exsim's Engine behind the command-line protocol) as a
    peer: what a subclass for your own binary looks like, and a check that the protocol works
    (``--peer benchmarks.peers.external_peer:ExampleEngine``)."""

    command = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            "example_external_engine.py")]

    def __init__(self):
        super().__init__(name="example external engine (exsim behind the file protocol)")
