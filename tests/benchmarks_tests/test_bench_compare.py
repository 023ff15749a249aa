"""Smoke test of the peer benchmark harness (benchmarks/compare.py) on a tiny flow, with exsim and
the reference model only: the agreement check passes for a correct peer and flags a wrong one,
which then gets no speed."""

from __future__ import annotations

import pytest

from exsim.exchange.schema import Kind

compare = pytest.importorskip("benchmarks.compare")
from benchmarks.peers import Outcome, Workload  # noqa: E402
from benchmarks.peers.model_peer import ReferenceModel  # noqa: E402


class DropsCancels(ReferenceModel):
    """A deliberately wrong peer: it ignores every cancel, so it matches orders exsim cancelled."""

    name = "drops cancels"

    def prepare(self, wl):
        return [s[s["kind"] != Kind.CANCEL] for s in wl.segments]


@pytest.fixture(scope="module")
def report():
    flow = compare.seeded_flow(3_000)
    wl = Workload("tiny", "match", [flow, flow[:1_000]], "seeded flow, 3,000 + 1,000 messages")
    return compare.run_compare([wl], [ReferenceModel(), DropsCancels()], rounds=2, log=lambda s: None)


def _row(report, system):
    return next(r for r in report["rows"] if r["system"] == system)


def test_reference_model_agrees_with_exsim_and_gets_a_speed(report):
    row = _row(report, "reference model (tests/model.py)")
    assert row["agrees"] and row["agreement"].startswith("agrees: fills, volume, live, top")
    assert row["msgs_per_s"] > 0 and len(row["seconds"]) == 2
    assert row["reported"]["fills"] > 0 and row["reported"]["volume"] > 0


def test_wrong_peer_is_flagged_and_not_timed(report):
    row = _row(report, "drops cancels")
    assert not row["agrees"] and row["agreement"].startswith("DISAGREES")
    assert row["msgs_per_s"] is None and "ratio" not in row


def test_exsim_runs_twice_for_the_noise_floor(report):
    repeat = _row(report, "exsim (repeat)")
    assert repeat["verdict"] in ("tie", "faster", "slower")
    assert report["floors"]["tiny"] == pytest.approx(abs(repeat["ratio"] - 1.0))


def test_a_peer_that_reports_no_volume_cannot_agree():
    ref = Outcome(1.0, fills=3, volume=30, live=2, top=(99, 1, 101, 2))
    ok, text = compare.agreement(ref, Outcome(1.0, live=2, top=(99, 1, 101, 2)), "match")
    assert not ok and "no traded volume" in text
    ok, text = compare.agreement(ref, Outcome(1.0, volume=30, live=2, top=(99, 1, 101, 2)), "match")
    assert ok and "fills not exposed" in text


def test_markdown_table_goes_between_the_doc_markers(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"# B\n{compare.BEGIN}\nold\n{compare.END}\ntail\n")
    compare.write_docs("| new |", doc)
    assert doc.read_text() == f"# B\n{compare.BEGIN}\n| new |\n{compare.END}\ntail\n"


def _report(workloads, rounds=3, messages=1000, tag="old"):
    rows = [{"system": s, "workload": w, "ratio": 1.0, "tag": tag, "version": "0", "agreement": "a"}
            for w in workloads for s in ("exsim", "exsim (repeat)")]
    return {"rows": rows, "workloads": [{"name": w, "description": tag} for w in workloads],
            "floors": {w: 0.1 for w in workloads}, "rounds": rounds, "messages": messages,
            "storage": [tag], "command": f"python -m benchmarks.compare --{tag}",
            "machine": {}, "wall_seconds": 1.0}


def test_update_replaces_only_the_rerun_workloads_and_keeps_their_order():
    old = _report(["seeded", "quantcup", "l2-seeded", "l2-binance"])
    new = _report(["l2-binance"], rounds=5, tag="new")
    merged = compare.merge_reports(old, new)
    assert [w["name"] for w in merged["workloads"]] == ["seeded", "quantcup", "l2-seeded", "l2-binance"]
    assert {r["workload"] for r in merged["rows"] if r["tag"] == "new"} == {"l2-binance"}
    assert [r["workload"] for r in merged["rows"]][-2:] == ["l2-binance", "l2-binance"]
    assert merged["command"] == "python -m benchmarks.compare --old; then python -m benchmarks.compare --new"
    assert merged["rounds_by_workload"] == {"seeded": 3, "quantcup": 3, "l2-seeded": 3, "l2-binance": 5}
    assert "3/3/3/5 (per workload)" in compare.markdown({**merged, "machine": {
        "cpu": "c", "cores": 2, "python": "3", "numpy": "2", "numba": "0"}, "storage": []})


def test_update_refuses_a_report_of_other_flows():
    with pytest.raises(SystemExit, match="--messages 1000.*this run 5"):
        compare.merge_reports(_report(["seeded"]), _report(["seeded"], messages=5))


def test_unknown_workload_names_the_choices(capsys):
    with pytest.raises(SystemExit):
        compare.main(["--workloads", "l2-binance,nope"])
    assert "unknown workload nope; choose from seeded, quantcup" in capsys.readouterr().err


def test_smoke_mode_shrinks_sizes_and_moves_reports_out_of_the_checkout(tmp_path, monkeypatch):
    from benchmarks import _smoke

    monkeypatch.delenv(_smoke.ENV, raising=False)
    assert _smoke.scaled(1_000_000, 10) == 1_000_000
    assert _smoke.out_path("benchmarks/results/x.json") == _smoke.Path("benchmarks/results/x.json")
    monkeypatch.setenv(_smoke.ENV, "1")
    monkeypatch.setenv(_smoke.DIR_ENV, str(tmp_path / "smoke"))
    assert _smoke.scaled(1_000_000, 10) == 10 and _smoke.scaled(3, 10) == 3
    assert _smoke.out_path("benchmarks/results/x.json") == tmp_path / "smoke" / "x.json"
    assert _smoke.results_path("store.json").parent.is_dir()


def test_a_cut_peer_is_checked_and_timed_on_its_cut_only():
    flow = compare.seeded_flow(3_000)
    wl = Workload("tiny", "match", [flow, flow[:1_000]], "seeded flow, 3,000 + 1,000 messages")
    model, wrong = ReferenceModel(), DropsCancels()
    got = compare.run_compare([wl], [model, wrong], rounds=1, log=lambda s: None,
                              cuts={model.name: 1_500, wrong.name: 1_500})
    row = _row(got, model.name)
    # the first segment is cut to 1,500, the second (1,000) is kept whole
    assert row["agrees"] and row["messages"] == 2_500 and "first 1,500" in row["agreement"]
    assert row["msgs_per_s"] == pytest.approx(2_500 / row["seconds"][0])
    assert not _row(got, wrong.name)["agrees"]      # a wrong peer still disagrees on the cut
    assert _row(got, "exsim")["messages"] == 4_000
    assert compare.cut_workload(wl, 5_000) is wl and compare.cut_workload(wl, None) is wl
