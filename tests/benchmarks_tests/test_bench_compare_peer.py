"""Your own engine in the throughput comparison (issue 40, item 4): ``--peer MODULE:CLASS`` loads
a Peer subclass by module or file path, and ``ExternalEngine`` runs an engine in another process
on the same flows (generic order-flow files) and is checked and timed like any peer."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

compare = pytest.importorskip("benchmarks.compare")
from benchmarks.peers import Workload  # noqa: E402
from benchmarks.peers.external_peer import ExternalEngine  # noqa: E402
from benchmarks.peers.model_peer import ReferenceModel  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "benchmarks" / "peers" / "example_external_engine.py"


def test_peer_specs_load_by_module_or_file(tmp_path):
    assert isinstance(compare.load_peer("benchmarks.peers.model_peer:ReferenceModel"), ReferenceModel)
    mine = tmp_path / "my_peer.py"
    mine.write_text("from benchmarks.peers.external_peer import ExternalEngine\n\n"
                    "class MyEngine(ExternalEngine):\n    command = ['./my_engine']\n")
    peer = compare.load_peer(f"{mine}:MyEngine")
    assert type(peer).__name__ == "MyEngine" and peer.command == ["./my_engine"]
    for spec, why in (("nocolon", "MODULE:CLASS"), ("benchmarks.nope:X", "cannot import"),
                      ("benchmarks.peers:Workload", "not a Peer subclass"),
                      ("missing.py:X", "no such file")):
        with pytest.raises(ValueError, match=why):
            compare.load_peer(spec)


def test_an_external_engine_is_checked_and_timed_on_the_same_flow(monkeypatch):
    flow = compare.seeded_flow(2_000)
    wl = Workload("tiny", "match", [flow, flow[:500]], "seeded flow, 2,000 + 500 messages")
    good = ExternalEngine([sys.executable, str(EXAMPLE)], name="example engine")
    report = compare.run_compare([wl], [good], rounds=1, log=lambda s: None)
    row = next(r for r in report["rows"] if r["system"] == "example engine")
    assert row["agrees"] and row["agreement"].startswith("agrees: fills, volume, live, top"), row
    assert row["msgs_per_s"] > 0 and row["reported"]["volume"] > 0


def test_an_external_engine_without_a_command_says_how_to_give_one(monkeypatch):
    monkeypatch.delenv("EXSIM_PEER_COMMAND", raising=False)
    assert "EXSIM_PEER_COMMAND" in ExternalEngine().unavailable()
    monkeypatch.setenv("EXSIM_PEER_COMMAND", "/nonexistent/engine --fast")
    peer = ExternalEngine()
    assert peer.command == ["/nonexistent/engine", "--fast"] and "not found" in peer.unavailable()
